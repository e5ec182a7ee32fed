"""The one way a bench writes its record, and the one text that says how it timed.

* :func:`save` checks the rows against their kind's schema (:mod:`.kinds`) and writes them with
  :func:`ropelab.measure.records.save` (which refuses the simulator), under ``OUT/<kind>/`` when
  a data root ``out`` is given, else the checkout's ``data/<kind>/``;
* :class:`Recording`: one run's file, saved again as the run goes, so a time limit keeps what
  finished;
* :func:`run_meta`: the provenance of a run (GPU, versions, date) plus the timer's L2 and fill;
* :func:`method_text`: the timing protocol (:class:`~.timer.Timer`'s), then what the bench
  itself adds.
"""

from __future__ import annotations

from pathlib import Path

from .. import records
from .kinds import schema_of
from .stats import ENTRY_SECONDS, L2_FACTOR, MIN_REPEATS


def save(kind: str, rows: list[dict], *, method: str, meta: dict | None = None, out=None,
         replace=None) -> Path:
    """Write ``rows`` as a record of ``kind``; return its path.  ``out``: a data root (the
    record goes to ``out/<kind>/``); ``replace``: a path an earlier save of this run returned."""
    schema_of(kind).check(rows)
    directory = None if out is None else Path(out) / kind
    return records.save(kind, rows, method=method, meta=meta, directory=directory,
                        replace=replace)


class Recording:
    """One run's record of ``kind``: each :meth:`save` rewrites the same file with every row so
    far (the first creates it)."""

    def __init__(self, kind: str, *, method: str, meta: dict | None = None, out=None):
        self.kind, self.method, self.meta, self.out = kind, method, meta, out
        self.path: Path | None = None

    def save(self, rows: list[dict]) -> Path | None:
        if rows:
            self.path = save(self.kind, rows, method=self.method, meta=self.meta, out=self.out,
                             replace=self.path)
        return self.path


def run_meta(timer=None, **extra) -> dict:
    """:func:`ropelab.measure.records.metadata` of now (refused on the simulator), with the
    timer's L2 and fill sizes and ``extra`` (versions of the packages a bench compared with)."""
    meta = records.metadata()
    if timer is not None:
        meta.update(l2_bytes=timer.l2_bytes, flush_bytes=timer.flush_bytes)
    meta.update(extra)
    return meta


def timer_method(l2_bytes: int, flush: int, warmup: int, repeats: int) -> str:
    """How :meth:`~.timer.Timer.time` takes its samples, in the words of a record's method."""
    return (
        f"CUDA events on the default stream around each launch; before every timed launch a fill "
        f"kernel writes {flush / 2**20:.0f} MiB (>= {L2_FACTOR}x the {l2_bytes / 2**20:.0f} MiB "
        f"L2), which evicts the L2 (cold cache) and keeps the GPU busy while the host enqueues "
        f"the launch, so the events bracket GPU work only; {warmup} warm-up launches, then up to "
        f"{repeats} timed repeats (fewer for baselines slower than {ENTRY_SECONDS / repeats * 1e3:.0f} "
        f"ms a call, at least {MIN_REPEATS}); median and 20th/80th percentiles; bytes_moved is the "
        f"operation's minimum traffic (same for every row of a shape), GB/s = bytes_moved / "
        f"median (1 GB = 1e9 B); copy_gbps: a device-to-device copy of the same bytes timed the "
        f"same way in the same run (cuMemcpyDtoDAsync called on the driver directly); "
        f"frac_of_copy = gbps / copy_gbps; host_us: median wall time to enqueue the timed launch, "
        f"fill_us: GPU time of one fill; host_bound when host_us >= 0.8 * fill_us (the GPU may "
        f"have idled inside the events)"
    )


def method_text(timer=None, *notes: str, repeats: int | None = None) -> str:
    """A record's method: the timer's protocol (``timer``: anything with ``l2_bytes``,
    ``flush_bytes``, ``warmup`` and ``repeats``; None for a bench that does not use it), then
    each of ``notes``, joined by "; "."""
    parts = list(notes)
    if timer is not None:
        parts.insert(0, timer_method(timer.l2_bytes, timer.flush_bytes, timer.warmup,
                                     repeats or timer.repeats))
    return "; ".join(parts)
