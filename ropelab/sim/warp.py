"""Warp shuffles for the Numba CUDA simulator, which has none.

On a GPU, ``cuda.shfl_xor_sync`` and friends are single instructions (``shfl.sync.*``) and this
module does nothing.  The simulator runs every CUDA thread of a block as a Python thread and its
``FakeCUDAModule`` has no warp functions, so a kernel that shuffles fails with
``'FakeCUDAModule' object has no attribute 'shfl_xor_sync'``.  :func:`install` adds them.

How one emulated shuffle works, for the 32 (or fewer, in a partial last warp) lanes of a warp:

1. every lane writes the value it offers into the warp's mailbox slot ``lane``;
2. the lanes wait for each other (a barrier per warp);
3. every lane reads the slot of the lane it asked for;
4. the lanes wait again, so that nobody overwrites a slot before everybody has read it.

What it assumes, as real code must anyway: shuffles are called by every lane of the warp
(warp-uniform control flow) with a mask naming all of them.  A partial mask raises
``NotImplementedError`` instead of silently doing something the hardware would not.

The barrier is the warp's own count of arrivals, not ``threading.Barrier``: the lanes are
greenlets of one OS thread (:mod:`ropelab.sim.fibers`), and a waiting lane re-checks, each time
the scheduler resumes it, whether a warp-mate has ended without arriving (an ``IndexError`` from
an out-of-bounds access, say, or an early return): that ends the wait with an error, not a
hang.  :func:`install` makes every simulator thread record itself when it starts, for that.
"""

from __future__ import annotations

import threading

from ..target import SIMULATED
from . import fibers

from ..cuda_limits import FULL_MASK, WARP  # noqa: E402
_NAMES = ("shfl_sync", "shfl_xor_sync", "shfl_up_sync", "shfl_down_sync", "syncwarp")
_install_lock = threading.Lock()
_installed: tuple[str, ...] | None = None


class WarpDivergenceError(RuntimeError):
    """Lanes of one warp did not all reach the same emulated shuffle."""


class _WarpBarrier:
    """A reusable barrier for ``parties`` lanes that fails when a lane can never arrive."""

    def __init__(self, parties: int):
        self.parties = parties
        self._arrived = 0
        self._generation = 0

    def wait(self, mates=None) -> None:
        """Return once all parties have arrived.  ``mates()`` lists the warp's started threads."""
        generation = self._generation
        self._arrived += 1
        fibers.moved()
        if self._arrived == self.parties:
            self._arrived = 0
            self._generation += 1
            return
        while generation == self._generation:
            fibers.park()
            gone = [t for t in (mates() if mates else ()) if not t.is_alive()]
            if gone and generation == self._generation:
                _raise_for_dead_mates(gone)


def _raise_for_dead_mates(gone) -> None:
    """A warp-mate ended without arriving: re-raise its error here, or report divergence.

    The simulator reports whichever thread's exception it finds first, so every waiting lane
    raises an exception of the failed lane's type: the root cause (an ``IndexError``, say) is
    what the caller sees, whichever lane it comes from.
    """
    lanes = sorted(t.thread_id % WARP for t in gone)
    for t in gone:
        failure = getattr(t, "exception", None)
        if failure and not isinstance(failure[0], WarpDivergenceError):
            err = failure[0]
            msg = f"{err} (lane {t.thread_id % WARP} failed; its warp-mates stopped waiting for it)"
            try:
                raise type(err)(msg)
            except TypeError:  # an exception type that wants other constructor arguments
                raise RuntimeError(msg) from None
    raise WarpDivergenceError(
        f"lane(s) {lanes} of this warp ended (an early return?) without reaching the shuffle the "
        "other lanes wait in"
    )


class _Warp:
    """Mailbox and barrier shared by the lanes of one warp of one simulated block."""

    def __init__(self, lanes: int, manager, warp_id: int):
        self.lanes = lanes
        self.slots = [None] * lanes
        self.barrier = _WarpBarrier(lanes)
        self._manager = manager
        self._tids = range(warp_id * WARP, warp_id * WARP + lanes)

    def mates(self):
        """The threads of this warp that have started (recorded by the patched ``run``)."""
        started = self._manager.__dict__.get("_ropelab_threads", {})
        return [started[t] for t in self._tids if t in started]

    def wait(self):
        self.barrier.wait(self.mates)


_registry_lock = threading.Lock()


