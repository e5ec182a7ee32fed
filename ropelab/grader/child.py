"""Running work in a forked child process that can be stopped, and talking to it safely.

The simulator runs each CUDA thread as a Python thread that ignores SIGINT: a kernel stuck in
``while True`` cannot be interrupted in the process that launched it.  A forked child inherits
the caller's objects as they are (a notebook's kernels and globals, nothing shipped or
re-imported) and is killed with its process group when the time is up or the conversation
ends.  Its signals reach only itself and its process group (:mod:`.confine`): the learner's code
cannot interrupt, stop or kill the notebook.  Fork is used only on the simulator: a CUDA
context does not survive it.

Parent and child exchange frames (:data:`MAGIC`, a length, one :mod:`.wire` message) over two
pipes.  What the child sends may have been written by the learner's code, which runs there and
shares its file descriptors, so the parent decodes it with :mod:`.wire`'s closed format (never
pickle), refuses a frame longer than its limit before reading it, and ends the conversation on
anything else with :class:`ChildEnded` saying what happened: junk on the pipe, a child that
exited, was killed or closed the pipe before answering, or one that used up its time.  It stops
waiting when the child exits, not when the pipe closes (a grandchild may hold it open).
"""

from __future__ import annotations

import io
import os
import select
import signal
import struct
import sys
import time
import warnings

from ..target import SIMULATED
from . import wire
from .confine import confine, guard_parent, release_parent

MAGIC = b"RLG1"
_HEADER = struct.Struct("<4sQ")
POLL_S = 0.2  # how often a silent child is checked for having exited


class ChildEnded(Exception):
    """The child gave no (further) answer.  ``how``: "stopped" (its time was up), "exited"
    (it ended or closed the pipe; ``status`` is its wait status when known), "junk" (bytes
    that are not a frame) or "flood" (a frame over the limit)."""

    def __init__(self, how: str, detail: str, status: int | None = None):
        super().__init__(f"{how}: {detail}")
        self.how, self.detail, self.status = how, detail, status


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, len(payload)) + payload


def exit_text(status: int | None) -> str:
    """"exit status 3" / "killed by signal 9 (SIGKILL)" from a wait status."""
    if status is None:
        return "it closed its end of the pipe"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "?"
        return f"killed by signal {sig} ({name})"
    return f"exit status {os.WEXITSTATUS(status)}"


# --------------------------------------------------------------------------------------------
# The child's side
# --------------------------------------------------------------------------------------------

def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _child_main(serve, down: int, up: int) -> None:
    """In the forked child: ``serve(receive, send)``, then exit without returning."""
    try:
        os.setpgid(0, 0)  # a census compiler or a grandchild it starts dies with it
        confine()  # its signals reach only itself and its group, never the notebook
        sys.stdout = sys.stderr = io.StringIO()  # the parent's streams may be Jupyter's

        def receive():
            head = _read_exactly(down, _HEADER.size)
            if head is None:
                return None
            _, length = _HEADER.unpack(head)
            body = _read_exactly(down, length)
            return None if body is None else wire.decode(body, length)

        def send(value) -> None:
            _write_all(up, frame(wire.encode(value)))

        try:
            serve(receive, send)
        except BaseException as exc:  # noqa: BLE001  (the parent hears why, if it can)
            try:
                send(("crashed", f"{type(exc).__name__}: {exc}"[:2000]))
            except BaseException:  # noqa: BLE001
                pass
    except BaseException:  # noqa: BLE001
        pass
    finally:
        os._exit(0)


# --------------------------------------------------------------------------------------------
# The parent's side
# --------------------------------------------------------------------------------------------

