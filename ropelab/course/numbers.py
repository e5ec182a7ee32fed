"""Measured numbers for the course's prose, each read from the record it comes from.

A notebook source's Markdown (and the README) never types a measured number.  It writes a
placeholder, ``{{ fused.neox_16bit_pct }}``, and ``notebooks/build.py`` replaces it with the
text of the registry entry of that name while building the notebook, noting in the cell's
metadata which record each number was read from.  When a record changes, the rendered text
changes with it, and ``tests/test_drift.py`` fails until the notebook is rebuilt: prose cannot
quietly disagree with ``data/``.

Each entry is a function of no arguments that returns a :class:`Rendered`: the text to put in
the prose and the record it read (a path under ``data/``, or the seed note it quotes).  Keys are
``<topic>.<what>``; the topics follow the records (``bench``, ``fused``, ``controls``,
``profile``, ``history``, ``launch``, ``seed``).

The measured numbers of the README and of ``data/history/README.md`` sit between markers,
``<!--n:KEY-->TEXT<!--/n-->`` (invisible when rendered); ``python -m ropelab.course.numbers
--readme`` rewrites the text between them, and ``--check-readme`` exits 1 when one disagrees
with the records.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..measure import records
from .ledger import DRAM_4090_GBPS, SEED_TABLE
from .tables import bench_row, fused_history_table, roof_gbps

ROOT = records.DATA_DIR.parent
PLACEHOLDER = re.compile(r"\{\{\s*([\w.:]+)\s*\}\}")
# Markdown files outside the notebooks whose measured numbers are marked and rendered.
MARKED_FILES = ("README.md", "data/history/README.md")
README_MARK = re.compile(r"<!--n:([\w.:]+)-->(.*?)<!--/n-->", re.S)


@dataclass(frozen=True)
class Rendered:
    text: str  # what the prose shows
    record: str  # where it was read: paths relative to the repository ("; " between several),
    # or the quoted source


REGISTRY: dict[str, Callable[[], Rendered]] = {}


def number(key: str):
    """Register the decorated function as the placeholder ``{{ key }}``."""
    def register(fn):
        if key in REGISTRY:
            raise ValueError(f"number {key!r} registered twice")
        REGISTRY[key] = fn
        return fn
    return register


# Reading records: every run of a kind, with the file it came from.

def runs(kind: str, directory: str | None = None) -> list[tuple[str, dict]]:
    """``[(path relative to the repository, record)]`` of every run of ``kind``, oldest first."""
    folder = records.DATA_DIR / (directory or kind)
    found = [(p, records.validate(json.loads(p.read_text())))
             for p in sorted(folder.glob(f"{kind}-*.json"))]
    found.sort(key=lambda pr: pr[1]["meta"]["date"])
    return [(str(p.relative_to(ROOT)), r) for p, r in found]


def newest(kind: str, with_variant: str | None = None) -> tuple[str, dict]:
    """The newest run of ``kind`` (that timed ``with_variant``, when given): the same choice
    notebook 06 makes with its ``newest_with``, so prose and tables quote one run."""
    for path, rec in reversed(runs(kind)):
        if with_variant is None or any(r["variant"] == with_variant for r in rec["rows"]):
            return path, rec
    raise LookupError(f"no {kind} record times {with_variant!r}")


def run_at(kind: str, stamp: str) -> tuple[str, dict]:
    """The run of ``kind`` whose file name holds ``stamp`` (a run named in the history)."""
    found = [(p, r) for p, r in runs(kind) if stamp in Path(p).name]
    if len(found) != 1:
        raise LookupError(f"{len(found)} {kind} records stamped {stamp!r}")
    return found[0]


# Formatting: one way to write each kind of number, so the prose reads alike everywhere.

def pct(fraction: float, digits: int = 0) -> str:
    return f"{100 * fraction:.{digits}f}%"


def span(values, fmt: Callable[[float], str], sep: str = "-", unit: str = "") -> str:
    """``"93-96%"`` from the smallest and largest value (one value when they print alike)."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}{sep}{hi}{unit}"


def pct_span(fractions, digits: int = 0) -> str:
    return span([100 * f for f in fractions], lambda v: f"{v:.{digits}f}", unit="%")


def times_word(ratio: float) -> str:
    """A whole ratio as the prose says it: "twice", "three times", ... (else "N.N times")."""
    words = {2: "twice", 3: "three times", 4: "four times", 5: "five times", 8: "eight times"}
    whole = round(ratio)
    if abs(ratio - whole) < 0.05 and whole in words:
        return words[whole]
    return f"{ratio:.1f} times"