def _lane_and_warp() -> tuple[int, _Warp]:
    """The calling simulator thread's lane and its warp's shared state."""
    me = threading.current_thread()
    manager = getattr(me, "_manager", None)
    if manager is None:
        raise RuntimeError("warp functions can only be called from inside a simulated kernel")
    tid = me.thread_id  # linear thread index within the block, x fastest (as on hardware)
    warp_id, lane = divmod(tid, WARP)
    with _registry_lock:
        # One BlockManager runs one block, so it is the natural owner of the block's warps.
        warps = manager.__dict__.setdefault("_ropelab_warps", {})
        warp = warps.get(warp_id)
        if warp is None:
            bx, by, bz = manager._block_dim
            threads = bx * by * bz
            warp = warps[warp_id] = _Warp(min(WARP, threads - warp_id * WARP), manager, warp_id)
    return lane, warp


def _check_mask(mask, warp: _Warp) -> None:
    needed = (1 << warp.lanes) - 1
    if (int(mask) & needed) != needed:
        raise NotImplementedError(
            f"the simulator's shuffle emulation needs every lane of the warp in the mask "
            f"(0x{needed:08x}); got 0x{int(mask) & FULL_MASK:08x}"
        )


def _exchange(mask, value, source_of):
    """Offer ``value``; return the value offered by lane ``source_of(lane, lanes)``."""
    lane, warp = _lane_and_warp()
    _check_mask(mask, warp)
    warp.slots[lane] = value
    warp.wait()
    got = warp.slots[source_of(lane, warp.lanes)]
    warp.wait()
    return got


def _in_range(src: int, lane: int, lanes: int) -> int:
    # Hardware returns the caller's own value when the source lane is outside the warp.
    return src if 0 <= src < lanes else lane


def shfl_sync(self, mask, value, src_lane):
    """``value`` from lane ``src_lane`` (taken modulo 32, as the hardware does)."""
    return _exchange(mask, value, lambda lane, n: _in_range(int(src_lane) % WARP, lane, n))


def shfl_xor_sync(self, mask, value, lane_mask):
    """``value`` from lane ``lane ^ lane_mask``: the butterfly of a warp reduction."""
    return _exchange(mask, value, lambda lane, n: _in_range(lane ^ int(lane_mask), lane, n))


def shfl_up_sync(self, mask, value, delta):
    """``value`` from lane ``lane - delta``; lanes below ``delta`` keep their own."""
    return _exchange(mask, value, lambda lane, n: _in_range(lane - int(delta), lane, n))


def shfl_down_sync(self, mask, value, delta):
    """``value`` from lane ``lane + delta``; lanes past the end keep their own."""
    return _exchange(mask, value, lambda lane, n: _in_range(lane + int(delta), lane, n))


def syncwarp(self, mask=FULL_MASK):
    """Wait for the other lanes of the warp."""
    lane, warp = _lane_and_warp()
    _check_mask(mask, warp)
    warp.wait()


def record_start(manager, thread_id: int, thread) -> None:
    """Note that simulated thread ``thread_id`` of ``manager``'s block has started; ``thread``
    answers ``thread_id``, ``exception`` and ``is_alive()`` (a ``BlockThread``, or the
    per-launch record of :mod:`ropelab.sim.block`'s pooled threads)."""
    manager.__dict__.setdefault("_ropelab_threads", {})[thread_id] = thread


def _record_thread_starts(thread_class) -> None:
    """Make each simulator thread note itself in its block's registry when it starts running."""
    original = thread_class.run
    if getattr(original, "_ropelab_records", False):
        return

    def run(self):
        record_start(self._manager, self.thread_id, self)
        original(self)

    run._ropelab_records = True
    thread_class.run = run


def install() -> tuple[str, ...]:
    """Attach the emulated warp functions to the simulator's fake ``cuda`` module.

    Idempotent; does nothing on a GPU.  Functions the simulator already provides (a later
    numba-cuda might) are left alone.  Returns the names this module supplied.
    """
    global _installed
    if not SIMULATED:
        return ()
    with _install_lock:
        if _installed is None:
            from numba.cuda.simulator.kernelapi import FakeCUDAModule

            from numba.cuda.simulator.kernel import BlockThread

            _record_thread_starts(BlockThread)
            mine = {name: globals()[name] for name in _NAMES}
            added = []
            for name, fn in mine.items():
                if not hasattr(FakeCUDAModule, name):
                    setattr(FakeCUDAModule, name, fn)
                    added.append(name)
            _installed = tuple(added)
        return _installed
