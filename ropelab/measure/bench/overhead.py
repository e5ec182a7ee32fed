"""Host launch overhead: wall-clock cost per launch over many back-to-back launches."""

from __future__ import annotations

import time

from numba import cuda

from .. import baselines as bl
from .entries import Buffers, _fused_kwargs, fused_user_arrays
from .rows import OVERHEAD_SHAPE, Shape, plain_shape
from .stats import per_launch_us
from .timer import require_gpu


def _empty():
    pass


def launch_overhead(launches: int = 2000, warmup: int = 100, progress: bool = True) -> list[dict]:
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
    ptrs = tuple(int(a.__cuda_array_interface__["data"][0]) for a in (x, out, pos))
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
    kw = _fused_kwargs(fshape)
    cases.append((f"ropelab.fused_qknorm_rope {fshape.label} {fshape.dtype}", 12,
                  lambda: ropelab.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=fpos,
                                                    **kw)))
    cases += bl.overhead_cases(x, out, pos, tokens, hidden)

    from tqdm import tqdm

    rows = []
    for name, nargs, fn in tqdm(cases, desc="launch overhead", disable=not progress):
        for _ in range(warmup):
            fn()
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            fn()
        t1 = time.perf_counter()
        cuda.synchronize()
        t2 = time.perf_counter()
        rows.append({"launcher": name, "kernel_args": nargs, "launches": launches,
                     "us_per_launch": round(per_launch_us(t1 - t0, launches), 3),
                     "us_per_launch_synced": round(per_launch_us(t2 - t0, launches), 3)})
    return rows


OVERHEAD_METHOD = (
    "wall clock (time.perf_counter) around {launches} back-to-back launches after {warmup} "
    "warm-up launches; us_per_launch stops when the last launch is enqueued, "
    "us_per_launch_synced after the final synchronize; kernels are short enough that the GPU "
    "keeps up, so the numbers are host-side launch cost")


def format_overhead(rows: list[dict]) -> str:
    head = f"{'launcher':<44} {'args':>4} {'us/launch':>10} {'synced':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['launcher']:<44} {r['kernel_args']:>4} {r['us_per_launch']:>10.2f} "
                     f"{r['us_per_launch_synced']:>8.2f}")
    return "\n".join(lines)
