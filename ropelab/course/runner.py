"""Grading a learner's function without letting it hang or crash the caller.

:func:`grade_safely` is what :func:`.steps.check` calls.  On the simulator it grades in a
forked child process: the child inherits the notebook's kernel objects and globals as they are
(nothing is shipped or re-imported, so a pass costs what it costs in-process), and the parent
waits at most ``timeout_s`` seconds for its verdict.  A kernel stuck in ``while True`` (the
simulator's threads ignore Jupyter's Interrupt) is ended with its whole process group, and the
caller's process, its kernel object and its notebook state are untouched.

Without ``os.fork`` (Windows) or on a GPU (a CUDA context does not survive a fork), grading
runs in this process and cannot be stopped; the verdict is the same otherwise.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import signal
import sys
import time
import warnings

from ..target import SIMULATED
from .grading import Verdict, grade

GRACE_S = 2.0  # after the limit: time to kill the child and say so


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


def _child(work, write_fd: int) -> None:
    """In the forked child: ``work()``, send its pickled result, never return."""
    code = 0
    try:
        os.setpgid(0, 0)  # the census compiler it may start dies with it on a timeout
        sys.stdout = sys.stderr = io.StringIO()  # the parent's streams may be Jupyter's
        payload = pickle.dumps(("ok", work()))
    except BaseException as exc:  # noqa: BLE001  (SystemExit from learner code included)
        payload = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
        code = 1
    try:
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)
    finally:
        os._exit(code)


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything written to ``fd`` until EOF, or None if the deadline passes first."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
            break
        except (ProcessLookupError, PermissionError, OSError):
            continue
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def in_child(work, timeout_s: float):
    """``work()`` in a forked child, at most ``timeout_s`` seconds.

    Returns ``("ok", result)``, ``("raised", "Type: message")``, ``("died", status)`` or
    ``("stopped", None)``.  The result must pickle.  Only where :func:`can_fork`.
    """
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # 3.12+: "process is multi-threaded, fork() may deadlock"
        warnings.simplefilter("ignore", DeprecationWarning)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(work, write_fd)
    os.close(write_fd)
    try:
        data = _read_until(read_fd, time.monotonic() + timeout_s)
    finally:
        os.close(read_fd)
    if data is None:
        _kill(pid)
        return "stopped", None
    _, status = os.waitpid(pid, 0)
    if not data:
        return "died", status
    return pickle.loads(data)  # noqa: S301  (our own child's bytes)


def can_fork() -> bool:
    return SIMULATED and hasattr(os, "fork")


def _graded_in_child(step, fn, timeout_s: float) -> Verdict:
    def work():
        verdict = _in_process(step, fn)
        verdict.timer = None  # a closure over the kernel: the parent makes its own
        return verdict

    how, result = in_child(work, timeout_s)
    if how == "ok":
        return result
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
