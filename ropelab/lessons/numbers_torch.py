"""Numbers of plain RoPE as models call it (``data/bench_rows/``) and of the PyTorch custom ops
(``data/torch_ops/``), for the README's "Inside a PyTorch model" part."""

from __future__ import annotations

from .numbers_core import Rendered, newest, number, pct, pct_span

TARGET_SHAPE = "rope16_32768x32x128"  # bf16 [32768, 32, 128]: the single-tensor target
QK_SHAPES = ("flux_1024_rows", "qwen3_8b_4096")  # where q and k rotate together


def _rows(variant: str, shapes) -> tuple[str, list[float]]:
    path, rec = newest("bench_rows", with_variant=variant)
    fracs = [r["frac_of_copy"] for r in rec["rows"] if r["variant"] == variant
             and r["shape"] in shapes]
    if len(fracs) != len(shapes):
        raise LookupError(f"{path} lacks {variant} on some of {shapes}")
    return path, fracs


@number("rows.bf16_target_pct")
def rows_bf16_target_pct():
    path, fracs = _rows("rope_rows:rope", (TARGET_SHAPE,))
    return Rendered(pct(fracs[0], 1), path)


@number("rows.rope_qk_pct")
def rows_rope_qk_pct():
    path, fracs = _rows("rope_rows:rope_qk", QK_SHAPES)
    return Rendered(pct_span(fracs, 1), path)


@number("rows.two_calls_pct")
def rows_two_calls_pct():
    path, fracs = _rows("rope_rows:two_calls", QK_SHAPES)
    return Rendered(pct_span(fracs, 1), path)


@number("rows.run8_pct")
def rows_run8_pct():
    path, fracs = _rows("rope_rows:rope:run8", (TARGET_SHAPE,) + QK_SHAPES)
    return Rendered(pct_span(fracs, 1), path)


@number("rows.run4_pct")
def rows_run4_pct():
    path, fracs = _rows("rope_rows:rope", (TARGET_SHAPE,) + QK_SHAPES)
    return Rendered(pct_span(fracs, 1), path)


@number("rows.neox_pct")
def rows_neox_pct():
    """The single-tensor target in the NeoX layout, the default mapping."""
    return _target_pct("rope_rows:rope:neox")


@number("rows.h4_pct")
def rows_h4_pct():
    """The single-tensor target with four heads a thread (GPT-J)."""
    return _target_pct("rope_rows:rope:h4")


def _target_pct(variant: str) -> Rendered:
    path, fracs = _rows(variant, (TARGET_SHAPE,))
    return Rendered(pct(fracs[0], 1), path)


@number("rows.neox_h4_pct")
def rows_neox_h4_pct():
    """The single-tensor target, NeoX, four heads a thread, cos/sin computed."""
    return _target_pct("rope_rows:rope:neox_h4")


@number("rows.neox_cache_pct")
def rows_neox_cache_pct():
    """The single-tensor target, NeoX, cos/sin read from a float32 cache (default mapping)."""
    return _target_pct("rope_rows:rope:neox_cache")


@number("rows.neox_cache_h4_pct")
def rows_neox_cache_h4_pct():
    """The single-tensor target, NeoX, cos/sin from the cache, four heads a thread."""
    return _target_pct("rope_rows:rope:neox_cache_h4")


@number("rows.torch_compile_cached_pct")
def rows_torch_compile_cached_pct():
    """torch.compile of the NeoX rotation with a float32 cos/sin cache, same run and shape."""
    return _target_pct("rope_rows:torch_compile_cached")


@number("torch.compiled_vs_public_pct")
def torch_compiled_vs_public_pct():
    """The largest distance of the compiled op's median from the public call's, every case."""
    path, rec = newest("torch_ops")
    gaps = [abs(r["vs_public"] - 1.0) for r in rec["rows"] if r["call"] == "op_compiled"]
    if not gaps:
        raise LookupError(f"{path} has no op_compiled rows")
    return Rendered(pct(max(gaps), 1), path)
