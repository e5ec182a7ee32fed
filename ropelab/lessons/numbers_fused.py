"""Numbers the prose quotes about the fused QK-norm + RoPE kernel (notebook 06, the README,
``data/history/README.md``), each read from its run under ``data/bench_fused/`` (or the first
full run under ``data/bench/``); see :mod:`ropelab.lessons.numbers`."""

from __future__ import annotations

from .numbers_core import (FULL_ROTARY, STORAGE_16, Rendered, fracs_of_copy, newest, number, pct,
                           pct_span, run_at, runs, span)
from .tables import bench_row, fused_history_table

# -------------------------------------------------------------- fused kernel (notebook 06)

SWEEP_VARIANT = "fused_qknorm_rope:1token_blocks"  # the sweep: the run that timed every setting
TWIN_VARIANT = "cuda_fused"  # the newest run beside the C++ twin


def _sweep():
    return newest("bench_fused", SWEEP_VARIANT)


@number("fused.one_head_16bit_pct")
def fused_one_head_16bit_pct():
    """16-bit storage with one head per warp (the mapping 06 starts with), production shapes."""
    path, rec = _sweep()
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    return Rendered(pct_span(fracs_of_copy(rec, "fused_qknorm_rope_1head", shapes, STORAGE_16)), path)


@number("fused.one_head_f32_pct")
def fused_one_head_f32_pct():
    path, rec = _sweep()
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    return Rendered(pct_span(fracs_of_copy(rec, "fused_qknorm_rope_1head", shapes, ("float32",))), path)


@number("fused.two_heads_gain_points")
def fused_two_heads_gain_points():
    """Points of the copy that half a warp per head adds to 16-bit storage, per shape."""
    path, rec = _sweep()
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    gains = [100 * (b - a) for a, b in zip(fracs_of_copy(rec, "fused_qknorm_rope_1head", shapes, STORAGE_16),
                                           fracs_of_copy(rec, "fused_qknorm_rope_2heads", shapes, STORAGE_16))]
    return Rendered(span(gains, lambda g: f"{g:.0f}", sep=" to ", unit=" points"), path)


@number("fused.f32_one_head_lead_pct")
def fused_f32_one_head_lead_pct():
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
def fused_f32_one_head_wins():
    path, rec = _sweep()
    wins = 0
    shapes = FULL_ROTARY + ("qwen_image_partial",)
    for shape in shapes:
        t = {v: bench_row(rec, v, shape, "float32")["median_us"] for v in
             ("fused_qknorm_rope_1head", "fused_qknorm_rope_2heads", "fused_qknorm_rope_4heads")}
        wins += min(t, key=t.get) == "fused_qknorm_rope_1head"
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    return Rendered(f"{words.get(wins, wins)} of the {words[len(shapes)]}", path)


def _copy_pct(run, variant: str, shapes=FULL_ROTARY, storages=STORAGE_16) -> Rendered:
    """The span of ``variant``'s shares of the copy in the newest record ``run()`` finds."""
    path, rec = run()
    return Rendered(pct_span(fracs_of_copy(rec, variant, shapes, storages)), path)


def _twin_run():
    return newest("bench_fused", TWIN_VARIANT)


@number("fused.gptj_16bit_pct")
def fused_gptj_16bit_pct():
    return _copy_pct(_twin_run, "fused_qknorm_rope")


@number("fused.neox_16bit_pct")
def fused_neox_16bit_pct():
    """NeoX in 16-bit storage on the fully rotated shapes (split pairs), beside the twin."""
    return _copy_pct(_twin_run, "fused_qknorm_rope:neox")


@number("fused.f32_pct")
def fused_f32_pct():
    path, rec = _twin_run()
    fr = (fracs_of_copy(rec, "fused_qknorm_rope", FULL_ROTARY, ("float32",))
          + fracs_of_copy(rec, "fused_qknorm_rope:neox", FULL_ROTARY, ("float32",)))
    return Rendered(pct_span(fr), path)


@number("fused.vs_twin_pct")
def fused_vs_twin_pct():
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
        fracs_of_copy(rec, "fused_qknorm_rope:neox_shuffle", FULL_ROTARY, STORAGE_16),
        fracs_of_copy(rec, "fused_qknorm_rope:neox", FULL_ROTARY, STORAGE_16))]