# The shapes the prose talks about.
BIG = "32768x4096"  # the 1 GB shape, where launch and ramp-up costs vanish
SEED_SHAPES = ("4096x512", "4096x1024", "8192x512", "8192x1024")
FULL_ROTARY = ("flux_1024", "qwen_image_1024", "zimage_1024")  # heads rotated in full
STORAGE_16 = ("bfloat16", "float16")


def _fracs(rec, variant, shapes, dtypes):
    return [bench_row(rec, variant, s, d)["frac_of_copy"] for s in shapes for d in dtypes]


# ---------------------------------------------------------------- bench (notebooks 01-03, 07)

def _bench():
    return newest("bench")


def _roof_share(variant, shape=BIG):
    path, rec = _bench()
    return Rendered(pct(bench_row(rec, variant, shape)["gbps"] / roof_gbps(rec), 1), path)


@number("bench.pack4_scalar_roof_pct")
def _():
    return _roof_share("pack4_scalar")


@number("bench.pack4_roof_pct")
def _():
    return _roof_share("pack4")


@number("bench.seed_shapes_us")
def _():
    """How long the ropelab kernels and the copy last at the seed's sizes."""
    path, rec = _bench()
    times = [bench_row(rec, v, s)["median_us"] for v in ("copy_d2d", "flat", "pack4", "pack4_scalar")
             for s in SEED_SHAPES]
    return Rendered(span(times, lambda t: f"{t:.0f}", sep=" to ", unit=" us"), path)


@number("bench.small_copy_us")
def _():
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, 'copy_d2d', '4096x512')['median_us']:.0f} us", path)


@number("bench.big_copy_us")
def _():
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, 'copy_d2d', BIG)['median_us']:.0f}", path)


# The README's table: each row at the 1 GB shape, its median and its share of the roof.
README_TABLE = ("copy_d2d", "pack4", "cuda_float4", "pair_sincos", "flat", "cuda_flat", "freq_table",
                "block2d", "pack4_scalar", "torch_compile", "freq_table:cache", "torch_complex_seed")


def _big_us(variant):
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, variant, BIG)['median_us']:,.0f}", path)


def _big_share(variant):
    """Share of the copy of the same bytes timed in the same run (the record's frac_of_copy)."""
    path, rec = _bench()
    share = bench_row(rec, variant, BIG)["frac_of_copy"]
    return Rendered(pct(share, 1 if share < 0.01 else 0), path)


for _variant in README_TABLE:
    number(f"bench.big_us.{_variant}")(lambda v=_variant: _big_us(v))
    number(f"bench.big_share.{_variant}")(lambda v=_variant: _big_share(v))


@number("bench.pack4_kernel_big_us")
def _():
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, 'pack4:kernel', BIG)['median_us']:.0f} us", path)


@number("bench.torch_compile_seed_us")
def _():
    path, rec = _bench()
    return Rendered(f"{bench_row(rec, 'torch_compile', '4096x512')['median_us']:.1f} us", path)


def _public_vs_kernel(shapes=None):
    """The largest gap between a public call's time and the same launch fired alone."""
    path, rec = _bench()
    rows = {(r["variant"], r["shape"], r["dtype"]): r["median_us"] for r in rec["rows"]}
    gaps = [abs(rows[(v[:-len(":kernel")], s, d)] / t - 1) for (v, s, d), t in rows.items()
            if v.endswith(":kernel") and (v[:-len(":kernel")], s, d) in rows
            and (shapes is None or s in shapes)]
    return Rendered(pct(max(gaps), 1), path)


@number("bench.public_vs_kernel_pct")
def _():
    return _public_vs_kernel()


@number("bench.public_vs_kernel_big_pct")
def _():
    return _public_vs_kernel((BIG,))


@number("launch.rope_torch_us")
def _():
    path, rec = newest("launch_overhead")
    row = next(r for r in rec["rows"] if r["launcher"].startswith("ropelab.rope(flat) torch arrays"))
    return Rendered(f"{row['us_per_launch']:.0f} us", path)


# -------------------------------------------------------------------- profile (notebook 03)

def _profile_row(rec, case):
    return next(r for r in rec["rows"] if r["case"] == case)


@number("profile.scalar_over_flat_sectors")
def _():
    """How many more sectors one 4-byte access of pack4_scalar touches than one of flat: the
    store column, which holds only the x/out accesses (the load column averages in the
    positions loads, one sector each)."""
    path, rec = newest("profile")
    scalar = _profile_row(rec, f"pack4_scalar@large_{BIG}")["st_sectors_per_request"]
    flat = _profile_row(rec, f"flat@large_{BIG}")["st_sectors_per_request"]
    return Rendered(times_word(scalar / flat), path)


