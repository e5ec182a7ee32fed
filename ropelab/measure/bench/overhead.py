"""Host launch overhead: wall-clock cost per launch over many back-to-back launches."""

from __future__ import annotations

import time

import numpy as np
from numba import cuda

from . import baselines as baseline_rows
from .entries import Buffers, device_ptr, fused_kwargs, fused_user_arrays
from .kinds import LAUNCH_OVERHEAD
from .shapes import OVERHEAD_SHAPE, Shape, plain_shape
from .stats import per_launch_us
from .timer import require_gpu

ROUNDS = 10  # each case's launches are split into this many blocks, taken in turns
WARMUP = 100  # untimed launches of each case first


def _empty():
    pass


def launch_overhead(launches: int = 2000, warmup: int = WARMUP, progress: bool = True) -> list[dict]:
    """Wall-clock host cost per launch over many back-to-back launches.

    ``us_per_launch`` stops the clock when the last launch is enqueued (what the host pays);
    ``us_per_launch_synced`` includes the final synchronize.  The GPU work of each kernel here
    is shorter than its host launch cost, so the queue never fills and the host never waits.
    """
    require_gpu()
    import ropelab

    from ...kernels import flat
    from ...kernels.launch import bind
    from ...kernels.plan import jitted

    # A small shape: each kernel runs shorter than the host needs to launch it, so the launch
    # queue never fills and the wall clock measures the host, not the GPU.
    tokens, hidden = OVERHEAD_SHAPE
    buf = Buffers(plain_shape(tokens, hidden))
    x, out, pos = buf.x, buf.out, buf.positions
    problem = buf.problem()
    empty = cuda.jit(_empty)
    plan = flat.VARIANT.plan(problem)
    flat_kernel = jitted(flat.KERNEL, True)
    n = problem.elements
    bound = bind(plan, ((n, 4), (n, 4), (tokens, 4)))
    ptrs = tuple(device_ptr(a) for a in (x, out, pos))
    tx, tout, tpos = buf.user_arrays()
    x2, out2 = x.reshape(tokens, hidden), out.reshape(tokens, hidden)

    cases = [
        ("numba empty kernel", 0, lambda: empty[1, 32]()),
        (f"ropelab.rope(flat) {type(tx).__module__.split('.')[0]} arrays {tokens}x{hidden}", 6,
         lambda: ropelab.rope(tx, variant="flat", positions=tpos, out=tout)),
        (f"ropelab.rope(flat) numba arrays {tokens}x{hidden}", 6,
         lambda: ropelab.rope(x2, variant="flat", positions=pos, out=out2)),
        (f"ropelab.rope(flat) check_positions=True (syncs) {tokens}x{hidden}", 6,
         lambda: ropelab.rope(tx, variant="flat", positions=tpos, out=tout, check_positions=True)),
        (f"ropelab.rope(flat) positions=None, new out {tokens}x{hidden}", 6,
         lambda: ropelab.rope(tx, variant="flat")),
        (f"ropelab kernel path (bound launch) {tokens}x{hidden}", 6,
         lambda: bound.fire(ptrs, 0)),
        (f"numba flat dispatcher call {tokens}x{hidden}", 6,
         lambda: flat_kernel[plan.grid, plan.block](x, out, pos, *plan.scalars)),
    ]
    fshape = Shape("fused_64x(24+24+24)x128", 64, heads_q=24, heads_k=24, head_dim=128,
                   dtype="bfloat16", heads_v=24, rotary_dim=128)
    qkv, wq, wk, fpos = fused_user_arrays(fshape)
    kw = fused_kwargs(fshape)
    cases.append((f"ropelab.fused_qknorm_rope {fshape.label} {fshape.dtype}", 12,
                  lambda: ropelab.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=fpos,
                                                    **kw)))
    cases += baseline_rows.overhead_cases(x, out, pos, tokens, hidden)

    return interleaved_rounds(cases, launches, warmup, cuda.synchronize, progress=progress)


def interleaved_rounds(cases, launches: int, warmup: int, synchronize, rounds: int = ROUNDS,
                       clock=time.perf_counter, progress: bool = False) -> list[dict]:
    """Time ``cases`` (``(name, kernel_args, thunk)``) in ``rounds`` rounds of ``launches //
    rounds`` back-to-back calls, every case once per round, and report the median round.

    Why rounds: timed one after the other, the first cases of a run absorb whatever the machine
    does in those seconds.  The 15:08 and 15:12 H200 records show it: the numba empty kernel
    (no ropelab code at all) and the first two ropelab.rope rows rose 4-7 us over the 07:37
    record while the rows after them stayed put.  Taken in turns, a slow stretch lands on every
    case alike, and the median ignores the odd slow round.
    """
    per_round = max(1, launches // rounds)
    for _, _, fn in cases:
        for _ in range(warmup):
            fn()
    synchronize()
    enqueued = [[] for _ in cases]
    synced = [[] for _ in cases]
    steps = range(rounds)
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc="launch overhead rounds")
    for _ in steps:
        for i, (_, _, fn) in enumerate(cases):
            synchronize()
            t0 = clock()
            for _ in range(per_round):
                fn()
            t1 = clock()
            synchronize()
            t2 = clock()
            enqueued[i].append(per_launch_us(t1 - t0, per_round))
            synced[i].append(per_launch_us(t2 - t0, per_round))
    return [LAUNCH_OVERHEAD.row(launcher=name, kernel_args=nargs, launches=per_round * rounds,
                                us_per_launch=round(float(np.median(enqueued[i])), 3),
                                us_per_launch_synced=round(float(np.median(synced[i])), 3))
            for i, (name, nargs, _) in enumerate(cases)]


def overhead_method(launches: int, warmup: int = WARMUP) -> str:
    """The method of a ``launch_overhead`` record."""
    return (f"wall clock (time.perf_counter) around back-to-back launches, {warmup} warm-up "
            f"launches per case, then {launches} launches per case in {ROUNDS} rounds, every "
            f"case once per round in turn (a slow stretch of the machine lands on all cases "
            f"alike); the median round is reported; us_per_launch stops when a round's last "
            f"launch is enqueued, us_per_launch_synced after its synchronize; kernels are short "
            f"enough that the GPU keeps up, so the numbers are host-side launch cost")