@number("fused.split_gain_points")
def fused_split_gain_points():
    path, rec = _sweep()
    return Rendered(span(_split_gain(rec), lambda g: f"{g:.1f}", sep=" to ", unit=" points"), path)


@number("fused.shuffle_16bit_pct")
def fused_shuffle_16bit_pct():
    return _copy_pct(_sweep, "fused_qknorm_rope:neox_shuffle")


@number("fused.split_16bit_sweep_pct")
def fused_split_16bit_sweep_pct():
    return _copy_pct(_sweep, "fused_qknorm_rope:neox")


@number("fused.zimage_one_token_pct")
def fused_zimage_one_token_pct():
    return _copy_pct(_sweep, SWEEP_VARIANT, ("zimage_1024",))


@number("fused.zimage_token_rows_pct")
def fused_zimage_token_rows_pct():
    path, rec = _sweep()
    return Rendered(pct_span(fracs_of_copy(rec, "fused_qknorm_rope", ("zimage_1024",), STORAGE_16)), path)


@number("fused.partial_neox_folded_pct")
def fused_partial_neox_folded_pct():
    """Partial-rotary NeoX, 16-bit, in the newest run (after the offset fold)."""
    path, rec = newest("bench_fused", "fused_qknorm_rope:neox")
    return Rendered(pct_span(fracs_of_copy(rec, "fused_qknorm_rope:neox", ("qwen_image_partial",), STORAGE_16)), path)


@number("fused.partial_neox_before_pct")
def fused_partial_neox_before_pct():
    path, rec = _twin_run()
    return Rendered(pct_span(fracs_of_copy(rec, "fused_qknorm_rope:neox", ("qwen_image_partial",), STORAGE_16)), path)


@number("fused.cache_pct")
def fused_cache_pct():
    path, rec = newest("bench_fused", "fused_qknorm_rope:cache")
    rows = [r for r in rec["rows"] if r["variant"] == "fused_qknorm_rope:cache"]
    return Rendered(pct_span([r["frac_of_copy"] for r in rows]), path)


@number("fused.cache_over_sincos_pct")
def fused_cache_over_sincos_pct():
    path, rec = newest("bench_fused", "fused_qknorm_rope:cache")
    ratios = []
    for r in rec["rows"]:
        if r["variant"] == "fused_qknorm_rope:cache":
            plain = bench_row(rec, "fused_qknorm_rope", r["shape"], r["dtype"])
            ratios.append(100 * (r["median_us"] / plain["median_us"] - 1))
    return Rendered(span(ratios, lambda v: f"{v:.0f}", unit="%"), path)


@number("history.bf16_before_pack_pct")
def history_bf16_before_pack_pct():
    """bfloat16 GPT-J in the first full run, before the one-instruction pack."""
    path, rec = newest("bench")
    return Rendered(pct_span(fracs_of_copy(rec, "fused_qknorm_rope", FULL_ROTARY, ("bfloat16",))), path)


@number("history.bf16_after_pack_pct")
def history_bf16_after_pack_pct():
    path, rec = run_at("bench_fused", "20261201T075911")
    return Rendered(pct_span(fracs_of_copy(rec, "fused_qknorm_rope", FULL_ROTARY, ("bfloat16",))), path)


@number("fused.select_step_behind_twin_pct")
def fused_select_step_behind_twin_pct():
    """Before step 3 of the history (the 11:27 run): GPT-J 16-bit behind its twin."""
    path, rec = run_at("bench_fused", "20261201T112750")
    gaps = [100 * (bench_row(rec, "fused_qknorm_rope", s, d)["median_us"]
                   / bench_row(rec, "cuda_fused", s, d)["median_us"] - 1)
            for s in FULL_ROTARY for d in STORAGE_16]
    return Rendered(span(gaps, lambda v: f"{v:.0f}", unit="%"), path)


@number("history.fused_runs")
def history_fused_runs():
    """Every fused run, oldest first, after the first full bench run: a table in a code block."""
    first_path, first = newest("bench")
    fused = runs("bench_fused")
    table = fused_history_table([first] + [r for _, r in fused], FULL_ROTARY)
    return Rendered(f"\n```text\n{table}\n```\n", f"{first_path}; data/bench_fused/")


