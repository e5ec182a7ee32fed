"""ropelab's torch custom ops on a GPU: eager against ``torch.compile(fullgraph=True)``.

Run on a GPU host::

    python -m ropelab.measure.bench.torch_ops            # print the table
    python -m ropelab.measure.bench.torch_ops --record   # and save it under data/torch_ops/

For each case (plain RoPE float32, and bfloat16 when ``ropelab.rope`` accepts it, at
32768 x 32 x 128; the fused QK-RMSNorm + RoPE in bfloat16 at flux_1024, GPT-J and NeoX), four
rows timed by :class:`ropelab.measure.bench.Timer` (cold L2, CUDA events, medians), on CUDA
tensors, in one run:

* ``public``: the public call (``ropelab.rope`` / ``ropelab.fused_qknorm_rope``) on the tensors;
* ``op_eager``: the custom op through :mod:`ropelab.torch_ops`, eager;
* ``op_compiled``: a function calling that op, compiled with ``torch.compile(fullgraph=True)``;
* ``torch_copy``: ``out.copy_(x)`` of the same bytes (the roof).

The target: ``op_compiled`` within 3% of ``public`` (``vs_public`` <= 1.03).
Every call writes its output in place or into a preallocated ``out``, so no row times an
allocation.  The Timer's fill kernel keeps the GPU busy while the host enqueues each call, so
the rows time GPU work; ``host_us`` says how long the enqueue took (custom-op dispatch and
compiled-guard checks included) and ``host_bound`` flags a row where it may have leaked in.
"""

from __future__ import annotations

import argparse
import sys

from .kinds import TORCH_OPS, format_rows
from .record import method_text, run_meta, save

ROPE_SHAPE = (32768, 32, 128)  # [tokens, heads, head_dim]: 537 MB each way in float32
FUSED_SHAPE = "flux_1024"
NOTES = ("calls on CUDA tensors on PyTorch's current stream (the default stream here)",
         "op_compiled: torch.compile(fullgraph=True) of a function calling the custom op, "
         "compiled and warmed up before timing",
         "vs_public = median / the public call's median in the same case",
         "torch_copy: out.copy_(x) of the same bytes")


def _host_view(t):
    """A NumPy view of a CPU tensor's memory (bfloat16 as its uint16 bits), as the public
    functions take host data."""
    import torch

    t = t.detach()
    return (t.view(torch.uint16) if t.dtype == torch.bfloat16 else t).numpy()


def _public(public, tensors: dict, options: dict):
    """The public call as a launcher: on CUDA tensors directly; on CPU tensors (the dry run
    of the tests) through NumPy views of the same memory."""
    if next(iter(tensors.values())).is_cuda:
        return lambda: public(**tensors, **options)
    views = {k: _host_view(t) for k, t in tensors.items()}
    return lambda: public(**views, **options)


def rope_case(dtype_name: str, shape=ROPE_SHAPE, device: str = "cuda"):
    """(label, dtype, layout, bytes, {call: launcher}, the tensor the calls write) for plain
    RoPE, or None when ropelab refuses the dtype."""
    import torch

    import ropelab
    import ropelab.torch_ops as rt

    from ...shapes import rope_bytes

    tokens, heads, head_dim = shape
    x = torch.randn(shape, device=device).to(getattr(torch, dtype_name))
    out = torch.empty_like(x)
    pos = torch.arange(tokens, dtype=torch.int32, device=device)
    # float32: pair_sincos; 16-bit: ropelab's default choice (the rope_rows kernel), since the
    # float32-only variants refuse 16-bit storage.
    variant = "pair_sincos" if dtype_name == "float32" else None
    options = dict(variant=variant, interleave=False)
    public = _public(ropelab.rope, {"x": x, "positions": pos, "out": out}, options)
    try:
        public()
    except (TypeError, ValueError) as exc:
        print(f"skipping rope {dtype_name}: ropelab refuses it ({exc})", file=sys.stderr)
        return None

    def layer(x, out, pos):
        rt.rope(x, out=out, variant=variant, interleave=False, positions=pos)

    compiled = torch.compile(layer, fullgraph=True)
    calls = {
        "public": public,
        "op_eager": lambda: layer(x, out, pos),
        "op_compiled": lambda: compiled(x, out, pos),
        "torch_copy": lambda: out.copy_(x),
    }
    nbytes = rope_bytes(tokens, heads * head_dim, x.element_size())
    return f"{tokens}x{heads}x{head_dim}", dtype_name, "neox", nbytes, calls, out


