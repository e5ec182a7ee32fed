"""The PTX census of any kernel (a learner's included), as the exercise grader takes it.

The grader needs the counts of a kernel that exists only in a notebook cell.  The census
engine ships it to its compiler process as source (:mod:`ropelab.measure.census.shipped`: what
a job is, its key, the child's rebuild); this module is the course's side: which jobs, and
their cache.  Counts are :func:`~ropelab.measure.census.counting.count_ptx`'s plus the ones the
exercises grade on (:func:`~ropelab.measure.census.counting.count_extras`, and
:mod:`ropelab.measure.census.passes`' counts per pass, which a loop body the compiler duplicated
does not double).  The cache is :func:`ropelab.measure.census.engine.cached`: the committed
files ``data/census/exercises.json`` (the course's solutions and recorded attempts) and
``data/census/heldout.json`` (the held-out learners' kernels, :mod:`.heldout`), so CI, a fresh
clone and a course venv hit it, then the user cache; new results go to the user cache.
"""

from __future__ import annotations

from pathlib import Path

from ..measure.census import engine
from ..measure.census.counting import count_extras
from ..measure.census.engine import CensusError, python_function
from ..measure.census.shipped import (function_source, job_key, ship_kernel, ship_reference,
                                      useful_lines)
from ..measure.census.shipped import compile_in_child as _compile_in_child
from ..measure.census.shipped import ship_global as _ship_global  # noqa: F401  (its tests' name)

__all__ = ["DATA_FILE", "USED", "CensusError", "census", "count_extras", "function_source",
           "job_key", "python_function", "committed", "save_used", "ship_kernel", "ship_reference",
           "useful_lines"]

DATA_FILE = engine.DATA_DIR / "exercises.json"
HELDOUT_FILE = engine.DATA_DIR / "heldout.json"  # written by `exercises --heldout --save-census`
RULES = "ropelab.measure.census.counting: count_ptx + count_extras, fast-math, cc 9.0"
USED: dict[str, dict] = {}  # every entry this process looked up or computed (for save_used)


def census(tasks: list[tuple[dict, str]]) -> list[dict]:
    """The counts of each ``(job, signature)``, from the caches or compiled in one child.

    A row with an ``error`` (a kernel that does not compile) is returned, not raised, and not
    cached.  Raises :class:`CensusError` only when the child itself cannot run.
    """
    keys = [job_key(job, sig) for job, sig in tasks]
    # _compile_in_child is looked up when called: the tests replace it to prove a cache hit.
    found = engine.cached("learner", dict(zip(keys, tasks)),
                          lambda todo: _compile_in_child(todo), committed=(DATA_FILE, HELDOUT_FILE),
                          keep=lambda row: not row.get("error"))
    rows = [found[k] for k in keys]
    USED.update({k: r for k, r in zip(keys, rows) if not r.get("error")})
    return rows


def committed() -> dict:
    """The committed entries: the course's (``DATA_FILE``) and the held-out sets'."""
    return engine.committed_entries((DATA_FILE, HELDOUT_FILE))


def save_used(path: Path | None = None, *, leave_out: Path | None = None) -> Path:
    """Replace the committed cache with the entries used in this process (``python -m ropelab
    exercises --verify --save-census`` uses every one the notebooks and the check need), less
    those already in ``leave_out`` (the held-out file leaves out the course's)."""
    skip = engine.committed_entries(leave_out) if leave_out is not None else {}
    entries = {k: v for k, v in sorted(USED.items()) if k not in skip}
    return engine.write_json(path or DATA_FILE, {"rules": RULES, "entries": entries})
