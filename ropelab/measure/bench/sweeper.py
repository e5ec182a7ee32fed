"""The sweep: everything to time (:func:`plan`), every applicable (entry, shape) pair timed
against the shape's copy (:func:`sweep`), its rows (:func:`make_row`, kind ``bench``) and the
course's speed targets read off them (:func:`target_summary`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from .. import baselines as bl
from . import baselines as baseline_rows
from . import rope_rows
from .entries import Buffers, Entry, applies, copy_entry, fused_entries, variant_entries
from .kinds import BENCH
from .shapes import Shape
from .stats import gbps, host_fields, quantiles, summarize
from .timer import Timer


def plan(variants=None, baselines: bool = True, precise: bool = False) -> list[Entry]:
    """Everything to time, in run order (most important first).  ``variants`` picks rows by
    name (``--variant``); ``baselines`` adds the installed baselines' rows."""
    entries = [copy_entry()] + variant_entries(variants, precise) + fused_entries(variants)
    entries += rope_rows.entries(variants)
    if baselines:
        entries += baseline_rows.entries()
    return sorted(entries, key=lambda e: e.group)  # stable: keeps the order inside a group


def make_row(name: str, family: str, shape: Shape, fastmath, timing: dict) -> dict:
    """A sweep row: the entry, the shape's fields, and ``timing`` (:func:`.stats.summarize`'s
    columns, optionally with :func:`.stats.host_fields`')."""
    return BENCH.row({"variant": name, "family": family, **shape.fields(), "fastmath": fastmath,
                      **host_fields(None, None), **timing})


@dataclass
class SweepResult:
    rows: list
    skipped: list  # (entry, shape, reason)
    meta: dict


def _timed(timer, launch) -> tuple[list, dict]:
    samples = timer.time(launch)
    return samples, host_fields(getattr(timer, "last_host_us", None),
                                getattr(timer, "fill_us", None))


def sweep(shapes: list[Shape], entries: list[Entry], *, timer: Timer, budget_s: float | None = None,
          progress: bool = True, on_group_done=None) -> SweepResult:
    """Time every applicable (entry, shape); returns rows in the record's column order.

    The copy of each shape is timed first (its GB/s is every row's roof).  ``budget_s`` stops
    starting new entries once that many seconds have passed (skips are reported, not hidden).
    ``on_group_done(rows)`` runs after each group so partial results can be saved.
    """
    from tqdm import tqdm

    t0 = time.perf_counter()
    buffers: dict[Shape, Buffers] = {}
    copies: dict[Shape, tuple] = {}  # shape -> (samples, host fields, GB/s)
    rows, skipped = [], []
    work = [(e, s) for e in entries for s in shapes if applies(e, s)]
    bar = tqdm(total=len(work), desc="bench", unit="row", disable=not progress)
    group = None
    for entry, shape in work:
        if group is not None and entry.group != group and on_group_done:
            on_group_done(rows)
        group = entry.group
        bar.set_postfix_str(f"{entry.name} {shape.label}", refresh=False)
        bar.update(1)
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            skipped.append((entry.name, shape.label, "time budget spent"))
            continue
        if shape not in buffers:
            buffers[shape] = Buffers(shape)
            samples, host = _timed(timer, buffers[shape].copy)
            copies[shape] = samples, host, gbps(shape.bytes_moved, quantiles(samples)[0])
        copy_samples, copy_host, rate = copies[shape]
        if entry.family == "copy":
            samples, host, fastmath = copy_samples, copy_host, None
        else:
            try:  # a baseline missing a feature must not stop the sweep
                launch = entry.make(buffers[shape])
                if launch is None:
                    continue
                samples, host = _timed(timer, launch)
            except Exception as exc:
                skipped.append((entry.name, shape.label, f"{type(exc).__name__}: {exc}"))
                continue
            fastmath = entry.fastmath
        rows.append(make_row(entry.name, entry.family, shape, fastmath,
                             dict(summarize(samples, shape.bytes_moved, rate), **host)))
    bar.close()
    if on_group_done:
        on_group_done(rows)
    return SweepResult(rows, skipped, {})


def target_summary(rows: list[dict]) -> list[str]:
    """The course's speed targets, read off one record's rows (no judgement of pass/fail).

    Best plain-RoPE numba variant at >= 1 GB as a share of the copy; each numba variant over its
    CUDA C++ twin; the fused kernel's share of the copy on the production shapes.
    """
    out = []
    big = [r for r in rows if r["family"] == "numba" and r["bytes_moved"] >= 1e9
           and r["frac_of_copy"] is not None]
    for label in dict.fromkeys(r["shape"] for r in big):
        best = max((r for r in big if r["shape"] == label), key=lambda r: r["frac_of_copy"])
        out.append(f"best plain RoPE at {label}: {best['variant']} {100 * best['frac_of_copy']:.1f}% "
                   f"of copy (target >= 95%)")
    med = {(r["variant"], r["shape"], r["dtype"]): r["median_us"] for r in rows}
    for numba_name, cpp_name in bl.TWINS.items():
        ratios = [(r["shape"], r["median_us"] / med[(cpp_name, r["shape"], r["dtype"])])
                  for r in rows if r["variant"] == numba_name
                  and (cpp_name, r["shape"], r["dtype"]) in med]
        if ratios:
            worst = max(ratios, key=lambda t: t[1])
            out.append(f"{numba_name} / {cpp_name}: worst time ratio {worst[1]:.3f} at {worst[0]} "
                       f"(target <= 1.10)")
    for r in rows:
        if r["family"] == "numba_fused" and r["frac_of_copy"] is not None:
            out.append(f"{r['variant']} {r['shape']} {r['dtype']}: {100 * r['frac_of_copy']:.1f}% "
                       f"of copy (target >= 80% on flux_1024, qwen_image_1024)")
    return out
