"""A block scheduler for the Numba CUDA simulator that waits instead of spinning.

The simulator runs every CUDA thread of a block as a Python thread.  Its ``BlockManager.run``
then watches them in a busy loop: on every pass it walks all live threads, rebuilds two sets,
and starts again, until every thread has ended.  That loop holds the GIL about as often as the
kernel's own threads do, so a simulated block runs at roughly half speed and the operating
system spends its time handing the GIL back and forth (in ropelab's test suite, about a quarter
of the CPU time was system time).

This module replaces the loop with a condition variable; what a kernel sees is unchanged:

* ``cuda.syncthreads()`` releases the block when every thread still running has arrived (a
  thread that has returned no longer counts, exactly as in the simulator's loop);
* ``syncthreads_count``/``_and``/``_or`` are the simulator's own, built on that barrier;
* the first exception in any thread sets every thread's ``abort`` flag, wakes the waiting ones
  (they raise "abort flag set", as before) and is re-raised by the launch with its thread and
  block in the message.

The manager sleeps until the last thread ends or one fails, so the kernel's threads get the
interpreter to themselves: on a 2-core CPU, simulated launches of ropelab's backward kernel ran
about four times faster.  ``tests/test_sim_block.py`` checks the behaviour, not the speed.

:func:`install` is idempotent and a no-op on a GPU.  If a numba-cuda release changes the
simulator's classes so that the names used here are missing, it installs nothing and returns
``False``: the simulator then runs as shipped, slower but correct.
"""

from __future__ import annotations

import threading

import numpy as np

from ..target import SIMULATED

_install_lock = threading.Lock()
_installed: bool | None = None


class _Gate:
    """The block's barrier state: threads still running, threads waiting, and who failed."""

    def __init__(self, threads: int):
        self.cond = threading.Condition()
        self.live = threads
        self.waiting = 0
        self.generation = 0
        self.failed = None  # the first BlockThread that ended with an exception

    def release(self) -> None:  # call with self.cond held
        self.waiting = 0
        self.generation += 1
        self.cond.notify_all()


def _syncthreads(self) -> None:
    """``BlockThread.syncthreads``: wait until every live thread of the block has arrived."""
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads call")
    gate = self._manager._ropelab_gate
    with gate.cond:
        generation = gate.generation
        gate.waiting += 1
        if gate.waiting == gate.live:
            gate.release()
        else:
            while generation == gate.generation and not self.abort:
                gate.cond.wait()
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads clear")


def _wrap_thread_run(original):
    def run(self):
        try:
            original(self)  # the simulator's run stores an exception on self.exception
        finally:
            gate = self._manager._ropelab_gate
            with gate.cond:
                gate.live -= 1
                if self.exception is not None and gate.failed is None:
                    gate.failed = self
                    gate.cond.notify_all()
                elif gate.live == 0:
                    gate.cond.notify_all()
                elif gate.waiting and gate.waiting == gate.live:
                    gate.release()  # the last thread not yet at the barrier has returned

    run._ropelab_block = True
    return run


def _manager_run(self, grid_point, *args):
    """``BlockManager.run``: start the block's threads, sleep until they end or one fails."""
    from numba.cuda.simulator.kernel import BlockThread

    points = list(np.ndindex(*self._block_dim))
    gate = self._ropelab_gate = _Gate(len(points))  # before any thread can reach a barrier

    def target():
        self._f(*args)

    threads = [BlockThread(target, self, grid_point, point, self._debug) for point in points]
    for t in threads:
        t.start()
    with gate.cond:
        while gate.live and gate.failed is None:
            gate.cond.wait()
        failed = gate.failed
        if failed is not None:
            # As the simulator does: stop the others (those in a barrier wake and raise), and do
            # not join them, so a debugger still sees where they are.
            for t in threads:
                t.abort = True
            gate.cond.notify_all()
    if failed is not None:
        raise failed.exception[0].with_traceback(failed.exception[1])


def install() -> bool:
    """Replace the simulator's polling block manager (idempotent; ``False`` on a GPU, or when
    this numba-cuda's simulator lacks the pieces replaced here)."""
    global _installed
    if not SIMULATED:
        return False
    with _install_lock:
        if _installed is None:
            from numba.cuda.simulator import kernel

            manager, thread = getattr(kernel, "BlockManager", None), getattr(kernel, "BlockThread", None)
            fits = (manager is not None and thread is not None
                    and all(hasattr(manager, n) for n in ("__init__", "run"))
                    and all(hasattr(thread, n) for n in ("run", "syncthreads")))
            if fits:
                thread.syncthreads = _syncthreads
                if not getattr(thread.run, "_ropelab_block", False):
                    thread.run = _wrap_thread_run(thread.run)
                manager.run = _manager_run
            _installed = fits
        return _installed
