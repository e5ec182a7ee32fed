"""The barrier rule of the simulator's block scheduler (:mod:`ropelab.sim.block`).

``cuda.syncthreads()`` on a GPU is a barrier for the whole block: CUDA allows one in conditional
code only when the condition is the same for every thread of the block.  A barrier inside
``if idx < n:``, one in each arm of an if/else, or one that only thread 0 reaches may deadlock
there, or let threads read shared memory that is not written yet.  The simulator as shipped
releases a barrier once the threads *still running* have arrived, so all of these "work" on it.

:class:`Gate` is one block's barrier.  It releases only when every thread of the block waits at
the same barrier call (same source line, same bytecode offset, same kind), so each thread passes
each barrier the same number of times; otherwise the launch fails with
:class:`BarrierDivergence`, naming the threads that waited where, those that returned without
arriving, and the line.  ``syncthreads_count``/``_and``/``_or`` are the same barrier, and give
the count, and, or of the values the block's threads passed.
"""

from __future__ import annotations

import collections
import linecache
import sys
import threading
from dataclasses import dataclass

from . import fibers


class BarrierDivergence(RuntimeError):
    """Threads of one block did not all reach the same barrier: on a GPU, a deadlock or
    shared memory read before it is written.  The message names the threads and the line."""


@dataclass(frozen=True)
class _Site:
    """One barrier call in the kernel's source: what was called, and where."""

    kind: str  # "syncthreads", "syncthreads_count", ...
    filename: str
    function: str
    line: int
    offset: int  # the bytecode offset: two barriers on one line are two barriers

    def text(self) -> str:
        code = linecache.getline(self.filename, self.line).strip()
        shown = f" (`{code}`)" if code else ""
        return f"the cuda.{self.kind}() on line {self.line} of {self.function}{shown}"


# Frames of these modules are the simulator's and the shims' own: a barrier's site is the first
# frame outside them, the kernel (or device function) line that called it.
_SHIM_MODULES = ("numba.cuda.simulator", "ropelab.sim")


