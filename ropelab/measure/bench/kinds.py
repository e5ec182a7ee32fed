"""Every record kind the benches write: its columns (the order committed records keep) and its
text table.  A new column, or a new kind, is declared here and nowhere else; the benches build
their rows with ``SCHEMA.row(...)`` and save them with :func:`.record.save`, which refuses rows
that are not their kind's.
"""

from __future__ import annotations

from .schema import Cell, Schema, host, host_bound_note, number, percent, text

# Column groups shared by several kinds.  TIMING is what :func:`.stats.summarize` returns for
# one timed row (in this order); HOST what :func:`.stats.host_fields` returns.
QUANTILES = ("median_us", "p20_us", "p80_us", "repeats")
TIMING = ("bytes_moved",) + QUANTILES + ("gbps", "copy_gbps", "frac_of_copy")
HOST = ("host_us", "fill_us", "host_bound")

MEDIAN = number("median_us", 10, ".2f", "median us")


def _shape_label(row: dict) -> str:
    return row["shape"] + ("" if row["dtype"] == "float32" else f" {row['dtype']}")


def _spread(row: dict) -> str:
    lo, hi = row["vs_reference_lo"], row["vs_reference_hi"]
    return "" if lo is None else f"{lo:.3f}-{hi:.3f}"


def _note(row: dict) -> str:
    return f" {row['note']}" if row["note"] else ""


# The sweep (python -m ropelab bench): one row per (entry, shape).  Kinds bench, bench_fused (a
# fused-only run) and bench_rows (plain RoPE as models call it) share it.
SWEEP_COLUMNS = ("variant", "family", "shape", "tokens", "hidden", "heads_q", "heads_k",
                 "head_dim", "dtype", "fastmath") + TIMING + HOST
SWEEP_CELLS = (
    text("variant", 22), Cell("shape", 22, _shape_label, "<"), MEDIAN,
    Cell("p20-p80 us", 17, lambda r: f"{r['p20_us']:>8.2f}-{r['p80_us']:<8.2f}"),
    number("gbps", 8, ".0f", "GB/s"), number("copy_gbps", 9, ".0f", "copy GB/s"), percent(),
    host())
BENCH, BENCH_FUSED, BENCH_ROWS = (Schema(kind, SWEEP_COLUMNS, SWEEP_CELLS, host_bound_note)
                                  for kind in ("bench", "bench_fused", "bench_rows"))

LAUNCH_OVERHEAD = Schema(
    "launch_overhead", ("launcher", "kernel_args", "launches", "us_per_launch",
                        "us_per_launch_synced"),
    (text("launcher", 44), number("kernel_args", 4, "", "args"),
     number("us_per_launch", 10, ".2f", "us/launch"),
     number("us_per_launch_synced", 8, ".2f", "synced")))

BENCH_BACKWARD = Schema(
    "bench_backward", ("entry", "shape", "layout", "dtype", "part") + TIMING
    + ("runs_differing", "max_abs_diff", "note"),
    (text("entry", 32), text("shape", 16), text("layout", 6), text("part", 16), MEDIAN,
     percent(), Cell("", 0, _note, "<")))

TORCH_OPS = Schema(
    "torch_ops", ("call", "case", "shape", "dtype", "layout") + TIMING + ("vs_public",) + HOST,
    (text("case", 34), text("call", 12), MEDIAN, percent(),
     number("vs_public", 9, ".3f", "vs public"), host()),
    lambda rows: ["target: op_compiled within 3% of public (vs public <= 1.030)"])

CONTROLS = Schema(
    "controls", ("entry", "role", "question", "reference", "shape", "tokens", "hidden") + TIMING
    + ("vs_reference", "vs_reference_lo", "vs_reference_hi") + HOST,
    (text("entry", 24), text("shape", 11), MEDIAN, percent(),
     Cell("vs", 22, lambda r: r["reference"] or "-", "<"),
     number("vs_reference", 6, ".3f", "ratio"), Cell("round lo-hi", 13, _spread), host()))

REAL_MODEL = Schema(
    "real_model", ("model", "mode", "pass", "tokens", "hidden", "heads_q", "heads_kv",
                   "head_dim", "dtype") + QUANTILES + ("vs_transformers",) + HOST + ("note",),
    (text("model", 13), text("mode", 9), text("pass", 17),
     number("median_us", 10, ".1f", "median us"),
     number("vs_transformers", 15, ".3f", "vs transformers"), Cell("", 0, _note, "<")))

SERVING = Schema(
    "serving", ("case", "regime", "call", "tokens", "requests", "heads_q", "heads_k", "head_dim",
                "layout", "dtype", "cache_dtype", "graph_calls") + TIMING
    + ("vs_op", "cache_bytes_differing", "cache_max_diff") + HOST,
    (text("case", 26), text("cache_dtype", 6, "cache"), text("call", 15), MEDIAN, percent(),
     number("vs_op", 7, ".2f", "vs op"), number("cache_bytes_differing", 9, "", "bytes !="),
     host()),
    lambda rows: ["targets: op >= 90% of copy (prefill); op within 0.5 us of copy (decode); "
                  "fused+scatter >= 1.5x op; compiled_chain >= 5x op",
                  "bytes != : cache bytes that differ from the op's on the same inputs"]
    + host_bound_note(rows))

SCHEMAS = {s.kind: s for s in (BENCH, BENCH_FUSED, BENCH_ROWS, LAUNCH_OVERHEAD, BENCH_BACKWARD,
                               TORCH_OPS, CONTROLS, REAL_MODEL, SERVING)}


def schema_of(kind: str) -> Schema:
    try:
        return SCHEMAS[kind]
    except KeyError:
        raise KeyError(f"no bench record kind {kind!r}; the kinds are {sorted(SCHEMAS)}") from None


def format_rows(rows: list[dict], kind: str = "bench") -> str:
    """Rows of a record ``kind`` as its text table (the one formatter of every bench)."""
    return schema_of(kind).format(rows)
