"""Host cost of ``ropelab.torch_ops`` against the direct public calls, on the CPU, launch stubbed.

What it measures: microseconds of host (Python + torch) time per call of each torch op
(``rt.rope`` functional and ``out=``, ``rt.fused_qknorm_rope`` in place and out of place with
autograd recording, the backward op, one forward + backward iteration) next to the direct
public call on the same tensors (``ropelab.rope``, ``ropelab.fused_qknorm_rope``,
``ropelab.ops.fused_backward.fused_qknorm_rope_backward``), for a tiny and a large problem.
The kernel launch is a no-op on both sides, so what is left is the work around it: the
wrapper, torch's dispatch, the config string, the engine's cached fast path, and anything
proportional to the data (a copy, a ``.contiguous()``) that the launch would not do itself.

How a CPU machine stands in for the GPU: CPU tensors are routed through the *device* path a
CUDA tensor takes (the engine's key, cache lookup and ``DeviceCall.run``, ``torch_ops.args``'
device branch), by :func:`ropelab.measure.bench.host_path.host_route` (its ``NullBound`` is
the stubbed launch, its stream reader a C call) plus, here, ``torch.Tensor.is_cuda`` reading
True and the other ops' array readers describing CPU tensors as CUDA tensors.  What differs
from an H200: the dispatch key is CPU, not CUDA (the same Python kernel is registered for
both); outputs come from the CPU allocator (``torch.empty`` on the CPU is cheaper than the
CUDA caching allocator, a few microseconds); no ``cuLaunchKernel`` (a few microseconds on the
GPU, the same on both sides); a data copy runs at CPU memory speed rather than HBM speed (on
the GPU it is a kernel: its *host* cost is one launch, but its device time is real).

These are CPU-host numbers with the launch stubbed, not GPU numbers: use them to rank changes
(run before and after one), and ``scripts/gpu_training_speed.sh`` for the H200.

    PYTHONPATH=. python scripts/host_cost_probe.py [--quick] [--profile NAME] [--json PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import contextlib
import io
import json
import pstats
import sys
import timeit

import numpy as np


@contextlib.contextmanager
def gpu_route():
    """CPU tensors through the device route of every op (see the module docstring)."""
    import torch

    from ropelab.measure.bench import host_path
    from ropelab.ops import fused, fused_backward, memory, qk, rows

    patched = [(m, "inspect_array") for m in (fused, fused_backward, rows, qk)]
    saved = [(m, n, getattr(m, n)) for m, n in patched]
    saved += [(fused_backward, "SIMULATED", fused_backward.SIMULATED),
              (memory, "zero_fill", memory.zero_fill)]
    with host_path.host_route(host_path.NullBound):
        for m, n in patched:
            setattr(m, n, host_path._as_device)
        fused_backward.SIMULATED = False
        memory.zero_fill = lambda pointer, words, handle: None
        torch.Tensor.is_cuda = property(lambda self: True)
        try:
            yield
        finally:
            del torch.Tensor.is_cuda
            for m, n, v in saved:
                setattr(m, n, v)


def best_us(fns, number: int, repeat: int) -> list[float]:
    """Best-of-``repeat`` microseconds per call; the thunks take turns, so a burst of load on a
    shared machine hits them alike."""
    timers = [timeit.Timer(f) for f in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, t in enumerate(timers):
            best[i] = min(best[i], t.timeit(number) / number)
    return [b * 1e6 for b in best]


def cases(tokens: int):
    """``(name, direct thunk, op thunk)`` for one problem size (tensors built once)."""
    import torch

    import ropelab
    import ropelab.torch_ops as rt
    from ropelab.ops.fused_backward import fused_qknorm_rope_backward
    from ropelab.shapes import FLUX_1024 as S

    heads = dict(num_heads_q=S.heads_q, num_heads_k=S.heads_k, num_heads_v=S.heads_v,
                 head_dim=S.head_dim)
    pos = torch.arange(tokens, dtype=torch.int32)
    x = torch.randn(tokens, S.heads_q * S.head_dim)  # 2-D: the default flat variant
    out = torch.empty_like(x)
    qkv = torch.randn(tokens, (S.heads_q + S.heads_k + S.heads_v) * S.head_dim,
                      dtype=torch.bfloat16)
    w = torch.ones(S.head_dim, dtype=torch.bfloat16)
    qkv_g = qkv.clone().requires_grad_(True)
    w_g = w.clone().requires_grad_(True)
    g = torch.randn_like(qkv)
    fused_kw = dict(heads, q_weight=w, k_weight=w, positions=pos)

    wk_g = w.clone().requires_grad_(True)

    def fwd_bwd():  # a trainer's step: zero_grad(set_to_none=True), forward, backward
        qkv_g.grad = w_g.grad = wk_g.grad = None
        y = rt.fused_qknorm_rope(qkv_g, **heads, q_weight=w_g, k_weight=wk_g, positions=pos)
        y.backward(g)

    from ropelab.measure.bench.backward_calls import empty_function
    floor = empty_function()

    def floor_step():
        qkv_g.grad = w_g.grad = wk_g.grad = None
        floor.apply(qkv_g, w_g, wk_g).backward(g)

    def direct_fwd_bwd():
        ropelab.fused_qknorm_rope(qkv, **fused_kw)
        fused_qknorm_rope_backward(qkv, g, **fused_kw)

    config = rt.encode(**heads, eps=1e-6, base=10000.0, rotary_dim=None, interleave=True,
                       yarn=None, fastmath=True, warps_per_block=None, heads_per_warp=None,
                       cache=False, max_positions=None)
    return [
        ("rope out=", lambda: ropelab.rope(x, positions=pos, out=out),
         lambda: rt.rope(x, positions=pos, out=out)),
        ("rope (new tensor)", lambda: ropelab.rope(x, positions=pos),
         lambda: rt.rope(x, positions=pos)),
        ("fused in place", lambda: ropelab.fused_qknorm_rope(qkv, **fused_kw),
         lambda: rt.fused_qknorm_rope(qkv, **fused_kw)),
        ("fused, grad recorded", lambda: ropelab.fused_qknorm_rope(qkv, **fused_kw),
         lambda: rt.fused_qknorm_rope(qkv_g, **heads, q_weight=w_g, k_weight=w_g,
                                      positions=pos)),
        ("fused backward op", lambda: fused_qknorm_rope_backward(qkv, g, **fused_kw),
         lambda: torch.ops.ropelab.fused_qknorm_rope_backward(qkv, g, w, w, pos, config)),
        ("fused fwd+bwd iteration", direct_fwd_bwd, fwd_bwd),
        ("empty Function fwd+bwd", direct_fwd_bwd, floor_step),
    ]


def measure(sizes, number: int, repeat: int, only=None) -> list[dict]:
    import torch

    # One intra-op thread: on a shared CPU torch's pool spins against the neighbours, and a
    # GPU call's host side is one thread anyway.
    torch.set_num_threads(1)
    rows = []
    with gpu_route():
        for tokens in sizes:
            # Large problems: fewer calls per run (a data-sized copy would take milliseconds).
            n = max(5, number * 16 // max(tokens, 16))
            for name, direct, op in cases(tokens):
                if only and only not in name:
                    continue
                direct(), op()  # validate and remember the call shapes
                d, o = best_us([direct, op], n, repeat)
                rows.append({"case": name, "tokens": tokens, "direct_us": round(d, 2),
                             "op_us": round(o, 2), "ratio": round(o / d, 2)})
                print(f"{tokens:6d} tok  {name:26s} direct {d:9.2f} us   op {o:9.2f} us   "
                      f"x{o / d:5.2f}", flush=True)
    return rows


def profile(name: str, tokens: int, calls: int = 300, top: int = 25) -> str:
    """cProfile of ``calls`` op calls of the case called ``name``: the functions by own time."""
    with gpu_route():
        for case, direct, op in cases(tokens):
            if case == name:
                op()
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(calls):
                    op()
                prof.disable()
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
                return buf.getvalue()
    raise SystemExit(f"no case {name!r}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", type=int, default=4, help="tokens of the tiny problem")
    parser.add_argument("--large", type=int, default=4096, help="tokens of the large problem")
    parser.add_argument("--number", type=int, default=400, help="calls per run (tiny problem)")
    parser.add_argument("--repeat", type=int, default=7, help="runs; the best is kept")
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--only", help="cases whose name contains this")
    parser.add_argument("--profile", metavar="CASE", help="print a cProfile of this case instead")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if args.profile:
        import torch

        # cProfile sees one thread: with the backward on the caller's, it sees the whole step.
        with torch.autograd.set_multithreading_enabled(False):
            print(profile(args.profile, args.tiny))
        return 0
    number, repeat = (20, 2) if args.quick else (args.number, args.repeat)
    rows = measure((args.tiny, args.large), number, repeat, args.only)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"what": "CPU host us per call, launch stubbed (not GPU numbers)",
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
