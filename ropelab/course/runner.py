"""Grading a learner's function without letting it hang or crash the caller.

:func:`grade_safely` is what :func:`.steps.check` calls.  On the simulator it grades in a
forked child process: the child inherits the notebook's kernel objects and globals as they are
(nothing is shipped or re-imported, so a pass costs what it costs in-process), and the parent
waits at most ``timeout_s`` seconds for its verdict.  A kernel stuck in ``while True`` (the
simulator's threads ignore Jupyter's Interrupt) is ended with its whole process group, and the
caller's process, its kernel object and its notebook state are untouched.

Without ``os.fork`` (Windows) or on a GPU (a CUDA context does not survive a fork), grading
runs in this process and cannot be stopped; the verdict is the same otherwise.  The fork
machinery is :mod:`.child`.
"""

from __future__ import annotations

from . import kernel_census
from .child import can_fork, in_child
from .grading import Verdict, grade


def stopped(step_id: str, timeout_s: float) -> Verdict:
    return Verdict(step_id, "stopped", [
        f"stopped after {timeout_s:g} s: does a loop never end? (the limit is check(..., "
        "timeout_s=...); the simulator runs about 13,000 simple threads a second)",
        "hint: a while loop whose condition never turns false, or a counter that is never "
        "stepped, keeps its thread running for ever"])


def _in_process(step, fn) -> Verdict:
    try:
        return grade(step, fn)
    except Exception as exc:  # noqa: BLE001  (a verdict, never an exception)
        return Verdict(step.id, "error", [f"error: the grader could not grade {fn!r}: "
                                          f"{type(exc).__name__}: {exc}"])


def _graded_in_child(step, fn, timeout_s: float) -> Verdict:
    def work():
        verdict = _in_process(step, fn)
        verdict.timer = None  # a closure over the kernel: the parent makes its own
        return verdict, kernel_census.USED  # the census rows it used, for --save-census

    how, result = in_child(work, timeout_s)
    if how == "ok":
        verdict, used = result
        kernel_census.USED.update(used)
        return verdict
    if how == "stopped":
        return stopped(step.id, timeout_s)
    if how == "raised":
        return Verdict(step.id, "error", [f"error: grading stopped with {result}"])
    return Verdict(step.id, "error", [f"error: the grading process died (status {result}) "
                                      "before giving a verdict"])


def grade_safely(step, fn, *, timeout_s: float = 30.0) -> Verdict:
    """:func:`.grading.grade` of ``fn`` against ``step``; never raises, never hangs on the
    simulator (see the module docstring)."""
    if not can_fork():
        verdict = _in_process(step, fn)
        verdict.subject = (step, fn)
        return verdict
    try:
        verdict = _graded_in_child(step, fn, float(timeout_s))
    except OSError as exc:  # no fork possible (resources): grade here, unstoppable
        verdict = _in_process(step, fn)
        verdict.lines.append(f"(graded in this process: {exc})")
    if verdict.passed:
        from .grading import _timer
        verdict.timer = _timer(step, fn)
    verdict.subject = (step, fn)
    return verdict
