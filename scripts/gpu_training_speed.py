"""Host cost and training speed of ``ropelab.torch_ops`` on the GPU; JSON to --out.

1. ``host``: host microseconds per call, no synchronization inside the timed loop, on tiny
   problems (the host is the bottleneck there): the direct public call against the torch op
   for ``rope`` (``out=``), ``rope_qk`` (direct only: it has no torch op), the fused forward
   in place, and the fused backward (direct against the backward op).  The target: each op
   at most 1.5x its direct call.  Beside them, launches that are not ropelab's (a CuPy
   ``RawKernel`` that does nothing, with six arguments, and ``torch.mul``): the cost of a
   launch from Python on that machine, which the direct calls are held to.
2. ``training``: 50 iterations of ``y = rt.fused_qknorm_rope(qkv)`` on bf16 leaves that require
   grad, then ``y.backward(g)``, at the production shapes (flux_1024, qwen_image_1024,
   zimage_1024), GPT-J and NeoX: wall us/iteration (synchronized at the end) and host
   us/iteration (the time to enqueue, with the GPU kept busy by nothing: a host-bound loop has
   wall ~ host).  Beside it the same math in PyTorch under ``torch.compile`` (the backward
   bench's ``torch_math``), forward + backward, and (NeoX) Liger-Kernel's RMSNorm + RoPE
   chain (:func:`training_loop_rows._liger_step`).
3. ``rope_training``: the same loop through the rope op (``y = rt.rope(x, positions=pos)``,
   no ``out=``, then ``y.backward(g)``) on a bfloat16 ``[32768, 32, 128]`` leaf, beside
   torch.compile of the same rotation on cached cos/sin tables and the empty Function; with a
   cold-L2 copy of ``x`` (``torch_copy``, median us) for the roof's rate.  Byte model: the
   forward reads x and writes y, the backward reads dy and writes dx, ``4 * x.numel() * 2``.
4. ``forward`` (a control row): the functional forward as the autograd op runs it, one pass
   (``ropelab.fused_qknorm_rope(qkv, out=out)``: read qkv, write out, V copied) against the
   old two passes (``out.copy_(qkv)``, then the in-place kernel over ``out``), beside a copy of
   the same bytes (``out.copy_(qkv)``): cold-L2 events, median us, at the same shapes and
   layouts.  Byte model of the one pass: qkv read once and out written once,
   ``2 * tokens * width * 2`` bytes in bf16 (the weights and positions are noise).

``--dry-run``: CPU tensors, a tiny shape and 2 iterations (the simulator without a GPU), so the
driver is checked where there is no GPU; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from training_loop_rows import rope_training_rows, sync, training_rows


def host_us(fn, device, number: int, repeat: int) -> float:
    """Best-of-``repeat`` host us per call of ``number`` back-to-back calls (synchronized
    between runs only, so the launch queue never fills for long)."""
    best = float("inf")
    for _ in range(repeat):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    sync(device)
    return best * 1e6


def paired_host_us(a, b, device, number: int, repeat: int) -> tuple[float, float, float]:
    """Best host us per call of ``a`` and of ``b``, and the median over rounds of the ratio
    b / a.  Each of ``repeat`` rounds times both, in alternating order, so a change of the host's
    speed during the run (another tenant, its clock) falls on both sides of one ratio: timed one
    after the other, best-of-7 ratios of one op moved from 1.2 to 1.8 between two runs on one
    H200 host."""
    ta, tb, ratios = [], [], []
    for r in range(repeat):
        if r % 2:
            tb.append(host_us(b, device, number, 1))
            ta.append(host_us(a, device, number, 1))
        else:
            ta.append(host_us(a, device, number, 1))
            tb.append(host_us(b, device, number, 1))
        ratios.append(tb[-1] / ta[-1])
    return min(ta), min(tb), statistics.median(ratios)


def host_rows(device, number, repeat) -> list[dict]:
    import torch

    import ropelab
    import ropelab.torch_ops as rt
    from ropelab.ops.fused_backward import fused_qknorm_rope_backward
    from ropelab.torch_ops.args import host_view

    heads = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64)
    tokens = 4
    pos = torch.arange(tokens, dtype=torch.int32, device=device)
    x = torch.randn(tokens, 64, device=device)
    out = torch.empty_like(x)
    q, k = torch.randn(tokens, 64, device=device), torch.randn(tokens, 64, device=device)
    qkv = torch.randn(tokens, 3 * 64, device=device, dtype=torch.bfloat16)
    g = torch.randn_like(qkv)
    w = torch.ones(64, device=device, dtype=torch.bfloat16)
    fused = dict(heads, q_weight=w, k_weight=w, positions=pos)
    config = rt.encode(**heads)
    # The direct calls take CUDA tensors as they are; in a dry run, NumPy views of the CPU
    # tensors (what the public functions take on the host).
    a = (lambda t: t) if device == "cuda" else host_view
    d_fused = dict(heads, q_weight=a(w), k_weight=a(w), positions=a(pos))
    pairs = [
        ("rope", lambda: ropelab.rope(a(x), positions=a(pos), out=a(out)),
         lambda: rt.rope(x, positions=pos, out=out)),
        ("rope_qk", lambda: ropelab.rope_qk(a(q), a(k), positions=a(pos), head_dim=64), None),
        ("fused_qknorm_rope", lambda: ropelab.fused_qknorm_rope(a(qkv), **d_fused),
         lambda: rt.fused_qknorm_rope(qkv, **fused)),
        ("fused_qknorm_rope_backward",
         # the op's own call: weight gradients in the weights' dtype (torch_ops asks for them)
         lambda: fused_qknorm_rope_backward(a(qkv), a(g), weight_grad_dtype="storage", **d_fused),
         lambda: torch.ops.ropelab.fused_qknorm_rope_backward(qkv, g, w, w, pos, config)),
    ]
    rows = []
    for name, direct, op in pairs:
        direct()
        if op is None:
            row = {"op": name, "direct_host_us": round(host_us(direct, device, number, repeat), 2)}
        else:
            op()
            d_us, op_us, ratio = paired_host_us(direct, op, device, number, repeat)
            row = {"op": name, "direct_host_us": round(d_us, 2),
                   "torch_op_host_us": round(op_us, 2), "ratio": round(ratio, 3)}
        rows.append(row)
        print(row, flush=True)
    if device == "cuda":  # what a launch costs outside ropelab, in the same run
        for name, fn in _reference_launches(torch, x, out):
            fn()
            row = {"op": name, "direct_host_us": round(host_us(fn, device, number, repeat), 2)}
            rows.append(row)
            print(row, flush=True)
    return rows


def _reference_launches(torch, x, out):
    """``(name, call)`` of launches that are not ropelab's: a CuPy ``RawKernel`` that does
    nothing, with six arguments (three pointers, three scalars: as many as ropelab.rope's
    kernel takes), and ``torch.mul`` of the same tiny tensors into ``out``."""
    calls = [("reference: torch.mul out=", lambda: torch.mul(x, 2.0, out=out))]
    try:
        import cupy
    except ImportError:
        return calls
    kernel = cupy.RawKernel(r"""extern "C" __global__ void noop(const float* a, float* b,
        const int* c, float d, unsigned e, unsigned f) {}""", "noop")
    a, b = cupy.zeros(4, cupy.float32), cupy.zeros(4, cupy.float32)
    c = cupy.zeros(4, cupy.int32)
    args = (a, b, c, cupy.float32(1.0), cupy.uint32(2), cupy.uint32(3))
    calls.append(("reference: cupy RawKernel, 6 args", lambda: kernel((1,), (32,), args)))
    return calls


def forward_rows(shapes, device) -> list[dict]:
    """The functional forward, one pass against clone + in place, beside a copy (cold-L2
    events on a GPU; on the CPU each call runs once, to check the wiring, and no row is
    made)."""
    import numpy as np
    import torch

    import ropelab
    from ropelab import check as ropelab_check

    timer = None
    if device == "cuda":
        from ropelab.measure.bench.timer import Timer

        timer = Timer()
    rows = []
    for shape in shapes:
        host = ropelab_check.random_inputs(np.random.default_rng(0), shape.tokens,
                                           (shape.heads_q, shape.heads_k, shape.heads_v),
                                           shape.head_dim, "bfloat16")
        qkv, wq, wk = (torch.from_numpy(a.view(np.int16)).to(device).view(torch.bfloat16)
                       for a in host[:3])
        pos = torch.from_numpy(host[3]).to(device)
        out = torch.empty_like(qkv)
        nbytes = 2 * qkv.numel() * qkv.element_size()
        a = (lambda t: t) if device == "cuda" else _host_view
        for interleave in (True, False):
            kw = dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k,
                      num_heads_v=shape.heads_v, head_dim=shape.head_dim,
                      rotary_dim=shape.rotary_dim, interleave=interleave, q_weight=a(wq),
                      k_weight=a(wk), positions=a(pos))

            def one_pass():
                ropelab.fused_qknorm_rope(a(qkv), out=a(out), **kw)

            def clone_in_place():
                out.copy_(qkv)
                ropelab.fused_qknorm_rope(a(out), **kw)

            calls = [("one_pass", one_pass), ("clone_in_place", clone_in_place),
                     ("torch_copy", lambda: out.copy_(qkv))]
            if timer is None:
                for _, fn in calls:
                    fn()
                continue
            medians = {}
            for name, fn in calls:
                medians[name] = _median(timer.time(fn))
            for name, _ in calls:
                row = {"shape": shape.name, "layout": "gptj" if interleave else "neox",
                       "impl": name, "bytes": nbytes, "median_us": round(medians[name], 2),
                       "of_copy": round(medians["torch_copy"] / medians[name], 4)}
                rows.append(row)
                print(row, flush=True)
    return rows


def _median(samples) -> float:
    from ropelab.measure.bench.stats import quantiles

    return quantiles(samples)[0]


def _host_view(t):
    from ropelab.torch_ops.args import host_view

    return host_view(t)


PARTS = ("host", "training", "rope_training", "forward")
COLUMNS = ("part", "op", "shape", "layout", "impl", "iterations", "direct_host_us",
           "torch_op_host_us", "ratio", "host_us_per_iter", "wall_us_per_iter", "bytes",
           "median_us", "of_copy", "error")
METHOD = ("host: host microseconds per call, no synchronization inside the timed loop, tiny "
          "problems, direct public call against the torch op (ropelab.torch_ops), both with the "
          "same options (the backward's weight_grad_dtype='storage', as the op asks): 15 rounds "
          "of 2000 calls each, the two timed in alternating order within a round; best round "
          "of each, and ratio = the median of the rounds' op/direct ratios; beside "
          "reference launches (a no-op CuPy RawKernel with six arguments, torch.mul). training: "
          "50 iterations of y = rt.fused_qknorm_rope(qkv) on bfloat16 leaves that require "
          "grad (their .grad set to None first, as zero_grad(set_to_none=True) does), then "
          "y.backward(g), synchronized at the end: wall us/iteration, and host "
          "us/iteration (time to enqueue); beside it the same math in PyTorch under "
          "torch.compile (measure.bench.backward_calls.torch_math), Liger-Kernel's chain "
          "(NeoX only: measure.bench.backward_calls.liger_math, its RMSNorm Function on the Q "
          "and K heads, then its RoPE Function, the packed output rebuilt with torch.cat), the "
          "same loop with the "
          "op captured as CUDA graphs (ropelab_graphed: torch.cuda.make_graphed_callables), "
          "and the same loop around an autograd Function that does no work (empty_function: "
          "the host floor of any Python op's training loop on this machine); bytes: what one "
          "forward + backward must move (tokens * (4 * row + QK) * 2: the forward reads and "
          "writes the row, the backward reads dy and x's Q and K and writes dx). One run; warm "
          "L2 (a training loop, not the cold-L2 timer). forward (control rows): the functional "
          "forward's one pass (fused_qknorm_rope(qkv, out=out)) against out.copy_(qkv) then the "
          "in-place kernel, beside out.copy_(qkv) alone; cold-L2 events (measure.bench.Timer), "
          "median us; bytes = qkv read + out written; of_copy = copy median / row median. "
          "rope_training: the same loop through rt.rope (no out=) on a bfloat16 [32768, 32, "
          "128] leaf, beside torch.compile of the rotation on cos/sin tables cached once "
          "(float32 math, bfloat16 out) and the empty Function; bytes = 4 * x.numel() * 2 "
          "(forward reads x, writes y; backward reads dy, writes dx); torch_copy: cold-L2 "
          "events of out.copy_(x), median us, bytes = x read + out written. "
          "Recorded by scripts/gpu_training_speed.sh.")


def record_rows(host: list[dict], training: list[dict], forward=(), rope=()) -> list[dict]:
    """The parts as one record's rows, every row with every column (None where it has none)."""
    rows = [dict(r, part="host") for r in host]
    rows += [dict(r, part="training", op="fused_qknorm_rope") for r in training]
    rows += [dict(r, part="forward", op="fused_qknorm_rope") for r in forward]
    rows += [dict(r, part="rope_training", op="rope") for r in rope]
    return [{c: r.get(c) for c in COLUMNS} for r in rows]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"), help="folder for JSON")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU tensors, tiny shape, 2 iterations (no GPU needed)")
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile row")
    parser.add_argument("--only", choices=PARTS, action="append",
                        help="run only these parts (repeatable; default: all)")
    args = parser.parse_args(argv)
    import torch

    from ropelab.shapes import FLUX_1024, QWEN_IMAGE_1024, ZIMAGE_1024, FusedShape

    if args.dry_run:
        device, number, repeat, iterations = "cpu", 3, 2, 2
        shapes = [FusedShape("dry_tiny", 2, 1, 1, 1, 64, 64)]
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: run with --dry-run", file=sys.stderr)
            return 2
        device, number, repeat, iterations = "cuda", 2000, 15, args.iterations
        shapes = [FLUX_1024, QWEN_IMAGE_1024, ZIMAGE_1024]
    parts = set(args.only or PARTS)
    compiled = not (args.no_compile or args.dry_run)
    host = host_rows(device, number, repeat) if "host" in parts else []
    training = training_rows(shapes, device, iterations, compile_baseline=compiled) \
        if "training" in parts else []
    forward = forward_rows(shapes, device) if "forward" in parts else []
    rope = rope_training_rows(device, iterations, compile_baseline=compiled,
                              **({"shape": (4, 2, 64)} if args.dry_run else {})) \
        if "rope_training" in parts else []
    rows = record_rows(host, training, forward, rope)
    os.makedirs(args.out, exist_ok=True)
    if args.dry_run:  # the simulator's numbers are no measurement: printed and kept, never a record
        path = os.path.join(args.out, "training_speed-dry-run.json")
        with open(path, "w") as f:
            json.dump({"dry_run": True, "rows": rows}, f, indent=1)
    else:
        from ropelab.measure import records

        path = records.save("training_speed", rows, method=METHOD, directory=args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