@number("profile.scalar_and_flat_store_sectors")
def _():
    path, rec = newest("profile")
    scalar = _profile_row(rec, f"pack4_scalar@large_{BIG}")["st_sectors_per_request"]
    flat = _profile_row(rec, f"flat@large_{BIG}")["st_sectors_per_request"]
    return Rendered(f"{scalar:.0f} against {flat:.0f}", path)


# -------------------------------------------------------------- fused kernel (notebook 06)

SWEEP_VARIANT = "fused_qknorm_rope:1token_blocks"  # the sweep: the run that timed every setting
TWIN_VARIANT = "cuda_fused"  # the newest run beside the C++ twin


def _sweep():
    return newest("bench_fused", SWEEP_VARIANT)


@number("fused.one_head_16bit_pct")
def _():
    """16-bit storage with one head per warp (the mapping 06 starts with), production shapes."""
    path, rec = _sweep()
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope_1head", shapes, STORAGE_16)), path)


@number("fused.one_head_f32_pct")
def _():
    path, rec = _sweep()
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope_1head", shapes, ("float32",))), path)


@number("fused.two_heads_gain_points")
def _():
    """Points of the copy that half a warp per head adds to 16-bit storage, per shape."""
    path, rec = _sweep()
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    gains = [100 * (b - a) for a, b in zip(_fracs(rec, "fused_qknorm_rope_1head", shapes, STORAGE_16),
                                           _fracs(rec, "fused_qknorm_rope_2heads", shapes, STORAGE_16))]
    return Rendered(span(gains, lambda g: f"{g:.0f}", sep=" to ", unit=" points"), path)


@number("fused.f32_one_head_lead_pct")
def _():
    """How much faster one head per warp is than the best other setting, in float32, on the
    shapes where it is fastest."""
    path, rec = _sweep()
    leads = []
    for shape in FULL_ROTARY + ("qwen_image_partial",):
        t = {v: bench_row(rec, v, shape, "float32")["median_us"] for v in
             ("fused_qknorm_rope_1head", "fused_qknorm_rope_2heads", "fused_qknorm_rope_4heads")}
        others = min(t["fused_qknorm_rope_2heads"], t["fused_qknorm_rope_4heads"])
        if t["fused_qknorm_rope_1head"] < others:
            leads.append(100 * (others / t["fused_qknorm_rope_1head"] - 1))
    return Rendered(span(leads, lambda v: f"{v:.1f}", unit="%"), path)


@number("fused.f32_one_head_wins")
def _():
    path, rec = _sweep()
    wins = 0
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    for shape in shapes:
        t = {v: bench_row(rec, v, shape, "float32")["median_us"] for v in
             ("fused_qknorm_rope_1head", "fused_qknorm_rope_2heads", "fused_qknorm_rope_4heads")}
        wins += min(t, key=t.get) == "fused_qknorm_rope_1head"
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    return Rendered(f"{words.get(wins, wins)} of the {words[len(shapes)]}", path)


def _twin_run():
    return newest("bench_fused", TWIN_VARIANT)


@number("fused.gptj_16bit_pct")
def _():
    path, rec = _twin_run()
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope", FULL_ROTARY, STORAGE_16)), path)


@number("fused.neox_16bit_pct")
def _():
    """NeoX in 16-bit storage on the fully rotated shapes (split pairs), beside the twin."""
    path, rec = _twin_run()
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope:neox", FULL_ROTARY, STORAGE_16)), path)


@number("fused.f32_pct")
def _():
    path, rec = _twin_run()
    fr = (_fracs(rec, "fused_qknorm_rope", FULL_ROTARY, ("float32",))
          + _fracs(rec, "fused_qknorm_rope:neox", FULL_ROTARY, ("float32",)))
    return Rendered(pct_span(fr), path)


@number("fused.vs_twin_pct")
def _():
    """How much slower than its C++ twin ropelab is at most, fully rotated shapes."""
    path, rec = _twin_run()
    worst = 0.0
    for ours, twin in (("fused_qknorm_rope", "cuda_fused"), ("fused_qknorm_rope:neox", "cuda_fused_neox")):
        for s in FULL_ROTARY:
            for d in STORAGE_16 + ("float32",):
                try:
                    ratio = bench_row(rec, ours, s, d)["median_us"] / bench_row(rec, twin, s, d)["median_us"]
                except KeyError:  # a row the run's time budget skipped
                    continue
                worst = max(worst, ratio - 1)
    return Rendered(pct(worst, 0), path)