def fused_case(neox: bool, shape=None, device: str = "cuda"):
    """(label, dtype, layout, bytes, {call: launcher}, qkv) for the fused op in bfloat16 at
    ``shape`` (a :class:`ropelab.shapes.FusedShape`, default flux_1024)."""
    import numpy as np
    import torch

    import ropelab
    import ropelab.torch_ops as rt

    from ... import check as ropelab_check
    from ...shapes import PRODUCTION_SHAPES

    s = shape or PRODUCTION_SHAPES[FUSED_SHAPE]
    host = ropelab_check.random_inputs(np.random.default_rng(0), s.tokens,
                                       (s.heads_q, s.heads_k, s.heads_v), s.head_dim, "bfloat16")
    qkv, wq, wk = (torch.from_numpy(a.view(np.int16)).to(device).view(torch.bfloat16)
                   for a in host[:3])
    pos = torch.from_numpy(host[3]).to(device)
    options = dict(num_heads_q=s.heads_q, num_heads_k=s.heads_k, num_heads_v=s.heads_v,
                   head_dim=s.head_dim, rotary_dim=s.rotary_dim, interleave=not neox)

    def layer(qkv, wq, wk, pos):
        rt.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, **options)

    compiled = torch.compile(layer, fullgraph=True)
    qk = qkv[:, :(s.heads_q + s.heads_k) * s.head_dim].contiguous()
    qk_out = torch.empty_like(qk)
    # In place: every repeat re-normalizes the previous output, so values stay O(weight).
    calls = {
        "public": _public(ropelab.fused_qknorm_rope, {"qkv": qkv, "q_weight": wq, "k_weight": wk,
                                                      "positions": pos}, options),
        "op_eager": lambda: layer(qkv, wq, wk, pos),
        "op_compiled": lambda: compiled(qkv, wq, wk, pos),
        "torch_copy": lambda: qk_out.copy_(qk),
    }
    return s.name, "bfloat16", "neox" if neox else "gptj", s.qk_bytes(2), calls, qkv


def run(record: bool = False, out=None) -> list[dict]:
    """Time every case; with ``record``, save the rows (under ``out/torch_ops/`` for a data root
    ``out``, else the checkout's data/)."""
    import torch

    from .stats import host_fields, quantiles, summarize
    from .timer import BenchError, Timer, require_gpu

    require_gpu()
    if not torch.cuda.is_available():
        raise BenchError("PyTorch has no CUDA device here: the torch ops bench needs one")
    timer = Timer()
    cases = [rope_case("float32"), rope_case("bfloat16"), fused_case(False), fused_case(True)]
    rows = []
    for case in filter(None, cases):
        label, dtype, layout, nbytes, calls, _ = case
        timed = {}
        for name, launch in calls.items():
            samples = timer.time(launch)
            timed[name] = (samples, host_fields(timer.last_host_us, timer.fill_us))
        copy = summarize(timed["torch_copy"][0], nbytes)
        public_median = quantiles(timed["public"][0])[0]
        for name, (samples, host) in timed.items():
            timing = summarize(samples, nbytes, copy["gbps"])
            rows.append(TORCH_OPS.row(timing, **host, call=name, case=f"{label} {dtype} {layout}",
                                      shape=label, dtype=dtype, layout=layout,
                                      vs_public=round(timing["median_us"] / public_median, 4)))
    print(format_rows(rows, "torch_ops"))
    if record:
        path = save("torch_ops", rows, method=method_text(timer, *NOTES),
                    meta=run_meta(torch=torch.__version__), out=out)
        print(f"recorded {path}")
    return rows


def main(argv=None) -> int:
    from .timer import refused

    parser = argparse.ArgumentParser(prog="python -m ropelab.measure.bench.torch_ops",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="save the rows under data/torch_ops/")
    parser.add_argument("--out", default=None, help="data root (default the repo's data/)")
    args = parser.parse_args(argv)
    if refused(parser.prog):
        return 2
    run(record=args.record, out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
