"""Bench of the fused QK-RMSNorm + RoPE backward (issue 20): one GPU run, recorded in
``data/bench_backward/``.

``python -m ropelab.measure.bench_backward [--shapes flux_1024,...] [--repeats N]`` times, on
the production shapes in bfloat16 (flux_1024, qwen_image_1024, zimage_1024), in both layouts:

* ``copy``: a device copy of the qkv rows; its GB/s is every row's roof;
* ``ropelab:fwd+bwd``: what autograd runs: the forward out of place (a copy of ``qkv``, then the
  fused kernel in place on the copy) and the backward (two-stage weight gradient);
* ``ropelab:bwd`` and ``ropelab:bwd:atomic``: the backward alone through the public function;
* ``ropelab:bwd:kernel`` and ``ropelab:bwd:kernel:atomic``: the backward's launches alone,
  pre-bound (no host checks: what the kernels cost); ``ropelab:fwd+bwd:kernel`` the same inside
  autograd's sequence; ``ropelab:bwd:kernel:blocksN`` the grid capped at N blocks (a sweep);
* ``torch.compile:fwd+bwd`` and ``torch.compile:bwd``: the same math in PyTorch (float32
  math on bfloat16 storage), compiled, differentiated by autograd (buffer donation off, see
  :func:`compiled_pair`);
* ``liger:fwd+bwd`` and ``liger:bwd`` (NeoX only; Liger's RoPE has no GPT-J layout):
  Liger-Kernel's RMSNorm then RoPE, chained; skipped with the reason when ``liger_kernel`` is
  not installed;
* ``determinism:two_stage`` / ``determinism:atomic``: the weight gradient of ``RUNS`` backward
  runs on the same inputs, compared bit for bit with the first (rows that differ, largest
  difference).

**The bytes each row must move** (:func:`bytes_for`), per token, with ``row`` the bytes of one
qkv row and ``qk`` those of its Q and K heads: the backward reads ``dy`` (the row) and ``x``
(Q and K) and writes ``dx`` (the row): ``2 row + qk``; an out-of-place forward reads and writes
the row: ``2 row``; together ``4 row + qk``.  ``frac_of_copy`` is that count over the row's
time divided by the copy's rate: the share of the copy roof the row reaches.  (Autograd's
forward as run here moves more: the copy, ``2 row``, then the fused kernel in place,
``2 qk``.)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..shapes import PRODUCTION_SHAPES
from ..target import SIMULATED

SHAPES = ("flux_1024", "qwen_image_1024", "zimage_1024")
RUNS = 20  # backward runs compared bit for bit
COLUMNS = ("entry", "shape", "layout", "dtype", "part", "bytes_moved", "median_us", "p20_us",
           "p80_us", "repeats", "gbps", "copy_gbps", "frac_of_copy", "runs_differing",
           "max_abs_diff", "note")


def bytes_for(part: str, shape, itemsize: int) -> int:
    """Bytes a ``part`` ("backward", "forward", "forward+backward", "copy") must move."""
    row = shape.tokens * shape.row * itemsize
    qk = shape.tokens * (shape.heads_q + shape.heads_k) * shape.head_dim * itemsize
    return {"backward": 2 * row + qk, "forward": 2 * row, "forward+backward": 4 * row + qk,
            "copy": 2 * row}[part]


def make_row(entry, shape, layout, dtype, part, itemsize, samples_us, copy_gbps, *,
             runs_differing=None, max_abs_diff=None, note="") -> dict:
    from .bench import quantiles

    moved = bytes_for(part, shape, itemsize)
    if samples_us:
        med, p20, p80 = quantiles(samples_us)
        gbps = moved / med / 1e3
    else:
        med = p20 = p80 = gbps = None
    frac = gbps / copy_gbps if gbps is not None and copy_gbps else None
    values = (entry, shape.name, layout, dtype, part, moved, med, p20, p80,
              len(samples_us or ()), gbps, copy_gbps, frac, runs_differing, max_abs_diff, note)
    return dict(zip(COLUMNS, values))


# ---- inputs -------------------------------------------------------------------------------------

def inputs(shape, dtype: str = "bfloat16", seed: int = 0):
    """(qkv, grad, q_weight, k_weight, positions) as a PyTorch user holds them on the GPU
    (torch.bfloat16), or numba device arrays on the simulator (bfloat16 as uint16 bits)."""
    from ..check import random_inputs

    rng = np.random.default_rng(seed)
    heads = (shape.heads_q, shape.heads_k, shape.heads_v)
    qkv, wq, wk, pos = random_inputs(rng, shape.tokens, heads, shape.head_dim, dtype)
    grad, _, _, _ = random_inputs(rng, shape.tokens, heads, shape.head_dim, dtype)
    host = (qkv, grad, wq, wk, pos)
    if SIMULATED:
        from numba import cuda

        return tuple(cuda.to_device(a) for a in host)
    import torch

    dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in host]
    if dtype == "bfloat16":
        dev[:4] = [t.view(torch.bfloat16) for t in dev[:4]]
    return tuple(dev)


def _kwargs(shape, interleave: bool) -> dict:
    return dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k, num_heads_v=shape.heads_v,
                head_dim=shape.head_dim, rotary_dim=shape.rotary_dim, interleave=interleave)


# ---- what each entry launches (each returns a no-argument callable) ---------------------------------

def ropelab_backward(arrays, shape, interleave: bool, dw: str = "two_stage"):
    from ..ops.fused_backward import fused_qknorm_rope_backward

    qkv, grad, wq, wk, pos = arrays
    kw = _kwargs(shape, interleave)
    return lambda: fused_qknorm_rope_backward(qkv, grad, q_weight=wq, k_weight=wk, positions=pos,
                                              dw=dw, **kw)


def ropelab_backward_kernel(arrays, shape, interleave: bool, dw: str = "two_stage",
                            max_blocks: int | None = None):
    """The backward's launches on fixed buffers (no host checks): the kernels' own cost.
    ``max_blocks``: the grid's cap (default one wave of the GPU)."""
    from numba import cuda

    from ..kernels.fused_qknorm_rope import backward as kmod, backward_host
    from ..kernels.launch import launch
    from ..ops.arrays import device_view, inspect_array
    from ..ops.fused import build_problem

    qkv, grad, wq, wk, pos = arrays
    info = inspect_array(qkv, "qkv")
    problem = build_problem(info, **_kwargs(shape, interleave))
    align = kmod.VECTOR_ALIGN[problem.storage]
    aligned = all(inspect_array(a, "a").ptr % align == 0 for a in (qkv, grad, wq, wk))
    main, reduce = backward_host.plans(problem, dw_mode=dw, max_blocks=max_blocks,
                                       aligned=aligned)
    two = 2 * shape.head_dim
    words = kmod.KERNEL_VIEW[problem.storage]
    dx = cuda.device_array(info.nbytes // words.itemsize, words)
    sums = cuda.device_array(two if reduce is None else main.grid[0] * two, np.float32)
    dw_out = cuda.device_array(two, np.float32)
    views = [device_view(a, inspect_array(a, "a"), words) for a in (qkv, grad)] + [dx] + [
        device_view(a, inspect_array(a, "a"), words) for a in (wq, wk)] + [
        device_view(pos, inspect_array(pos, "positions")), sums]
    if reduce is None:
        def run():
            sums[:] = 0  # atomics add into it (the zeroing is part of the atomic mode's cost)
            launch(main, views)
        result = sums
    else:
        def run():
            launch(main, views)
            launch(reduce, [sums, dw_out])
        result = dw_out
    run.outputs = (dx, result)  # dx flat, then dq_weight | dk_weight (tests read them)
    return run


def ropelab_forward_backward(arrays, shape, interleave: bool):
    """Autograd's sequence: copy qkv (out of place), the fused forward in place on the copy,
    then the backward from the saved input."""
    import torch

    import ropelab

    qkv, grad, wq, wk, pos = arrays
    kw = _kwargs(shape, interleave)
    out = torch.empty_like(qkv)
    backward = ropelab_backward(arrays, shape, interleave)

    def run():
        out.copy_(qkv)
        ropelab.fused_qknorm_rope(out, q_weight=wq, k_weight=wk, positions=pos, **kw)
        backward()
    return run


def ropelab_forward_backward_kernel(arrays, shape, interleave: bool):
    """As :func:`ropelab_forward_backward`, with the backward's launches pre-bound."""
    import torch

    import ropelab

    qkv, grad, wq, wk, pos = arrays
    kw = _kwargs(shape, interleave)
    out = torch.empty_like(qkv)
    backward = ropelab_backward_kernel(arrays, shape, interleave)

    def run():
        out.copy_(qkv)
        ropelab.fused_qknorm_rope(out, q_weight=wq, k_weight=wk, positions=pos, **kw)
        backward()
    return run


def torch_math(shape, interleave: bool, eps: float = 1e-6, base: float = 10000.0):
    """The fused forward in PyTorch: float32 math, output in the input's dtype (what
    torch.compile is given)."""
    import torch

    hq, hk, hd, rd = shape.heads_q, shape.heads_k, shape.head_dim, shape.rotary_dim
    inv = 1.0 / base ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd)

    def forward(qkv, wq, wk, pos):
        t = qkv.shape[0]
        heads = qkv.view(t, -1, hd)
        qk = heads[:, :hq + hk].float()
        w = torch.cat([wq.float().expand(hq, hd), wk.float().expand(hk, hd)])
        z = qk * torch.rsqrt(qk.pow(2).mean(-1, keepdim=True) + eps) * w
        ang = pos.float()[:, None, None] * inv.to(qkv.device, torch.float32)[None, None, :]
        c, s = torch.cos(ang), torch.sin(ang)
        if interleave:
            a, b = z[..., 0:rd:2], z[..., 1:rd:2]
            rot = torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
        else:
            a, b = z[..., :rd // 2], z[..., rd // 2:rd]
            rot = torch.cat([a * c - b * s, a * s + b * c], dim=-1)
        y = torch.cat([rot, z[..., rd:]], dim=-1).to(qkv.dtype)
        return torch.cat([y, heads[:, hq + hk:]], dim=1).reshape(qkv.shape)
    return forward


def _autograd_pair(forward, arrays):
    """(fwd+bwd, bwd-only) callables for a differentiable ``forward(qkv, wq, wk, pos)``."""
    import torch

    qkv, grad, wq, wk, pos = arrays
    leaves = [a.detach().clone().requires_grad_(True) for a in (qkv, wq, wk)]

    def both():
        y = forward(leaves[0], leaves[1], leaves[2], pos)
        torch.autograd.grad(y, leaves, grad)

    y = forward(leaves[0], leaves[1], leaves[2], pos)
    return both, lambda: torch.autograd.grad(y, leaves, grad, retain_graph=True)


def compiled_pair(arrays, shape, interleave: bool):
    """torch.compile's pair.  Buffer donation is off (``torch._functorch.config.donated_buffer
    = False``, for both rows): with it on, a compiled backward may reuse the memory of the
    tensors its forward saved, so it refuses ``retain_graph=True``, and the bwd-only row (one
    forward, the backward timed again and again) failed with "compiled with non-empty donated
    buffers".  Donation saves memory, not a launch; the backward's kernels are the same."""
    import torch
    import torch._functorch.config as functorch_config

    functorch_config.donated_buffer = False  # before the first compile of this process
    return _autograd_pair(torch.compile(torch_math(shape, interleave)), arrays)


def liger_pair(arrays, shape):
    """Liger-Kernel's RMSNorm of Q and K heads, then its (NeoX) RoPE, under autograd."""
    import torch
    # lazy: optional (the lead carries the liger-kernel 0.8.5 wheel to the GPU host)
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.transformers.rope import liger_rotary_pos_emb

    hq, hk, hd, rd = shape.heads_q, shape.heads_k, shape.head_dim, shape.rotary_dim
    if rd != hd:
        raise ValueError("Liger's RoPE rotates the whole head")
    inv = 1.0 / 10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)

    def forward(qkv, wq, wk, pos):
        t = qkv.shape[0]
        heads = qkv.view(t, -1, hd)
        q = LigerRMSNormFunction.apply(heads[:, :hq].reshape(-1, hd), wq, 1e-6).view(1, t, hq, hd)
        k = LigerRMSNormFunction.apply(heads[:, hq:hq + hk].reshape(-1, hd), wk, 1e-6).view(1, t, hk, hd)
        ang = pos.double()[:, None] * inv.to(qkv.device)[None, :]
        emb = torch.cat([ang, ang], dim=-1)[None]
        cos, sin = emb.cos().to(qkv.dtype), emb.sin().to(qkv.dtype)
        q, k = liger_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return torch.cat([q.transpose(1, 2)[0], k.transpose(1, 2)[0], heads[:, hq + hk:]],
                         dim=1).reshape(qkv.shape)
    return _autograd_pair(forward, arrays)


