"""The registry behind :mod:`ropelab.lessons.numbers`: how an entry is declared, how it finds
its record under ``data/``, and how the prose writes each kind of number.

The entries themselves live in :mod:`.numbers_plain` (the plain RoPE kernels, the public call,
the seed's note) and :mod:`.numbers_fused` (the fused kernel and its history).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..measure import records
from ..shapes import BIG_LABEL, SEED_LABELS
from .tables import bench_row

ROOT = records.DATA_DIR.parent


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


def newest_on(kind: str, gpu: str) -> tuple[str, dict]:
    """The newest run of ``kind`` recorded on another GPU than the H200
    (``data/<kind>/<gpu>/``, e.g. ``gpu="h100"``)."""
    return runs(kind, f"{kind}/{gpu}")[-1]


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
BIG = BIG_LABEL  # the 1 GB shape, where launch and ramp-up costs vanish
SEED_SHAPES = SEED_LABELS
FULL_ROTARY = ("flux_1024", "qwen_image_1024", "zimage_1024")  # heads rotated in full
STORAGE_16 = ("bfloat16", "float16")


def fracs_of_copy(rec, variant, shapes, dtypes):
    return [bench_row(rec, variant, s, d)["frac_of_copy"] for s in shapes for d in dtypes]

