"""Numbers of the serving op, ``ropelab.fused_qknorm_rope_kv`` (``data/serving/``), for the
README's serving part: the op against a copy of the bytes it must move, against ropelab's fused
op followed by torch's scatter into the caches, and against ``torch.compile`` of the chain."""

from __future__ import annotations

from .numbers_core import Rendered, newest, number, pct_span, span


def _calls(rec, call: str, regime: str | None = None) -> list[dict]:
    rows = [r for r in rec["rows"] if r["call"] == call
            and (regime is None or r["regime"] == regime)]
    if not rows:
        raise LookupError(f"the serving record has no {call!r} rows"
                          + (f" in {regime}" if regime else ""))
    return rows


def _prefill_pct(cache_dtype: str) -> Rendered:
    path, rec = newest("serving")
    rows = [r for r in _calls(rec, "op", "prefill") if r["cache_dtype"] == cache_dtype]
    if not rows:
        raise LookupError(f"{path} has no prefill op rows with a {cache_dtype} cache")
    return Rendered(pct_span([r["frac_of_copy"] for r in rows], 1), path)


@number("serving.prefill_bf16_pct")
def prefill_bf16_pct() -> Rendered:
    return _prefill_pct("bfloat16")


@number("serving.prefill_fp8_pct")
def prefill_fp8_pct() -> Rendered:
    return _prefill_pct("fp8")


@number("serving.decode_gap_us")
def decode_gap_us() -> Rendered:
    """How much longer the op takes than a copy of the same bytes, every decode case."""
    path, rec = newest("serving")
    copies = {(r["case"], r["cache_dtype"]): r["median_us"] for r in _calls(rec, "copy", "decode")}
    gaps = [r["median_us"] - copies[(r["case"], r["cache_dtype"])]
            for r in _calls(rec, "op", "decode")]
    return Rendered(span(gaps, lambda v: f"{v:.2f}", unit=" us"), path)


def _ratio(call: str) -> Rendered:
    path, rec = newest("serving")
    return Rendered(span([r["vs_op"] for r in _calls(rec, call)], lambda v: f"{v:.1f}",
                         unit=" times"), path)


@number("serving.vs_scatter_ratio")
def vs_scatter_ratio() -> Rendered:
    return _ratio("fused+scatter")


@number("serving.vs_compiled_ratio")
def vs_compiled_ratio() -> Rendered:
    return _ratio("compiled_chain")
