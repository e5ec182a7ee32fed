"""Running a piece of work in a forked child process that can be stopped.

The simulator runs each CUDA thread as a Python thread that ignores SIGINT: a kernel stuck in
``while True`` cannot be interrupted in the process that launched it.  A forked child inherits
the caller's objects as they are (a notebook's kernels and globals, nothing shipped or
re-imported), sends back a pickled result through a pipe, and is killed with its process group
when the time is up.  Fork is used only on the simulator: a CUDA context does not survive it.
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
    except BaseException:  # Jupyter's Interrupt lands here: the child must not outlive it
        _kill(pid)
        raise
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