def _kill(pid: int) -> None:
    """Kill the child's process group and the child itself (it may have left its group), then
    reap it."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


class Child:
    """A forked child running ``serve(receive, send)``, from the parent's side.

    ``timeout_s`` is the time the parent waits for the child in all (sending and receiving);
    ``limit`` the most bytes one message from the child may have.  Use as a context manager,
    or call :meth:`close`: the child and its process group are killed then.
    """

    def __init__(self, serve, *, timeout_s: float, limit: int):
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        try:
            with warnings.catch_warnings():  # 3.12+: "process is multi-threaded, fork() ..."
                warnings.simplefilter("ignore", DeprecationWarning)
                sys.stdout.flush()
                sys.stderr.flush()
                guard_parent()  # its memory out of the child's reach (confine.py)
                pid = os.fork()
        except BaseException:
            release_parent()
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            raise
        if pid == 0:
            os.close(down_w)
            os.close(up_r)
            _child_main(serve, down_r, up_w)
        os.close(down_r)
        os.close(up_w)
        try:
            os.setpgid(pid, pid)  # as the child does: whichever runs first, the group exists
        except OSError:
            pass
        os.set_blocking(down_w, False)  # a child that stops reading must not block the parent
        self.pid, self.down, self.up = pid, down_w, up_r
        self.left, self.limit = float(timeout_s), int(limit)
        self.buffer = bytearray()
        self.closed = False
        self.reaped = None  # the wait status, where it had to be reaped to be seen

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.reaped is None:  # a reaped pid may already be another process's
            _kill(self.pid)
        release_parent()
        for fd in (self.down, self.up):
            try:
                os.close(fd)
            except OSError:
                pass

    # -- time ----------------------------------------------------------------------------

    def _spend(self, since: float) -> float:
        """Charge the time since ``since``; the seconds left."""
        now = time.monotonic()
        self.left -= now - since
        return self.left

    def _status(self, wait_s: float = 0.0) -> int | None:
        """The child's wait status if it has exited (left unreaped, so that its process group
        cannot be reused before :meth:`close` kills it), else None."""
        end = time.monotonic() + wait_s
        while True:
            try:
                if hasattr(os, "waitid"):
                    info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                    if info is not None:
                        code = info.si_status
                        if info.si_code == os.CLD_EXITED:
                            return code << 8
                        return code  # killed or dumped: the signal number
                elif self.reaped is not None:
                    return self.reaped
                else:  # no waitid (macOS): reaped here, and remembered
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid:
                        self.reaped = status
                        return status
            except ChildProcessError:
                return None
            if time.monotonic() >= end:
                return None
            time.sleep(0.01)

    # -- talking ---------------------------------------------------------------------------

    def send(self, value) -> None:
        """Send ``value`` (a :mod:`.wire` value) to the child."""
        data = memoryview(frame(wire.encode(value)))
        start = time.monotonic()
        while data:
            left = self._spend(start)
            start = time.monotonic()
            if left <= 0:
                raise ChildEnded("stopped", "its time was up")
            _, ready, _ = select.select([], [self.down], [], min(left, POLL_S))
            if not ready:
                status = self._status()
                if status is not None:
                    raise ChildEnded("exited", exit_text(status), status)
                continue
            try:
                data = data[os.write(self.down, data):]
            except BlockingIOError:
                continue
            except OSError:  # EPIPE: the child is gone
                status = self._status(0.5)
                raise ChildEnded("exited", exit_text(status), status) from None
        self._spend(start)

    def _frame(self):
        """The next whole frame's payload out of the buffer, or None if it is not all here."""
        if len(self.buffer) < _HEADER.size:
            if self.buffer and not MAGIC.startswith(bytes(self.buffer[:4])):
                raise ChildEnded("junk", f"bytes that are not a frame: {bytes(self.buffer[:16])!r}")
            return None
        magic, length = _HEADER.unpack_from(self.buffer)
        if magic != MAGIC:
            raise ChildEnded("junk", f"bytes that are not a frame: {bytes(self.buffer[:16])!r}")
        if length > self.limit:
            raise ChildEnded("flood", f"a message of {length} bytes (the limit is {self.limit})")
        end = _HEADER.size + length
        if len(self.buffer) < end:
            return None
        payload = bytes(self.buffer[_HEADER.size:end])
        del self.buffer[:end]
        return payload

    def _drain(self) -> bool:
        """Read what is waiting without blocking; False at end of file."""
        while True:
            ready, _, _ = select.select([self.up], [], [], 0)
            if not ready:
                return True
            chunk = os.read(self.up, 1 << 16)
            if not chunk:
                return False
            self.buffer += chunk
            if len(self.buffer) > self.limit + _HEADER.size:
                return True

    def _decoded(self, payload: bytes):
        try:
            return wire.decode(payload, self.limit)
        except wire.WireError as exc:
            raise ChildEnded("junk", f"a message that does not decode: {exc}") from None

    def receive(self):
        """The child's next message, decoded; :class:`ChildEnded` if none comes."""
        start = time.monotonic()
        try:
            while True:
                payload = self._frame()
                if payload is not None:
                    return self._decoded(payload)
                left = self._spend(start)
                start = time.monotonic()
                if left <= 0:
                    raise ChildEnded("stopped", "its time was up")
                ready, _, _ = select.select([self.up], [], [], min(left, POLL_S))
                if ready:
                    chunk = os.read(self.up, 1 << 16)
                    if chunk:
                        self.buffer += chunk
                        continue
                    status = self._status(0.5)  # end of file: nothing more will come
                else:
                    status = self._status()
                    if status is None:
                        continue  # still running
                    self._drain()  # it may have written its answer just before exiting
                payload = self._frame()
                if payload is not None:
                    return self._decoded(payload)
                raise ChildEnded("exited", exit_text(status), status)
        finally:
            self._spend(start)


def in_child(work, timeout_s: float, limit: int = 64 << 20):
    """``work()`` in a forked child, at most ``timeout_s`` seconds; its result must be a
    :mod:`.wire` value.  Returns ``("ok", result)``, ``("raised", "Type: message")``, or
    ``(how, detail)`` for a :class:`ChildEnded` (``"stopped"``, ``"exited"``, ``"junk"``,
    ``"flood"``).  Only where :func:`can_fork`."""
    def serve(receive, send):
        try:
            result = ("ok", work())
        except BaseException as exc:  # noqa: BLE001  (SystemExit from learner code included)
            result = ("raised", f"{type(exc).__name__}: {exc}")
        send(result)

    with Child(serve, timeout_s=timeout_s, limit=limit) as child:
        try:
            reply = child.receive()
        except ChildEnded as end:
            return end.how, end.detail
    if isinstance(reply, tuple) and len(reply) == 2 and reply[0] in ("ok", "raised"):
        return reply
    if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "crashed":
        return "raised", reply[1]  # the result could not be sent (not a wire value)
    return "junk", f"an answer that is not one: {type(reply).__name__}"


def can_fork() -> bool:
    return SIMULATED and hasattr(os, "fork")
