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

``cuda.atomic.*`` on a shared element is a third kind of access: atomics of several threads on
one element in one epoch are no race (the hardware serializes them: a shared-memory
``atomic.add`` reduction is right code), but an atomic and a plain read or write of the element
in the same epoch by different threads are.

A slice or a partial index of a shared array (``table[k:k + 1]``, ``tiles[0]``) is a view that
reports its elements' accesses as the whole array's, so a view hides no race.  The detector
also counts *meetings* (:class:`Watch`): reads of an element another thread of the block wrote,
or updated atomically; a step whose point is that threads share through shared memory needs
at least one.
"""

from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np


class SharedMemoryRace(RuntimeError):
    """Two threads of one block touched one shared element with no barrier between them."""


def _label(thread) -> str:
    tid = thread.threadIdx
    return str(tid.x) if tid.y == tid.z == 0 else f"({tid.x}, {tid.y}, {tid.z})"


class _Simulated:
    """One simulated CUDA thread, as the detector records it.  Not the OS thread: a pooled
    simulator thread (:mod:`ropelab.sim.block`) runs one simulated thread after another, often
    two of the same block when the first ends before the next is handed out, and two accesses
    by one OS thread would then look ordered."""

    __slots__ = ("thread_id", "label", "blockIdx", "block_threads")

    def __init__(self, thread):
        self.thread_id = getattr(thread, "thread_id", -1)
        self.label = _label(thread) if hasattr(thread, "threadIdx") else thread.name
        self.blockIdx = tuple(getattr(thread, "blockIdx", (0, 0, 0)))
        dims = getattr(getattr(thread, "_manager", None), "_block_dim", None)
        self.block_threads = int(np.prod(dims)) if dims is not None else 0


def _thread():
    """The current simulated thread and its clock: (barriers passed, warp barriers passed).
    Its record lives on the OS thread until the pool hands that thread a new simulated thread
    (which clears every attribute the simulated thread set: this one and the clocks)."""
    t = threading.current_thread()
    who = t.__dict__.get("_race_who")
    if who is None:
        who = t._race_who = _Simulated(t)
    return who, (getattr(t, "_race_epoch", 0), getattr(t, "_race_warp_epoch", 0))


def _ordered(a, a_clock, b, b_clock) -> bool:
    """Whether a barrier lies between an access of thread ``a`` at ``a_clock`` and one of
    thread ``b`` at ``b_clock``: a block barrier, or (same warp) a warp barrier."""
    if a is b or a_clock[0] != b_clock[0]:
        return True
    return _same_warp(a, b) and a_clock[1] != b_clock[1]


def _same_warp(a, b) -> bool:
    """Whether simulated threads ``a`` and ``b`` are lanes of one warp."""
    return getattr(a, "thread_id", -1) // 32 == getattr(b, "thread_id", -2) // 32


def _same_value(last, me, what: str, value) -> str:
    """What the race message adds when two lanes of one warp stored the same value: why that is
    still refused, and the fix."""
    first, _, stored = last
    if what != "write" or value is None or stored is None:
        return ""
    try:
        same = bool(stored == value) or (stored != stored and value != value)
    except (TypeError, ValueError):
        return ""
    if not (same and _same_warp(first, me)):
        return ""
    shown = value.item() if hasattr(value, "item") else value
    return (f" (the two are lanes of one warp and stored the same value, {shown!r}: a GPU "
            "keeps one of the stores, so the result would not change, but here every element "
            "has one writer: store it from one lane, e.g. under `if lane == 0:`)")


class Watch:
    """What one :func:`watching` block saw: ``meetings``, reads of a shared element that
    another thread of the block wrote (or updated atomically), and which shared elements each
    thread read (:attr:`fewest_reads`)."""

    def __init__(self, record_reads: bool = False):
        self.meetings = 0
        # only where a step judges it (06.2): every shared read of every thread is noted
        self.record_reads = record_reads
        self._read: dict = {}  # (block, thread) -> {(array, flat index)}
        self._block_threads: dict = {}  # block -> its threads

    def read(self, who, element) -> None:
        self._block_threads.setdefault(who.blockIdx, who.block_threads)
        self._read.setdefault((who.blockIdx, who.label), set()).add(element)

    @property
    def fewest_reads(self) -> int:
        """The fewest distinct shared elements a thread of a block that used shared memory
        read (0 where some thread of such a block read none), 0 when nothing was read."""
        per_block: dict = {}
        for (block, _), elements in self._read.items():
            per_block.setdefault(block, []).append(len(elements))
        fewest = [min(counts) if len(counts) >= self._block_threads[block] else 0
                  for block, counts in per_block.items()]
        return min(fewest, default=0)


class RaceArray:
    """A shared array (or a view of one) that reports races; every other use is NumPy's."""

    def __init__(self, data: np.ndarray, where: str, watch: Watch | None = None, *,
                 root: RaceArray | None = None, ids: np.ndarray | None = None):
        self.data = data
        self.where = where
        self.shape, self.size, self.ndim, self.dtype = data.shape, data.size, data.ndim, data.dtype
        # the whole array's flat index of each element of this one (a view maps into its root)
        self._ids = np.arange(data.size).reshape(data.shape) if ids is None else ids
        self._root = self if root is None else root
        if root is None:
            self._watch = watch if watch is not None else Watch()
            self._lock = threading.Lock()
            self._block = None
            self._writes: dict = {}  # flat index -> (thread, epoch)
            self._reads: dict = {}  # flat index -> {thread: epoch}
            self._atomics: dict = {}  # flat index -> {thread: epoch}

    def __getattr__(self, attr):
        return getattr(self.data, attr)

    def __len__(self):
        return len(self.data)

    def _selected(self, index):
        """The root's flat indices ``index`` selects (NumPy's IndexError if it is out of
        bounds), or None for an index the detector cannot follow (a boolean mask, say)."""
        items = index if isinstance(index, tuple) else (index,)
        if not all(isinstance(i, (int, np.integer, slice)) or i is None or i is Ellipsis
                   or isinstance(i, np.ndarray) and i.dtype.kind in "iu" for i in items):
            return None
        return self._ids[index]

    def _race(self, flat, first, first_did: str, me, me_did: str,
              why: str = "") -> SharedMemoryRace:
        self = self._root
        return SharedMemoryRace(
            f"shared-memory race on element {flat} of {self.where}: thread {first.label} "
            f"{first_did} and thread {me.label} {me_did} with no cuda.syncthreads() between"
            + why)

    def _check(self, flat, what: str, value=None):
        """Record an access (``"read"``, ``"write"`` or ``"atomic"``) of element ``flat``
        (``value``: what a write of one element stores, if known), or raise for the first
        unordered pair of accesses, at least one of them plain."""
        self = self._root
        me, epoch = _thread()
        block = me.blockIdx
        did = {"read": "read it", "write": "wrote it", "atomic": "updated it atomically"}[what]
        with self._lock:
            if block != self._block:  # blocks run one after another; a new one starts clean
                self._block, self._writes, self._reads, self._atomics = block, {}, {}, {}
            last = self._writes.get(flat)
            if last is not None and not _ordered(last[0], last[1], me, epoch):
                raise self._race(flat, last[0], "wrote it", me, did,
                                 _same_value(last, me, what, value))
            if what != "atomic":  # atomics of different threads on one element are ordered
                for other, at in self._atomics.get(flat, {}).items():
                    if not _ordered(other, at, me, epoch):
                        raise self._race(flat, other, "updated it atomically", me, did)
            if what != "read":
                for reader, read_epoch in self._reads.get(flat, {}).items():
                    if not _ordered(reader, read_epoch, me, epoch):
                        raise self._race(flat, reader, "read it", me, did)
            if what == "read" and (last is not None and last[0] is not me or any(
                    other is not me for other in self._atomics.get(flat, {}))):
                self._watch.meetings += 1
            if what == "write":
                self._writes[flat] = (me, epoch, value)
                self._reads.pop(flat, None)
                self._atomics.pop(flat, None)
            elif what == "atomic":
                self._atomics.setdefault(flat, {})[me] = epoch
            else:
                self._reads.setdefault(flat, {})[me] = epoch
                if self._watch.record_reads:
                    self._watch.read(me, (id(self), flat))

    def _each(self, ids, what: str) -> None:
        for flat in np.ravel(ids):
            self._check(int(flat), what)

    def atomic_index(self, index):
        """Check an atomic update of ``index``; the NumPy array it then applies to."""
        ids = self._selected(index)
        if ids is not None:
            self._each(ids, "atomic")
        return self.data

    def __getitem__(self, index):
        ids = self._selected(index)
        value = self.data[index]
        if ids is None:
            return value
        if np.ndim(ids) == 0:
            self._check(int(ids), "read")
            return value
        if isinstance(value, np.ndarray) and np.shares_memory(value, self.data):
            return RaceArray(value, self._root.where, root=self._root, ids=ids)  # a view
        self._each(ids, "read")  # a copy (an integer-array index): read now
        return value

    def __setitem__(self, index, value):
        ids = self._selected(index)
        if ids is not None:
            if np.ndim(ids) == 0 and np.ndim(value) == 0:
                self._check(int(ids), "write", value)
            else:
                self._each(ids, "write")
        self.data[index] = value


