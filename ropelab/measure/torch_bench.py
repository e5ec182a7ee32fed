"""ropelab's torch custom ops on a GPU: eager against ``torch.compile(fullgraph=True)``.

Run on a GPU host::

    python -m ropelab.measure.torch_bench            # print the table
    python -m ropelab.measure.torch_bench --record   # and save it under data/torch_ops/

For each case (plain RoPE float32, and bfloat16 when ``ropelab.rope`` accepts it, at
32768 x 32 x 128; the fused QK-RMSNorm + RoPE in bfloat16 at flux_1024, GPT-J and NeoX), four
rows timed by :class:`ropelab.measure.bench.Timer` (cold L2, CUDA events, medians), on CUDA
tensors, in one run:

* ``public``: the public call (``ropelab.rope`` / ``ropelab.fused_qknorm_rope``) on the tensors;
* ``op_eager``: the custom op through :mod:`ropelab.torch_ops`, eager;
* ``op_compiled``: a function calling that op, compiled with ``torch.compile(fullgraph=True)``;
* ``torch_copy``: ``out.copy_(x)`` of the same bytes (the roof).

The target the issue sets: ``op_compiled`` within 3% of ``public`` (``vs_public`` <= 1.03).
Every call writes its output in place or into a preallocated ``out``, so no row times an
allocation.  The Timer's fill kernel keeps the GPU busy while the host enqueues each call, so
the rows time GPU work; ``host_us`` says how long the enqueue took (custom-op dispatch and
compiled-guard checks included) and ``host_bound`` flags a row where it may have leaked in.
"""

from __future__ import annotations

import argparse
import sys

COLUMNS = ("call", "case", "shape", "dtype", "layout", "bytes_moved", "median_us", "p20_us",
           "p80_us", "repeats", "gbps", "copy_gbps", "frac_of_copy", "vs_public", "host_us",
           "fill_us", "host_bound")
ROPE_SHAPE = (32768, 32, 128)  # [tokens, heads, head_dim]: 537 MB each way in float32
FUSED_SHAPE = "flux_1024"


def method_text(timer) -> str:
    from . import bench

    return (bench.method_text(timer.l2_bytes, timer.flush_bytes, timer.warmup, timer.repeats)
            + "; calls on CUDA tensors on PyTorch's current stream (the default stream here); "
              "op_compiled: torch.compile(fullgraph=True) of a function calling the custom op, "
              "compiled and warmed up before timing; vs_public = median / the public call's "
              "median in the same case; torch_copy: out.copy_(x) of the same bytes")


def _public(public, tensors: dict, options: dict):
    """The public call as a launcher: on CUDA tensors directly; on CPU tensors (the dry run
    of the tests) through NumPy views, as the public functions take host data."""
    import ropelab.torch_ops as rt

    if next(iter(tensors.values())).is_cuda:
        return lambda: public(**tensors, **options)
    return lambda: rt.call_public(public, tensors, options)


def rope_case(dtype_name: str, shape=ROPE_SHAPE, device: str = "cuda"):
    """(label, dtype, layout, bytes, {call: launcher}, the tensor the calls write) for plain
    RoPE, or None when ropelab refuses the dtype."""
    import torch

    import ropelab
    import ropelab.torch_ops as rt

    from ..shapes import rope_bytes

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

    from .. import check as ropelab_check
    from ..shapes import PRODUCTION_SHAPES

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


def run(record: bool = False) -> list[dict]:
    import torch

    from . import bench, records

    bench.require_gpu()
    if not torch.cuda.is_available():
        raise bench.BenchError("PyTorch has no CUDA device here: the torch ops bench needs one")
    timer = bench.Timer()
    cases = [rope_case("float32"), rope_case("bfloat16"), fused_case(False), fused_case(True)]
    rows = []
    for case in filter(None, cases):
        label, dtype, layout, nbytes, calls, _ = case
        timed = {}
        for name, launch in calls.items():
            samples = timer.time(launch)
            timed[name] = (samples, bench.host_fields(timer.last_host_us, timer.fill_us))
        copy = bench.summarize(timed["torch_copy"][0], nbytes)
        public_median = bench.quantiles(timed["public"][0])[0]
        for name, (samples, host) in timed.items():
            row = {"call": name, "case": f"{label} {dtype} {layout}", "shape": label,
                   "dtype": dtype, "layout": layout,
                   **bench.summarize(samples, nbytes, copy["gbps"]), "vs_public": None, **host}
            row["vs_public"] = round(row["median_us"] / public_median, 4)
            rows.append({c: row[c] for c in COLUMNS})
    print(format_rows(rows))
    if record:
        meta = records.metadata()
        meta["torch"] = torch.__version__
        path = records.save("torch_ops", rows, method=method_text(timer), meta=meta)
        print(f"recorded {path}")
    return rows


def format_rows(rows: list[dict]) -> str:
    head = (f"{'case':<34} {'call':<12} {'median us':>10} {'of copy':>8} {'vs public':>9} "
            f"{'host us':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        frac = "" if r["frac_of_copy"] is None else f"{100 * r['frac_of_copy']:.1f}%"
        host = "" if r["host_us"] is None else f"{r['host_us']:.0f}{'!' if r['host_bound'] else ''}"
        lines.append(f"{r['case']:<34} {r['call']:<12} {r['median_us']:>10.2f} {frac:>8} "
                     f"{r['vs_public']:>9.3f} {host:>8}")
    lines.append("target: op_compiled within 3% of public (vs public <= 1.030)")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.measure.torch_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="save the rows under data/torch_ops/")
    args = parser.parse_args(argv)
    run(record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
