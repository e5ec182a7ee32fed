"""Numbers of the fused backward (notebook 08, the README), from ``data/bench_backward/`` and the
Nsight Compute text report under ``data/profile/``."""

from __future__ import annotations

import re

from .. import resources
from .numbers_core import ROOT, Rendered, newest, newest_on, number, pct_span, span

SHAPES = ("flux_1024", "qwen_image_1024", "zimage_1024")


def _rows(entry: str, gpu: str | None = None):
    # bench_backward rows name their call in "entry", not "variant": the newest run is read
    # (``gpu="h100"``: the newest of data/bench_backward/h100/)
    path, rec = newest("bench_backward") if gpu is None else newest_on("bench_backward", gpu)
    rows = [r for r in rec["rows"] if r["entry"] == entry and r["shape"] in SHAPES]
    if not rows:
        raise LookupError(f"{path} has no {entry} rows")
    return path, rows


@number("backward.fwd_bwd_pct")
def backward_fwd_bwd_pct():
    path, rows = _rows("ropelab:fwd+bwd")
    return Rendered(pct_span([r["frac_of_copy"] for r in rows]), path)


@number("backward.bwd_pct")
def backward_bwd_pct():
    path, rows = _rows("ropelab:bwd")
    return Rendered(pct_span([r["frac_of_copy"] for r in rows]), path)


def _ratio_to_ropelab(entry: str, gpu: str | None = None) -> Rendered:
    path, theirs = _rows(entry, gpu)
    _, ours = _rows("ropelab:fwd+bwd", gpu)
    mine = {(r["shape"], r["layout"]): r["median_us"] for r in ours}
    ratios = [r["median_us"] / mine[(r["shape"], r["layout"])] for r in theirs
              if r["median_us"] is not None]
    return Rendered(span(ratios, lambda v: f"{v:.1f}", unit=" times"), path)


@number("backward.compile_ratio")
def backward_compile_ratio():
    return _ratio_to_ropelab("torch.compile:fwd+bwd")


@number("backward.liger_ratio")
def backward_liger_ratio():
    return _ratio_to_ropelab("liger:fwd+bwd")


def _differing(entry: str) -> Rendered:
    path, rows = _rows(entry)
    runs = re.match(r"(\d+) runs", rows[0]["note"]).group(1)
    most = max(r["runs_differing"] for r in rows)
    return Rendered(f"{most} of {runs}", path)


@number("backward.two_stage_differing")
def backward_two_stage_differing():
    return _differing("determinism:two_stage")


@number("backward.atomic_differing")
def backward_atomic_differing():
    return _differing("determinism:atomic")


def _ncu_backward(pattern: str) -> Rendered:
    """A metric of the backward kernels in the newest Nsight Compute text report (both layouts:
    their span)."""
    reports = sorted((resources.data_dir() / "profile").glob("ncu_fused_backward-*.txt"))
    if not reports:
        raise LookupError("no data/profile/ncu_fused_backward-*.txt")
    text = reports[-1].read_text()
    sections = text.split("  backward::")[1:]
    values = []
    for section in sections:
        section = section.split("  kernel::")[0]  # the backward kernel's own sections only
        values.append(float(re.search(pattern, section).group(1)))
    return Rendered(span(values, lambda v: f"{v:.0f}", unit="%"),
                    str(reports[-1].relative_to(ROOT)))


@number("backward.ncu_dram_pct")
def backward_ncu_dram_pct():
    return _ncu_backward(r"DRAM Throughput\s+%\s+([\d.]+)")


@number("backward.ncu_scoreboard_pct")
def backward_ncu_scoreboard_pct():
    return _ncu_backward(r"represents about ([\d.]+)% of the total average")


# The H100 run of 2026-12-07 (no H200 came): the first record of the corrected fwd+bwd row,
# which times the one-pass forward autograd runs, then the backward.

@number("h100.fwd_bwd_roof_pct")
def h100_fwd_bwd_roof_pct():
    path, rows = _rows("ropelab:fwd+bwd", "h100")
    return Rendered(pct_span([r["frac_of_copy"] for r in rows], 1), path)


@number("h100.fwd_bwd_vs_compile")
def h100_fwd_bwd_vs_compile():
    return _ratio_to_ropelab("torch.compile:fwd+bwd", "h100")


@number("h100.fwd_bwd_vs_liger")
def h100_fwd_bwd_vs_liger():
    return _ratio_to_ropelab("liger:fwd+bwd", "h100")