def _split_gain(rec):
    """Points of the copy split NeoX pairs gain over partner shuffles, 16-bit, full rotary."""
    return [100 * (b - a) for a, b in zip(
        _fracs(rec, "fused_qknorm_rope:neox_shuffle", FULL_ROTARY, STORAGE_16),
        _fracs(rec, "fused_qknorm_rope:neox", FULL_ROTARY, STORAGE_16))]


@number("fused.split_gain_points")
def _():
    path, rec = _sweep()
    return Rendered(span(_split_gain(rec), lambda g: f"{g:.1f}", sep=" to ", unit=" points"), path)


@number("fused.shuffle_16bit_pct")
def _():
    path, rec = _sweep()
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope:neox_shuffle", FULL_ROTARY, STORAGE_16)), path)


@number("fused.split_16bit_sweep_pct")
def _():
    path, rec = _sweep()
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope:neox", FULL_ROTARY, STORAGE_16)), path)


@number("fused.zimage_one_token_pct")
def _():
    path, rec = _sweep()
    return Rendered(pct_span(_fracs(rec, SWEEP_VARIANT, ("zimage_1024",), STORAGE_16)), path)


@number("fused.zimage_token_rows_pct")
def _():
    path, rec = _sweep()
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope", ("zimage_1024",), STORAGE_16)), path)


@number("fused.partial_neox_folded_pct")
def _():
    """Partial-rotary NeoX, 16-bit, in the newest run (after the offset fold)."""
    path, rec = newest("bench_fused", "fused_qknorm_rope:neox")
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope:neox", ("qwen_image_partial",), STORAGE_16)), path)


@number("fused.partial_neox_before_pct")
def _():
    path, rec = _twin_run()
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope:neox", ("qwen_image_partial",), STORAGE_16)), path)


@number("fused.cache_pct")
def _():
    path, rec = newest("bench_fused", "fused_qknorm_rope:cache")
    rows = [r for r in rec["rows"] if r["variant"] == "fused_qknorm_rope:cache"]
    return Rendered(pct_span([r["frac_of_copy"] for r in rows]), path)


@number("fused.cache_over_sincos_pct")
def _():
    path, rec = newest("bench_fused", "fused_qknorm_rope:cache")
    ratios = []
    for r in rec["rows"]:
        if r["variant"] == "fused_qknorm_rope:cache":
            plain = bench_row(rec, "fused_qknorm_rope", r["shape"], r["dtype"])
            ratios.append(100 * (r["median_us"] / plain["median_us"] - 1))
    return Rendered(span(ratios, lambda v: f"{v:.0f}", unit="%"), path)


@number("history.bf16_before_pack_pct")
def _():
    """bfloat16 GPT-J in the first full run, before the one-instruction pack."""
    path, rec = _bench()
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope", FULL_ROTARY, ("bfloat16",))), path)


@number("history.bf16_after_pack_pct")
def _():
    path, rec = run_at("bench_fused", "20261201T075911")
    return Rendered(pct_span(_fracs(rec, "fused_qknorm_rope", FULL_ROTARY, ("bfloat16",))), path)


@number("fused.select_step_behind_twin_pct")
def _():
    """Before step 3 of the history (the 11:27 run): GPT-J 16-bit behind its twin."""
    path, rec = run_at("bench_fused", "20261201T112750")
    gaps = [100 * (bench_row(rec, "fused_qknorm_rope", s, d)["median_us"]
                   / bench_row(rec, "cuda_fused", s, d)["median_us"] - 1)
            for s in FULL_ROTARY for d in STORAGE_16]
    return Rendered(span(gaps, lambda v: f"{v:.0f}", unit="%"), path)


@number("history.fused_runs")
def _():
    """Every fused run, oldest first, after the first full bench run: a table in a code block."""
    first_path, first = newest("bench")
    fused = runs("bench_fused")
    table = fused_history_table([first] + [r for _, r in fused], FULL_ROTARY)
    return Rendered(f"\n```text\n{table}\n```\n", f"{first_path}; data/bench_fused/")


# ------------------------------------------------------------- launch and public path (07, README)

@number("public.host_before_us")
def _():
    return _public("host_us", "before")


@number("public.host_after_us")
def _():
    return _public("host_us", "after")


def _public(column, side, call=None, shape=None):
    path, rec = newest("public_path")
    rows = [r for r in rec["rows"] if r["side"] == side and r[column] is not None
            and (call is None or r["call"] == call) and (shape is None or r["shape"] == shape)]
    return Rendered(span([r[column] for r in rows], lambda v: f"{v:.0f}", sep=" to ", unit=" us"), path)


