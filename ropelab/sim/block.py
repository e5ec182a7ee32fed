"""A block scheduler for the Numba CUDA simulator: one pooled worker per block, no spinning.

The simulator as shipped runs every CUDA thread of a block as a new OS thread (a creation, two
context switches and an exit: about 80 us, more than a small kernel's body), and its
``BlockManager.run`` watches them in a busy loop that competes for the GIL with the kernel.

Here the manager sleeps on a condition variable while one pooled worker thread, kept between
blocks and launches, runs the block.  A block whose threads never wait for each other (no
barrier, shuffle or fence anywhere in its code: :mod:`ropelab.sim.concurrency`) runs its
threads one after the other; the others run them together as greenlets
(:mod:`ropelab.sim.fibers`), which hand the worker's OS thread to each other where they wait.
What a kernel sees is unchanged:

* ``cuda.threadIdx``/``blockIdx``, ``syncthreads_count``/``_and``/``_or`` and the warp and
  race-detector shims read the current thread, as before: the worker is a ``BlockThread`` whose
  per-thread fields are those of the simulated thread it runs at that moment;
* ``cuda.syncthreads()`` (and ``syncthreads_count``/``_and``/``_or``) releases the block when
  every thread of the block waits at the same barrier; the simulator as shipped releases it once
  the threads still running have arrived, which hides barriers that deadlock on a GPU.  The
  rule, and :class:`~ropelab.sim.barrier.BarrierDivergence` that names the threads that never
  arrived and the line, are :mod:`ropelab.sim.barrier`'s; threads that all wait for each other
  in shuffles fail the launch with :class:`~ropelab.sim.warp.WarpDivergenceError` at once;
* the first exception in any thread ends the block: the threads still waiting are ended where
  they wait, and the launch re-raises the exception with ``tid=[...] ctaid=[...]`` in its
  message, the simulator's wording; none of them runs on into the next launch;
* a process forked while the pool exists (the course grader forks) starts with an empty pool:
  its copies of the workers are not running threads.

``tests/test_sim_block.py`` checks that behaviour (not the speed).  :func:`install` is
idempotent and a no-op on a GPU.  If a numba-cuda release changes the simulator's classes so
that the names used here are missing, it installs nothing and returns ``False``: the simulator
then runs as shipped, slower but correct.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import sys
import threading

import numpy as np

from ..target import SIMULATED
from . import fibers
from .concurrency import needs_concurrency
from .barrier import (BarrierDivergence, Gate, syncthreads, syncthreads_and,  # noqa: F401
                      syncthreads_count, syncthreads_or)

_install_lock = threading.Lock()
_installed: bool | None = None
_idle: collections.deque = collections.deque()  # workers waiting for a simulated thread
_Worker = None  # the BlockThread subclass, made by install()
_profile = None  # a _BlockProfile while profiled_block() is active
_checker = None  # a trace function every block's threads run under (intwrap's shift check)


class ProfileBudget(RuntimeError):
    """A profiled block ran more source lines than its budget: it is stopped, and the lines
    counted until then stand."""


class _BlockProfile:
    """Source lines each simulated thread of one block ran (``lines[thread_id]``)."""

    def __init__(self, block_idx: tuple, budget: int, files=()):
        self.block_idx, self.budget = block_idx, int(budget)
        self.files = frozenset(files)
        self.counted: dict = {}  # code object -> whether its lines count
        self.lines: dict = {}
        self.total = 0
        self.stopped = False
        self.stopped_thread = None  # the thread running when the budget ran out

    def tracer(self, worker):
        """A trace function for ``worker``'s OS thread: lines go to the simulated thread the
        worker runs at that moment (its ``thread_id``), so one tracer serves a whole block."""
        lines, counted = self.lines, self.counted

        def local(frame, event, arg):
            if event == "line":
                thread_id = worker.thread_id
                lines[thread_id] = lines.get(thread_id, 0) + 1
                self.total += 1
                if self.total > self.budget:
                    self.stopped = True
                    self.stopped_thread = thread_id
                    raise ProfileBudget(f"more than {self.budget} lines")
            return local

        def start(frame, event, arg):
            if event != "call":
                return None
            code = frame.f_code
            keep = counted.get(code)
            if keep is None:
                keep = counted[code] = _counted(code, self.files)
            return local if keep else None
        return start


_ROPELAB = os.path.realpath(os.path.dirname(os.path.dirname(__file__))) + os.sep
_SIM = os.path.realpath(os.path.dirname(__file__)) + os.sep


def _counted(code, files: frozenset) -> bool:
    """Whether lines of ``code`` are the kernel's own work: code in the kernel's own file
    (``files``) or in ropelab's device functions, not the simulator's machinery (numba's fake
    arrays, ropelab.sim's barriers and shuffles, NumPy, threading), whose lines a thread also
    runs while it waits."""
    name = code.co_filename
    if name in files:
        return True
    if name.startswith("<"):
        return False  # frozen modules, generated dataclass methods
    path = os.path.realpath(name)
    return path.startswith(_ROPELAB) and not path.startswith(_SIM)


def _xyz(index) -> tuple:
    index = tuple(index)
    return index + (0,) * (3 - len(index))


@contextlib.contextmanager
def checking(trace):
    """Run every simulated thread of the blocks launched inside under ``trace`` (a
    ``sys.settrace`` function; a block profile, where one is active, takes its place)."""
    global _checker
    before, _checker = _checker, trace
    try:
        yield
    finally:
        _checker = before


@contextlib.contextmanager
def profiled_block(block_idx=(0, 0, 0), budget: int = 200_000, files=()):
    """While active, a launch runs only its block ``block_idx`` (the other blocks are skipped:
    the grid and every index the kernel reads are the launch's own) and counts the Python
    source lines each of its threads runs: how the work is spread over a block's threads,
    which a one-thread loop makes uneven.  ``files``: the kernel's source files (its lines
    count, with ropelab's device functions').  Yields the profile (``.lines``)."""
    global _profile
    if not install():
        raise RuntimeError("a block profile needs the simulator's pooled scheduler")
    _profile = _BlockProfile(_xyz(block_idx), budget, files)
    try:
        yield _profile
    finally:
        _profile = None


class _Lane:
    """One simulated thread as its warp-mates see it (:func:`ropelab.sim.warp.record_start`):
    its index, its exception, and whether it is still running."""

    __slots__ = ("thread_id", "exception", "running")

    def __init__(self, thread_id: int):
        self.thread_id, self.exception, self.running = thread_id, None, True

    def is_alive(self) -> bool:
        return self.running


def _failure(exc: Exception, thread_idx, block_idx):
    """The simulator's exception for a failed thread: ``tid=[x, y, z] ctaid=[x, y, z]: text``."""
    where = f"tid={list(thread_idx)} ctaid={list(block_idx)}"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001  (an exception whose __str__ raises: the block must end)
        return RuntimeError(f"{where}: {type(exc).__name__} (its message could not be read)")
    msg = f"{where}: {text}" if text else where
    try:
        return type(exc)(msg)
    except Exception:  # an exception type that wants other constructor arguments
        return RuntimeError(f"{type(exc).__name__}: {msg}")


def _make_worker_class(block_thread, dim3):
    from . import warp

    class Worker(block_thread):
        """A pooled simulator thread: runs the simulated CUDA threads of one block after
        another, or together as greenlets (:mod:`ropelab.sim.fibers`).  Its attributes outside
        ``_own`` belong to the simulated thread it runs at the moment."""

        def __init__(self):
            threading.Thread.__init__(self, name="ropelab-sim-thread", daemon=True)
            self._wake = threading.Event()
            self._job = None
            self._own = frozenset(self.__dict__) | {"_own"}
            self._assign_fields(None, (0, 0, 0), (0, 0, 0), dim3(1, 1, 1), False)

        def _assign_fields(self, manager, block_idx, thread_idx, block_dim, debug):
            self._manager = manager
            self.blockIdx = dim3(*block_idx)
            self.threadIdx = dim3(*thread_idx)
            self.thread_id = self.threadIdx.x + block_dim.x * (
                self.threadIdx.y + block_dim.y * self.threadIdx.z)
            self.exception = None
            self.debug = debug

        def _clear(self):
            for name in [n for n in self.__dict__ if n not in self._own]:
                del self.__dict__[name]  # e.g. the race detector's barrier counts

        def _begin(self, manager, block_idx, thread_idx, block_dim, debug):
            """This worker's fields for the next simulated thread, the last one's dropped."""
            self._clear()
            self._assign_fields(manager, block_idx, thread_idx, block_dim, debug)

        def _body(self, fn, args):
            """One simulated thread's run of the kernel."""
            if self.debug:
                with np.errstate(divide="raise"):
                    fn(*args)
            else:
                fn(*args)

        def assign_block(self, manager, fn, args, block_idx, points, block_dim, debug,
                         together: bool):
            work = self._simulate_together if together else self._simulate_block
            self._job = (work, (manager, fn, args, block_idx, points, block_dim, debug))
            self._wake.set()

        def run(self):
            while True:
                self._wake.wait()
                self._wake.clear()
                job, self._job = self._job, None
                if job is None:
                    continue
                work, args = job
                work(*args)

        @contextlib.contextmanager
        def _profiled(self):
            """Count the block's lines while a block profile is active (:func:`profiled_block`),
            else run them under the :func:`checking` trace function, if any."""
            trace = _checker if _profile is None else _profile.tracer(self)
            if trace is None:
                yield
                return
            sys.settrace(trace)
            try:
                yield
            finally:
                sys.settrace(None)

        def _end_block(self, gate, failed):
            self._clear()
            with gate.cond:
                _idle.append(self)  # free again; the next block may take it at once
                gate.live = 0
                gate.failed = failed
                gate.cond.notify_all()

        def _simulate_block(self, manager, fn, args, block_idx, points, block_dim, debug):
            """Every simulated thread of a block that never waits for another (see
            :mod:`.concurrency`), one after the other in this worker: a valid order of a
            block without barriers or warp exchanges, and one wake-up instead of one per
            thread."""
            failed = None
            with self._profiled():
                for point in points:
                    self._begin(manager, block_idx, point, block_dim, debug)
                    try:
                        self._body(fn, args)
                    except BaseException as exc:  # even SystemExit: the block must still end
                        # the first failure is the launch's; the others run on to their end,
                        # as they do beside a failed thread when they run at once
                        if failed is None:
                            failed = (_failure(exc, self.threadIdx, self.blockIdx),
                                      exc.__traceback__)
            self._end_block(manager._ropelab_gate, failed)

        def _simulate_together(self, manager, fn, args, block_idx, points, block_dim, debug):
            """The simulated threads of a block that meet at barriers or shuffles, as greenlets
            resumed in turn, in a fixed order, until every one has ended or one has failed;
            those still waiting then are ended where they wait (none runs on into the next
            launch)."""
            gate = manager._ropelab_gate
            own = self.__dict__
            waiting = collections.deque()
            for point in points:
                self._begin(manager, block_idx, point, block_dim, debug)
                lane = _Lane(self.thread_id)
                warp.record_start(manager, self.thread_id, lane)
                fiber = fibers.spawn(functools.partial(self._thread, gate, fn, args, lane))
                # its own attribute dict, the worker's entries shared: swapped in to resume it
                waiting.append((fiber, dict(own)))
            try:
                with self._profiled():
                    while waiting and gate.failed is None:
                        before = fibers.MOVES[0]
                        for _ in range(len(waiting)):
                            fiber, fields = waiting.popleft()
                            self.__dict__ = fields
                            fiber.switch()
                            if not fiber.dead:
                                waiting.append((fiber, fields))
                            if gate.failed is not None:
                                break
                        if gate.failed is None and waiting and fibers.MOVES[0] == before:
                            gate.failed = (warp.WarpDivergenceError(_stuck(gate, waiting)), None)
            finally:
                for fiber, fields in waiting:
                    self.__dict__ = fields
                    fiber.throw(fibers.Exit)
                self.__dict__ = own
            self._end_block(gate, gate.failed)

        def _thread(self, gate, fn, args, lane):
            """One simulated thread of a block run together, and its end's mark on the gate."""
            try:
                self._body(fn, args)
            except fibers.Exit:
                raise
            except BaseException as exc:  # even SystemExit: the block must still end
                self.exception = lane.exception = (
                    _failure(exc, self.threadIdx, self.blockIdx), exc.__traceback__)
            fibers.moved()
            lane.running = False
            gate.live -= 1
            if self.exception is None:
                gate.returned.append(self.thread_id)
            elif gate.failed is None:
                gate.failed = self.exception
            if gate.failed is None and gate.waiting and gate.waiting == gate.live:
                gate.settle()  # the others wait at a barrier this thread never reached

    return Worker


def _stuck(gate, waiting) -> str:
    tids = [fields["thread_id"] for _, fields in waiting]
    return (f"{gate.threads_text(tids)} of this block all wait, each for another: a lane waits "
            "in an emulated shuffle that not every lane of its warp reaches (divergent control "
            "flow, or a warp-mate waiting at a cuda.syncthreads() instead); on a GPU this hangs")


def _take_worker():
    try:
        return _idle.pop()
    except IndexError:
        worker = _Worker()
        worker.start()
        return worker


def _manager_run(self, grid_point, *args):
    """``BlockManager.run``: hand the block to a pooled worker, sleep until its threads have
    ended or one has failed."""
    from numba.cuda.simulator.kernelapi import Dim3

    profile = _profile
    if profile is not None and _xyz(grid_point) != profile.block_idx:
        return  # a profiled launch runs one block
    points = list(np.ndindex(*self._block_dim))
    # before any thread can reach a barrier
    gate = self._ropelab_gate = Gate(len(points), self._block_dim, grid_point)
    block_dim = Dim3(*self._block_dim)
    worker = _take_worker()
    worker.assign_block(self, self._f, args, grid_point, points, block_dim, self._debug,
                        together=needs_concurrency(self._f))
    with gate.cond:
        while gate.live:
            gate.cond.wait()
    if gate.failed is not None:
        raise gate.failed[0].with_traceback(gate.failed[1])


def _forget_pool_after_fork() -> None:
    _idle.clear()  # in a forked child the workers are copies of objects, not running threads


def install() -> bool:
    """Pool the simulator's threads and replace its polling block manager (idempotent;
    ``False`` on a GPU, or when this numba-cuda's simulator lacks the pieces replaced here)."""
    global _installed, _Worker
    if not SIMULATED:
        return False
    with _install_lock:
        if _installed is None:
            from numba.cuda.simulator import kernel, kernelapi

            manager = getattr(kernel, "BlockManager", None)
            thread = getattr(kernel, "BlockThread", None)
            dim3 = getattr(kernelapi, "Dim3", None)
            fits = (manager is not None and thread is not None and dim3 is not None
                    and hasattr(manager, "run")
                    and all(hasattr(thread, n) for n in ("run", "syncthreads",
                                                          "syncthreads_count")))
            if fits:
                _Worker = _make_worker_class(thread, dim3)
                thread.syncthreads = syncthreads
                thread.syncthreads_count = syncthreads_count
                thread.syncthreads_and = syncthreads_and
                thread.syncthreads_or = syncthreads_or
                manager.run = _manager_run
                if hasattr(os, "register_at_fork"):
                    os.register_at_fork(after_in_child=_forget_pool_after_fork)
            _installed = fits
        return _installed
