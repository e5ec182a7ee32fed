"""A shared-memory race detector for the Numba CUDA simulator.

On a GPU the threads of a block run at once; the simulator runs them as Python threads in
whatever order the interpreter picks, so a kernel missing a ``cuda.syncthreads()`` often gives
the right answer there.  Inside :func:`watching`, every ``cuda.shared.array`` is handed out
wrapped: per element it remembers the last writer, a reader, and the barrier epoch (how many
``syncthreads`` that thread had passed) of each.  Two accesses to one element by different
threads of one block in the same epoch, at least one a write, have no barrier between them: the
order is up to the hardware.  The first such pair raises :class:`SharedMemoryRace` naming both
threads, the array's line and the index.  Within one warp, ``cuda.syncwarp()`` orders accesses
too (its own count per thread).
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np


class SharedMemoryRace(RuntimeError):
    """Two threads of one block touched one shared element with no barrier between them."""


def _thread():
    """The current simulated thread and its clock: (barriers passed, warp barriers passed)."""
    t = threading.current_thread()
    return t, (getattr(t, "_race_epoch", 0), getattr(t, "_race_warp_epoch", 0))


def _ordered(a, a_clock, b, b_clock) -> bool:
    """Whether a barrier lies between an access of thread ``a`` at ``a_clock`` and one of
    thread ``b`` at ``b_clock``: a block barrier, or (same warp) a warp barrier."""
    if a is b or a_clock[0] != b_clock[0]:
        return True
    same_warp = getattr(a, "thread_id", -1) // 32 == getattr(b, "thread_id", -2) // 32
    return same_warp and a_clock[1] != b_clock[1]


def _label(thread) -> str:
    tid = thread.threadIdx
    return str(tid.x) if tid.y == tid.z == 0 else f"({tid.x}, {tid.y}, {tid.z})"


class RaceArray:
    """A shared array that reports races; every other use is NumPy's."""

    def __init__(self, data: np.ndarray, where: str):
        self.data = data
        self.where = where
        self.shape, self.size, self.ndim, self.dtype = data.shape, data.size, data.ndim, data.dtype
        self._lock = threading.Lock()
        self._block = None
        self._writes: dict = {}  # flat index -> (thread, epoch)
        self._reads: dict = {}  # flat index -> {thread: epoch}

    def __getattr__(self, attr):
        return getattr(self.data, attr)

    def __len__(self):
        return len(self.data)

    def _flat(self, index):
        items = index if isinstance(index, tuple) else (index,)
        if len(items) != self.ndim or not all(isinstance(i, (int, np.integer)) for i in items):
            return None  # a slice: not tracked
        try:
            return int(np.ravel_multi_index(tuple(int(i) for i in items), self.shape))
        except ValueError:
            return None  # out of bounds: NumPy raises below

    def _check(self, flat, write: bool):
        me, epoch = _thread()
        block = tuple(getattr(me, "blockIdx", (0, 0, 0)))
        with self._lock:
            if block != self._block:  # blocks run one after another; a new one starts clean
                self._block, self._writes, self._reads = block, {}, {}
            last = self._writes.get(flat)
            if last is not None and not _ordered(last[0], last[1], me, epoch):
                other = last[0]
                what = "wrote" if write else "read"
                raise SharedMemoryRace(
                    f"shared-memory race on element {flat} of {self.where}: thread "
                    f"{_label(other)} wrote it and thread {_label(me)} {what} it with no "
                    "cuda.syncthreads() between")
            if write:
                for reader, read_epoch in self._reads.get(flat, {}).items():
                    if not _ordered(reader, read_epoch, me, epoch):
                        raise SharedMemoryRace(
                            f"shared-memory race on element {flat} of {self.where}: thread "
                            f"{_label(reader)} read it and thread {_label(me)} wrote it with no "
                            "cuda.syncthreads() between")
                self._writes[flat] = (me, epoch)
                self._reads.pop(flat, None)
            else:
                self._reads.setdefault(flat, {})[me] = epoch

    def __getitem__(self, index):
        flat = self._flat(index)
        if flat is not None:
            self._check(flat, False)
        return self.data[index]

    def __setitem__(self, index, value):
        flat = self._flat(index)
        if flat is not None:
            self._check(flat, True)
        self.data[index] = value


@contextlib.contextmanager
def watching():
    """Inside the block, simulated shared arrays report races (see the module docstring)."""
    from numba.cuda.simulator import kernel, kernelapi

    original_array = kernelapi.FakeCUDAShared.array
    original_sync = kernel.BlockThread.syncthreads
    wrapped: dict = {}

    def array(self, shape, dtype, alignment=None):
        data = original_array(self, shape, dtype, alignment)
        key = id(data)
        if key not in wrapped:
            if data.dtype.kind == "f":  # np.empty: whatever the heap held; NaN instead, so a
                data.fill(np.nan)  # read before the writes gives NaN (then a race), not noise
            import sys
            frame = sys._getframe(1)
            where = f"the shared array made on line {frame.f_lineno} of {frame.f_code.co_name}"
            wrapped[key] = (data, RaceArray(data, where))  # keep data alive: ids stay unique
        return wrapped[key][1]

    def syncthreads(self):
        self._race_epoch = getattr(self, "_race_epoch", 0) + 1
        return original_sync(self)

    # cuda.syncwarp (ropelab.sim.warp supplies it) orders the lanes of one warp
    original_syncwarp = getattr(kernelapi.FakeCUDAModule, "syncwarp", None)

    def syncwarp(self, *args, **kwargs):
        me = threading.current_thread()
        me._race_warp_epoch = getattr(me, "_race_warp_epoch", 0) + 1
        return original_syncwarp(self, *args, **kwargs)

    kernelapi.FakeCUDAShared.array = array
    kernel.BlockThread.syncthreads = syncthreads
    if original_syncwarp is not None:
        kernelapi.FakeCUDAModule.syncwarp = syncwarp
    try:
        yield
    finally:
        kernelapi.FakeCUDAShared.array = original_array
        kernel.BlockThread.syncthreads = original_sync
        if original_syncwarp is not None:
            kernelapi.FakeCUDAModule.syncwarp = original_syncwarp