def bit_differences(run, runs: int = RUNS) -> tuple[int, float]:
    """(runs whose weight gradients differ in any bit from the first run's, largest |diff|)."""
    def grads():
        _, dq, dk = run()
        return np.concatenate([_host(dq), _host(dk)])

    first = grads()
    differing, worst = 0, 0.0
    for _ in range(runs - 1):
        now = grads()
        if now.tobytes() != first.tobytes():
            differing += 1
            worst = max(worst, float(np.max(np.abs(now.astype(np.float64) - first))))
    return differing, worst


def _host(a) -> np.ndarray:
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return np.asarray(a)


# ---- the run ------------------------------------------------------------------------------------------

def run(shapes=SHAPES, *, repeats: int | None = None, timer=None, progress: bool = True) -> list[dict]:
    """Every row on every shape (GPU only: the timer needs one)."""
    from .bench import Buffers, Shape, Timer, quantiles

    timer = timer or Timer()
    rows = []
    for name in shapes:
        shape = PRODUCTION_SHAPES[name]
        dtype, itemsize = "bfloat16", 2
        copy_shape = Shape(name, shape.tokens, heads_q=shape.row // shape.head_dim, heads_k=0,
                           head_dim=shape.head_dim, dtype=dtype, heads_v=0)
        copy = timer.time(Buffers(copy_shape).copy, repeats)  # copies the whole qkv row
        copy_gbps = bytes_for("copy", shape, itemsize) / quantiles(copy)[0] / 1e3
        rows.append(make_row("copy", shape, "-", dtype, "copy", itemsize, copy, copy_gbps))
        arrays = inputs(shape, dtype)
        for interleave in (True, False):
            layout = "gptj" if interleave else "neox"
            todo = [("ropelab:fwd+bwd", "forward+backward",
                     lambda: ropelab_forward_backward(arrays, shape, interleave)),
                    ("ropelab:bwd", "backward", lambda: ropelab_backward(arrays, shape, interleave)),
                    ("ropelab:bwd:atomic", "backward",
                     lambda: ropelab_backward(arrays, shape, interleave, "atomic")),
                    ("ropelab:bwd:kernel", "backward",
                     lambda: ropelab_backward_kernel(arrays, shape, interleave)),
                    ("ropelab:bwd:kernel:atomic", "backward",
                     lambda: ropelab_backward_kernel(arrays, shape, interleave, "atomic")),
                    ("ropelab:fwd+bwd:kernel", "forward+backward",
                     lambda: ropelab_forward_backward_kernel(arrays, shape, interleave))]
            # The grid's cap, swept around the default (5 blocks an SM, one wave): fewer
            # blocks mean fewer warps in flight; more mean a second, partial wave.
            todo += [(f"ropelab:bwd:kernel:blocks{b}", "backward",
                      lambda b=b: ropelab_backward_kernel(arrays, shape, interleave,
                                                          max_blocks=b))
                     for b in (264, 528, 792, 1056)]
            pairs = [("torch.compile", lambda: compiled_pair(arrays, shape, interleave))]
            if not interleave:
                pairs.append(("liger", lambda: liger_pair(arrays, shape)))
            for label, make in pairs:
                try:
                    both, bwd = make()
                except Exception as exc:  # a missing package or feature: say so in the record
                    note = f"skipped: {type(exc).__name__}: {exc}"[:200]
                    for part in ("forward+backward", "backward"):
                        rows.append(make_row(f"{label}:{'fwd+bwd' if part != 'backward' else 'bwd'}",
                                             shape, layout, dtype, part, itemsize, [], copy_gbps,
                                             note=note))
                    continue
                todo += [(f"{label}:fwd+bwd", "forward+backward", lambda b=both: b),
                         (f"{label}:bwd", "backward", lambda b=bwd: b)]
            for entry, part, make in todo:
                try:
                    call = make()
                    call()  # compile and warm
                    samples = timer.time(call, repeats)
                    note = ""
                except Exception as exc:
                    samples, note = [], f"failed: {type(exc).__name__}: {exc}"[:200]
                rows.append(make_row(entry, shape, layout, dtype, part, itemsize, samples,
                                     copy_gbps, note=note))
                if progress:
                    print(f"{name} {layout} {entry}: {rows[-1]['median_us']} us "
                          f"({rows[-1]['frac_of_copy']})", file=sys.stderr)
            for dw in ("two_stage", "atomic"):
                differing, worst = bit_differences(ropelab_backward(arrays, shape, interleave, dw))
                rows.append(make_row(f"determinism:{dw}", shape, layout, dtype, "backward",
                                     itemsize, [], copy_gbps, runs_differing=differing,
                                     max_abs_diff=worst, note=f"{RUNS} runs, dw bits vs run 1"))
    return rows


METHOD = ("H200, bfloat16, cold L2 (ropelab.measure.bench.Timer: a fill over 4x the L2 before each "
          "timed launch), events around each call, median of the repeats. bytes_moved per "
          "bytes_for(): backward 2 row + qk, forward 2 row, forward+backward 4 row + qk (row: the "
          "qkv rows, qk: their Q and K heads). copy_gbps: a device copy of the qkv rows. "
          "frac_of_copy = gbps / copy_gbps. determinism rows: weight gradients of RUNS runs "
          "compared bit for bit with run 1. torch.compile rows: buffer donation off "
          "(torch._functorch.config.donated_buffer=False), so the bwd-only row can retain the "
          "graph and time the compiled backward alone.")


def main(argv=None) -> int:
    from . import records

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    rows = run(args.shapes.split(","), repeats=args.repeats)
    path = records.save("bench_backward", rows, method=METHOD)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