@number("public.rope_host_before_us")
def _():
    return _public("host_us", "before", "rope flat", "64x512")


@number("public.rope_host_after_us")
def _():
    return _public("host_us", "after", "rope flat", "64x512")


@number("public.fused_events_before_us")
def _():
    return _public("event_us", "before", "fused_qknorm_rope bf16", "4096xflux_1024")


@number("public.fused_events_after_us")
def _():
    return _public("event_us", "after", "fused_qknorm_rope bf16", "4096xflux_1024")


@number("public.pack4_events_before_us")
def _():
    return _public("event_us", "before", "rope pack4", BIG)


@number("public.pack4_events_after_us")
def _():
    return _public("event_us", "after", "rope pack4", BIG)


@number("public.flat_small_events_before_us")
def _():
    return _public("event_us", "before", "rope flat", "4096x512")


@number("public.flat_small_events_after_us")
def _():
    return _public("event_us", "after", "rope flat", "4096x512")


# ------------------------------------------------------------------ the seed's note (07)

SEED_NOTE = "the seed's note (its RTX 4090 table, quoted in ropelab/course/ledger.py)"
# The seed's other columns and its headline factor, as its note states them (its f32 column is
# ledger.SEED_TABLE, which notebook 07's computations use).
SEED_PACK4_MS = {"4096x512": 0.00602, "8192x1024": 0.01843}
SEED_TORCH_MS = {"4096x512": 0.843, "8192x1024": 2.525}
SEED_COMPLEX_FACTOR = 135


def _seed_ms(value: float) -> Rendered:
    return Rendered(f"{value:g} ms", SEED_NOTE)


for _shape in ("4096x512", "8192x1024"):
    number(f"seed.pack4_{_shape}_ms")(lambda s=_shape: _seed_ms(SEED_PACK4_MS[s]))
    number(f"seed.torch_{_shape}_ms")(lambda s=_shape: _seed_ms(SEED_TORCH_MS[s]))


@number("seed.complex_factor")
def _():
    return Rendered(f"{SEED_COMPLEX_FACTOR} times", SEED_NOTE)


@number("seed.f32_4096x512_ms")
def _():
    return _seed_ms(SEED_TABLE["4096x512"])


@number("seed.f32_8192x1024_ms")
def _():
    return _seed_ms(SEED_TABLE["8192x1024"])


@number("seed.dram_4090_gbps")
def _():
    return Rendered(f"{DRAM_4090_GBPS:,} GB/s", "the RTX 4090 data sheet (ropelab/course/ledger.py)")


# ---------------------------------------------------------------------------- rendering


def render(text: str) -> tuple[str, dict[str, str]]:
    """``text`` with every ``{{ key }}`` replaced, and ``{key: record}`` of what was used.

    An unknown key raises KeyError naming it (a typo must not reach a notebook).
    """
    used: dict[str, str] = {}

    def one(match):
        key = match.group(1)
        if key not in REGISTRY:
            raise KeyError(f"no number {key!r} in ropelab.course.numbers (known: "
                           f"{', '.join(sorted(REGISTRY))})")
        value = REGISTRY[key]()
        used[key] = value.record
        return value.text

    return PLACEHOLDER.sub(one, text), used


def render_readme(text: str) -> str:
    """The README with the text between every ``<!--n:KEY-->`` and ``<!--/n-->`` re-rendered."""
    def one(match):
        key = match.group(1)
        if key not in REGISTRY:
            raise KeyError(f"README marks an unknown number {key!r}")
        return f"<!--n:{key}-->{REGISTRY[key]().text}<!--/n-->"

    return README_MARK.sub(one, text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Render the course's measured numbers.")
    parser.add_argument("--readme", action="store_true",
                        help="rewrite the marked numbers of README.md and data/history/README.md")
    parser.add_argument("--check-readme", action="store_true",
                        help="exit 1 when a marked number disagrees with the records")
    args = parser.parse_args(argv)
    if args.readme or args.check_readme:
        stale = []
        for name in MARKED_FILES:
            path = ROOT / name
            text = path.read_text()
            fresh = render_readme(text)
            if fresh != text:
                stale.append(name)
                if not args.check_readme:
                    path.write_text(fresh)
            print(f"{name}: {len(README_MARK.findall(fresh))} marked numbers, "
                  + ("agree with the records" if fresh == text else
                     "disagreed" + ("" if args.check_readme else ", rewritten")))
        if args.check_readme and stale:
            print("run: python -m ropelab.course.numbers --readme")
            return 1
        return 0
    for key in sorted(REGISTRY):
        value = REGISTRY[key]()
        print(f"{key:<36} {value.text:<22} {value.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
