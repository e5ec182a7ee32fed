"""The sweep: time every applicable (entry, shape) pair, the shape's copy first."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..entry import Entry
from .entries import Buffers, _applies
from .rows import Shape, make_row
from .stats import gbps, host_fields, quantiles, summarize
from .timer import Timer


@dataclass
class SweepResult:
    rows: list
    skipped: list  # (entry, shape, reason)
    meta: dict


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
    copy_rate: dict[Shape, float] = {}
    copy_samples: dict[Shape, list] = {}
    copy_host: dict[Shape, dict] = {}
    rows, skipped = [], []
    work = [(e, s) for e in entries for s in shapes if _applies(e, s)]
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
            copy_samples[shape] = timer.time(buffers[shape].copy)
            copy_host[shape] = host_fields(getattr(timer, "last_host_us", None),
                                           getattr(timer, "fill_us", None))
            copy_rate[shape] = gbps(shape.bytes_moved, quantiles(copy_samples[shape])[0])
        buf = buffers[shape]
        rate = copy_rate[shape]
        if entry.family == "copy":
            rows.append(make_row(entry.name, entry.family, shape, None,
                                 dict(summarize(copy_samples[shape], shape.bytes_moved, rate),
                                      **copy_host[shape])))
            continue
        try:
            launch = entry.make(buf)
        except Exception as exc:  # a baseline missing a feature must not stop the sweep
            skipped.append((entry.name, shape.label, f"{type(exc).__name__}: {exc}"))
            continue
        if launch is None:
            continue
        try:
            samples = timer.time(launch)
        except Exception as exc:
            skipped.append((entry.name, shape.label, f"{type(exc).__name__}: {exc}"))
            continue
        rows.append(make_row(entry.name, entry.family, shape, entry.fastmath,
                             dict(summarize(samples, shape.bytes_moved, rate),
                                  **host_fields(getattr(timer, "last_host_us", None),
                                                getattr(timer, "fill_us", None)))))
    bar.close()
    if on_group_done:
        on_group_done(rows)
    return SweepResult(rows, skipped, {})