# The barrier methods of the simulator's thread: each one is a block barrier for the detector.
_BARRIERS = ("syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or")


def in_atomic() -> bool:
    """Whether the current simulated thread is inside a ``cuda.atomic.*`` call (the accesses
    the simulator makes for it are one atomic update: :mod:`ropelab.grader.recording` reads
    this)."""
    return threading.current_thread().__dict__.get("_race_in_atomic", False)


def _atomic_wrapper(original, name: str):
    """``cuda.atomic.<name>`` that checks a shared array's element, then updates its data; the
    thread is marked as inside an atomic meanwhile (:func:`in_atomic`)."""
    def atomic(self, array, *args):
        if isinstance(array, RaceArray):
            # compare_and_swap(array, old, val) updates element 0; the others take an index
            index = (0,) * array.ndim if name == "compare_and_swap" else args[0]
            array = array.atomic_index(index)
        me = threading.current_thread()
        me._race_in_atomic = True
        try:
            return original(self, array, *args)
        finally:
            me._race_in_atomic = False
    return atomic


@contextlib.contextmanager
def watching(record_reads: bool = False):
    """Inside the block, simulated shared arrays report races (see the module docstring);
    yields the block's :class:`Watch` (``record_reads``: which elements each thread read,
    :attr:`Watch.fewest_reads`)."""
    from numba.core import types
    from numba.cuda.simulator import kernel, kernelapi
    from numba.np import numpy_support

    original_array = kernelapi.FakeCUDAShared.array
    thread_class = kernel.BlockThread
    original_barriers = {n: getattr(thread_class, n) for n in _BARRIERS if hasattr(thread_class, n)}
    atomic_class = kernelapi.FakeCUDAAtomic
    original_atomics = {n: f for n, f in vars(atomic_class).items()
                        if callable(f) and not n.startswith("_")}
    wrapped: dict = {}
    watch = Watch(record_reads)

    def array(self, shape, dtype, alignment=None):
        frame = sys._getframe(1)
        if shape == 0 or alignment is not None:  # dynamic shared memory, or numba's refusal
            data = original_array(self, shape, dtype, alignment)
        else:
            # numba keys a block's shared arrays by the line that asked for one, which would be
            # this wrapper's line for every array: key them by the kernel's own line instead
            sites = self.__dict__.setdefault("_race_sites", {})
            site = (frame.f_code.co_filename, frame.f_lineno)
            data = sites.get(site)
            if data is None:
                if isinstance(dtype, types.Type):
                    dtype = numpy_support.as_dtype(dtype)
                data = sites[site] = np.empty(shape, dtype)
        key = id(data)
        if key not in wrapped:
            if data.dtype.kind == "f":  # np.empty: whatever the heap held; NaN instead, so a
                data.fill(np.nan)  # read before the writes gives NaN (then a race), not noise
            where = f"the shared array made on line {frame.f_lineno} of {frame.f_code.co_name}"
            wrapped[key] = (data, RaceArray(data, where, watch))  # keep data: ids stay unique
        return wrapped[key][1]

    def counted(original):
        def barrier(self, *args):
            self._race_epoch = getattr(self, "_race_epoch", 0) + 1
            return original(self, *args)
        return barrier

    # cuda.syncwarp (ropelab.sim.warp supplies it) orders the lanes of one warp
    original_syncwarp = getattr(kernelapi.FakeCUDAModule, "syncwarp", None)

    def syncwarp(self, *args, **kwargs):
        me = threading.current_thread()
        me._race_warp_epoch = getattr(me, "_race_warp_epoch", 0) + 1
        return original_syncwarp(self, *args, **kwargs)

    kernelapi.FakeCUDAShared.array = array
    for name, original in original_barriers.items():
        setattr(thread_class, name, counted(original))
    for name, original in original_atomics.items():
        setattr(atomic_class, name, _atomic_wrapper(original, name))
    if original_syncwarp is not None:
        kernelapi.FakeCUDAModule.syncwarp = syncwarp
    try:
        yield watch
    finally:
        kernelapi.FakeCUDAShared.array = original_array
        for name, original in original_barriers.items():
            setattr(thread_class, name, original)
        for name, original in original_atomics.items():
            setattr(atomic_class, name, original)
        if original_syncwarp is not None:
            kernelapi.FakeCUDAModule.syncwarp = original_syncwarp