def _call_site(kind: str) -> _Site:
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_SHIM_MODULES):
        frame = frame.f_back
    if frame is None:
        return _Site(kind, "?", "?", 0, 0)
    code = frame.f_code
    return _Site(kind, code.co_filename, code.co_name, frame.f_lineno, frame.f_lasti)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class Gate:
    """The block's barrier state: threads still running, threads waiting (and where), how
    often each thread has passed each barrier, and who failed."""

    def __init__(self, threads: int, block_dim: tuple, block_idx: tuple):
        self.cond = threading.Condition()  # the launching thread waits on it for the block's end
        self.total = threads
        self.live = threads
        self.waiting = 0
        self.generation = 0
        self.failed = None  # (exception, traceback) of the first simulated thread that failed
        self.block_dim, self.block_idx = tuple(block_dim), tuple(block_idx)
        self.at: dict = {}  # thread id -> _Site, for the threads waiting now
        self.values: dict = {}  # thread id -> the value given to syncthreads_count/_and/_or
        self.passes: collections.Counter = collections.Counter()  # (thread id, site) -> arrivals
        self.returned: list = []  # thread ids that have ended without an exception
        self.result = None  # (count, and, or) of the last release's values

    def release(self) -> None:
        values = [bool(v) for v in self.values.values()]
        self.result = (sum(values), int(all(values)), int(any(values)))
        self.at.clear()
        self.values.clear()
        self.waiting = 0
        self.generation += 1

    def settle(self) -> None:
        """Every thread still running waits: release them, or fail
        the block when they do not all wait at one barrier or some thread returned instead."""
        if self.failed is not None:
            return
        problem = self.divergence()
        if problem is None:
            self.release()
            return
        self.failed = (BarrierDivergence(problem), None)  # the scheduler ends the block

    def threads_text(self, tids) -> str:
        """``tids`` as the verdicts name threads: runs of ids, or coordinates in a 2-D block."""
        tids = sorted(tids)
        if self.block_dim[1:] != (1, 1):  # a 2-D or 3-D block: coordinates, as threadIdx has
            bx, by, bz = self.block_dim
            shown = [f"({t % bx}, {t // bx % by}" + (")" if bz == 1 else f", {t // (bx * by)})")
                     for t in tids[:4]]
            more = f" and {len(tids) - 4} more" if len(tids) > 4 else ""
            return f"thread{'s' if len(tids) > 1 else ''} {', '.join(shown)}{more}"
        runs, start = [], tids[0]
        for prev, t in zip(tids, tids[1:] + [None]):
            if t != prev + 1:
                runs.append(str(start) if start == prev else f"{start}-{prev}")
                start = t
        shown = ", ".join(runs[:4]) + (", ..." if len(runs) > 4 else "")
        return f"thread{'s' if len(tids) > 1 else ''} {shown}"

    def divergence(self) -> str | None:
        """What is wrong with the barrier the waiting threads are at, or None."""
        groups: dict = {}
        for tid, site in self.at.items():
            groups.setdefault(site, []).append(tid)
        if len(groups) == 1 and not self.returned:
            return None
        where = f"block {self.block_idx[0] if self.block_idx[1:] == (0, 0) else self.block_idx}"
        ordered = sorted(groups.items(), key=lambda kv: min(kv[1]))
        rule = ("every thread of a block must reach every cuda.syncthreads() that any of them "
                "reaches (CUDA allows a barrier in conditional code only when the condition is "
                "the same for the whole block)")
        if len(ordered) == 1:
            site, waiting = ordered[0]
            times = self.passes[(waiting[0], site)]
            returned = self.returned
            passed = sorted({self.passes[(t, site)] for t in returned})
            verb = "waits" if len(waiting) == 1 else "wait"
            text = (f"barrier divergence: in {where}, {self.threads_text(waiting)} {verb} at "
                    f"{site.text()}, but {self.threads_text(returned)} returned without "
                    "reaching it")
            if passed != [0]:
                before = " or ".join(str(n) for n in passed)
                text += (f" (they passed it {before} time{'s' if passed[-1] != 1 else ''}; "
                         f"the others are there for the {_ordinal(times)} time)")
            return f"{text}: {rule}"
        parts = [f"{self.threads_text(tids)} at {site.text()}" for site, tids in ordered]
        if self.returned:
            parts.append(f"{self.threads_text(self.returned)} returned without reaching either")
        return (f"barrier divergence: in {where}, the threads wait at different barriers: "
                f"{'; '.join(parts)}: {rule}")


def _arrive(thread, kind: str, value=None):
    """Wait at a barrier until every thread of the block is there; see :meth:`Gate.settle`.
    Returns ``(count, and, or)`` of the values the block's threads gave.  The threads are
    greenlets of one OS thread (:mod:`ropelab.sim.fibers`): no lock is needed."""
    gate = thread._manager._ropelab_gate
    site = _call_site(kind)
    generation = gate.generation
    gate.at[thread.thread_id] = site
    gate.values[thread.thread_id] = value
    gate.passes[(thread.thread_id, site)] += 1
    gate.waiting += 1
    fibers.moved()
    if gate.waiting == gate.live:
        gate.settle()
    while generation == gate.generation:
        fibers.park()
    return gate.result


def syncthreads(self) -> None:
    """``BlockThread.syncthreads``: wait until every thread of the block has arrived here."""
    _arrive(self, "syncthreads")


def syncthreads_count(self, value) -> int:
    """``BlockThread.syncthreads_count``: a barrier that counts the threads giving non-zero."""
    return _arrive(self, "syncthreads_count", value)[0]


def syncthreads_and(self, value) -> int:
    return _arrive(self, "syncthreads_and", value)[1]


def syncthreads_or(self, value) -> int:
    return _arrive(self, "syncthreads_or", value)[2]
