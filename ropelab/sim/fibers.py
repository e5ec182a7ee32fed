"""Simulated threads that wait for each other, as greenlets on one OS thread.

A block whose threads meet at a barrier or a warp shuffle needs them all in flight at once.  The
simulator as shipped makes each one an OS thread; every wait is then a condition variable and
every release wakes the whole block, each waiter taking the GIL in turn: about 60 us for each
thread's arrival at a barrier, 25 times the block's own work.  Here the threads of such a block
are greenlets (``greenlet``, the coroutines of gevent and SQLAlchemy) run by one pooled worker
(:mod:`ropelab.sim.block`): a thread that must wait gives the OS thread to the next one
(:func:`park`), with no system call and no lock.  One thread runs at a time, in thread order,
until it waits or ends: one valid schedule of the block, the same on every run.

The scheduler resumes each waiting thread in turn, and it re-checks what it waits for.  A round
in which every thread is waiting and nothing moved (:func:`moved` counts arrivals and ends) is
a deadlock; on a GPU it hangs, here it fails the launch at once.
"""

from __future__ import annotations

import greenlet

# Arrivals at a barrier or shuffle and thread ends, ever: a scheduler round that leaves it
# unchanged found every thread waiting for one that never comes.
MOVES = [0]


def moved() -> None:
    """Note that a simulated thread arrived somewhere or ended: the block is not stuck."""
    MOVES[0] += 1


def park() -> None:
    """Give the OS thread to the block's next simulated thread; return when the scheduler
    resumes this one (the caller then re-checks what it waits for)."""
    hub = greenlet.getcurrent().parent
    if hub is None:
        raise RuntimeError("a simulated thread waited for its block outside a block of "
                           "threads run together (a barrier or shuffle that ropelab.sim.block "
                           "did not see in the kernel's code: reach it by name, as cuda.X)")
    hub.switch()


def spawn(run) -> greenlet.greenlet:
    """A simulated thread that will call ``run()`` when first resumed, parked under the
    calling (scheduler) greenlet."""
    return greenlet.greenlet(run)


Exit = greenlet.GreenletExit  # thrown into the threads left waiting when a block fails
