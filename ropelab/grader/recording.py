"""What the grader sees of a simulated run: who touched which element.

:class:`WatchedArray` stands in for one kernel argument under the Numba CUDA simulator (which
hands non-NumPy arguments to the kernel unchanged and runs each CUDA thread as a Python thread
that carries its ``blockIdx``/``threadIdx``).  Every access is recorded: the last writer of each
element, a reader of each element, and reads/writes per thread; an index past either end (a
negative one included, which NumPy would wrap around) raises ``IndexError`` naming the array.
A slice or a row of a watched array is a watched view: its accesses are recorded in the array
it views.

Every in-kernel access of ``out`` also goes through the launch's ordering check
(:class:`~.ordering.Ordering`): threads that pass values through ``out`` with nothing ordering
them raise :class:`~.ordering.GlobalMemoryRace`; two unordered stores of different values are
kept in ``unordered_store``, judged once the values are known to be right.

Two more records on ``out``: the first read of an element no thread had written yet (``out[i]
+= ...`` on an output that starts uninitialised), and, when the step says which thread writes
which element (``owner``: a global thread index per element), the first write by another
thread.  And on every array, the first access from outside a kernel (``host_access``): a
launch function that reads ``x`` or writes ``out`` on the host did the work in NumPy.

What is recorded of each launch (its configuration, arguments, idle blocks) is in
:mod:`.launch_records`; its names are re-exported here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from .launch_records import (MAX_BLOCK, MAX_DYNAMIC_SHARED, MAX_GRID,  # noqa: F401
                             MAX_THREADS_PER_BLOCK, ArgRef, KernelRef, Launch, LaunchRejected,
                             Running, argument_problem, dims_text, intercepted_launches,
                             launch_problem, simulated_thread)
from .ordering import GlobalMemoryRace, Ordering  # noqa: F401  (GlobalMemoryRace re-exported)


def _threads_per_block() -> int:
    bx, by, bz = threading.current_thread()._manager._block_dim
    return bx * by * bz


@dataclass
class Access:
    """Per-element and per-thread records of one array (shared by all its views)."""

    writer_block: np.ndarray
    writer_thread: np.ndarray
    reader_block: np.ndarray
    reader_thread: np.ndarray
    per_thread: dict = field(default_factory=dict)  # (block, thread) -> [reads, writes]

    @classmethod
    def of(cls, shape) -> Access:
        def fresh():
            return np.full(shape, -1, dtype=np.int64)
        return cls(fresh(), fresh(), fresh(), fresh())


def _lowest_foreign(allowed: np.ndarray, index: tuple, who: tuple, found):
    """``found`` (``(index, who, allowed thread)`` or None), or this access instead where
    ``who`` is not the thread ``allowed`` names for the element (-1: any) and the element is
    lower: the lowest one, the same report whatever order the threads ran in."""
    thread = int(allowed[index])
    if thread >= 0 and thread != who[0] * _threads_per_block() + who[1] and (
            found is None or index < found[0]):
        return index, who, thread
    return found


# what a launch function may read of a step's array on the host: its shape, not its data
_METADATA = frozenset({"shape", "size", "ndim", "dtype", "strides", "nbytes", "itemsize",
                       "flags", "name", "owner", "reader", "access", "data"})


class WatchedArray:
    """One kernel argument that records its accesses; see the module docstring."""

    def __init__(self, name: str, data: np.ndarray, owner: np.ndarray | None = None,
                 reader: np.ndarray | None = None, once_per_block: bool = False):
        self.name = name
        self.data = data
        # an input each block reads once (into a shared table): the (block, element) reads
        # seen, and the lowest element a block read again: (index, (block, thread))
        self._block_reads = set() if once_per_block else None
        self.reread = None
        # the global thread that alone may read each element (-1: any), or None; and the
        # lowest element read by another thread: (index, (block, thread), reader)
        self.reader = reader
        self.foreign_read = None
        self.access = Access.of(data.shape)
        self.shape, self.size, self.ndim, self.dtype = data.shape, data.size, data.ndim, data.dtype
        self.owner = owner  # global thread index that must write each element (-1: any), or None
        # (index, (block, thread)) of the lowest element read while no thread had written it,
        # and (index, (block, thread), owner) of the lowest one written by a thread not its owner
        self.read_unwritten = None
        self.foreign_write = None
        # the lowest element stored to by two different threads: its value is the schedule's
        self.twice_written = None
        self.host_access = None  # "read x[...]" / "wrote out[...]": the first from the host
        # the first element two threads stored different values to, unordered (its message)
        self.unordered_store = None
        self._order = None  # this launch's in-kernel accesses (an Ordering), in the child only

    def __getattr__(self, attr):  # strides, nbytes, ...: what NumPy says
        # The data's methods (x.copy(), x.sum(), x.tolist(), x.reshape(...)) read it; from the
        # host that is host work, as np.array(x) is.  What a launch reads of its shape is not.
        if attr not in _METADATA and not attr.startswith("__") and simulated_thread() is None:
            self._note_host(f"read {self.name} ({self.name}.{attr})")
        return getattr(self.data, attr)

    @property
    def _ary(self):  # launchers that check alignment read a simulator array's buffer here
        return self.data

    def __len__(self):
        return len(self.data)

    def copy_to_host(self, *args, **kwargs):  # what a device array offers a launch function
        self._note_host(f"read {self.name} ({self.name}.copy_to_host())")
        return self.data.copy()

    # NumPy's ways into an array-like (``np.array(x)``, ``np.asarray``, any ufunc): each is the
    # whole array read at once, outside the per-element record; from the host, that is host
    # work (from a kernel's thread the simulator never takes them).
    def _whole(self, how: str) -> np.ndarray:
        if simulated_thread() is None:
            self._note_host(f"read {self.name} through NumPy ({how})")
        return self.data

    def __array__(self, dtype=None, copy=None):
        data = self._whole(f"np.array({self.name})")
        return data if dtype is None else data.astype(dtype)

    @property
    def __array_interface__(self):
        return self._whole(f"{self.name} as a NumPy array").__array_interface__

    @property
    def __array_struct__(self):
        return self._whole(f"{self.name} as a NumPy array").__array_struct__

    def _note_host(self, what: str) -> None:
        root = self._root or self  # a view's host read is its array's (the judge reads roots)
        if root.host_access is None:
            root.host_access = what

    def _checked(self, index):
        """The index, after checking it is inside the array (IndexError naming the array)."""
        items = index if isinstance(index, tuple) else (index,)
        if len(items) == self.ndim and all(isinstance(i, (int, np.integer)) for i in items):
            for axis, (i, n) in enumerate(zip(items, self.shape)):
                if not 0 <= int(i) < n:
                    where = f"axis {axis} of " if self.ndim > 1 else ""
                    raise IndexError(f"index {int(i)} is out of bounds for {where}{self.name} "
                                     f"(size {n}) [array={self.name}]")
            return tuple(int(i) for i in items)
        return index  # a slice or an array index: NumPy checks it

    # A view (``out[2 * p:2 * p + 2]``, ``x[row]``) records into the array it views: its root,
    # and each of its elements' flat index there.  Class defaults: a root's own are not fields.
    _root = None
    _ids = None

    def _flat_ids(self) -> np.ndarray:
        """Each element's flat index in the root (a root's, made once: not a field, never
        sent)."""
        if self._ids is None:
            self._ids = np.arange(self.size).reshape(self.shape)
        return self._ids

    def _view(self, index, value: np.ndarray) -> WatchedArray:
        root = self._root or self
        ids = self._flat_ids()[index]
        view = WatchedArray(self.name, value)
        view._root, view._ids = root, ids
        return view

    def _note_view(self, index, write: bool, value=None) -> None:
        root, flat = self._root, self._ids[index]
        if np.ndim(flat) == 0:
            root._note(tuple(int(i) for i in np.unravel_index(int(flat), root.shape)), write,
                       value)
        else:
            root._note_many(np.ravel(flat), write)

    def _note_many(self, flat: np.ndarray, write: bool) -> None:
        """Accesses of many elements at once (a slice of a view), by flat index."""
        who = simulated_thread()
        if who is None:
            self._note_host(f"{'wrote' if write else 'read'} {self.name}[...]")
            return
        a = self.access
        block, thread = (a.writer_block, a.writer_thread) if write else (a.reader_block,
                                                                        a.reader_thread)
        block.reshape(-1)[flat], thread.reshape(-1)[flat] = who
        a.per_thread.setdefault(who, [0, 0])[1 if write else 0] += int(flat.size)
        if not write and self._block_reads is not None:
            for f in flat:
                self._note_block_read(tuple(int(i) for i in np.unravel_index(int(f), self.shape)),
                                      who)
        running = Running.launch
        if running is not None:
            if write:
                running.touched.add(who[0])
            for f in flat if self.name == "out" else ():
                self._ordering(running, tuple(int(i) for i in np.unravel_index(int(f), self.shape)),
                               write)

    def _note(self, index, write: bool, value=None):
        """Record an access of ``index`` (``value``: what a store of one element stores)."""
        if self._root is not None and self._root is not self:
            return self._note_view(index, write, value)
        if not (isinstance(index, tuple) and all(isinstance(i, int) for i in index)):
            # a slice or an array index of the root (``out[i:i + 2] = 0.0``): element by element
            return self._note_many(np.ravel(self._flat_ids()[index]), write)
        who = simulated_thread()
        if who is None:
            shown = ", ".join(map(str, index))
            self._note_host(f"{'wrote' if write else 'read'} {self.name}[{shown}]")
            return
        running = Running.launch
        if running is not None:
            if write:  # a block that only reads did no work (launch_records.Launch.idle_blocks)
                running.touched.add(who[0])
            if self.name == "out":  # the inputs are read-only (a write is refused on its own)
                self._ordering(running, index, write, value)
        a = self.access
        counts = a.per_thread.setdefault(who, [0, 0])
        counts[1 if write else 0] += 1
        if write:
            if self.owner is not None:
                self.foreign_write = _lowest_foreign(self.owner, index, who, self.foreign_write)
            if a.writer_block[index] >= 0 and (
                    int(a.writer_block[index]), int(a.writer_thread[index])) != who and (
                    self.twice_written is None or index < self.twice_written):
                self.twice_written = index
            a.writer_block[index], a.writer_thread[index] = who
        else:
            if self.reader is not None:
                self.foreign_read = _lowest_foreign(self.reader, index, who, self.foreign_read)
            if self._block_reads is not None:
                self._note_block_read(index, who)
            if a.writer_block[index] < 0 and (
                    self.read_unwritten is None or index < self.read_unwritten[0]):
                self.read_unwritten = (index, who)
            a.reader_block[index], a.reader_thread[index] = who

    def _note_block_read(self, index: tuple, who) -> None:
        key = (who[0], index)
        if key in self._block_reads:
            if self.reread is None or index < self.reread[0]:
                self.reread = (index, who)
        else:
            self._block_reads.add(key)

    def _ordering(self, running, index: tuple, write: bool, value=None) -> None:
        """Check one in-kernel access of element ``index`` against the other threads' accesses
        of it in this launch (:class:`Ordering`); two unordered stores of different values are
        recorded in ``unordered_store``."""
        if self._order is None or self._order.launch is not running:  # a launch starts clean
            self._order = Ordering(self.name, running)
        found = self._order.access(index, ", ".join(map(str, index)), write, value)
        if found is not None and self.unordered_store is None:
            self.unordered_store = found

    def __getitem__(self, index):
        index = self._checked(index)
        try:
            value = self.data[index]
        except IndexError as exc:
            raise IndexError(f"{exc} [array={self.name}]") from None
        if isinstance(value, np.ndarray) and value.ndim and np.shares_memory(value, self.data):
            return self._view(index, value)  # its elements' accesses are recorded as they come
        self._note(index, False)
        return value

    def __setitem__(self, index, value):
        index = self._checked(index)
        try:
            self.data[index] = value
        except IndexError as exc:
            raise IndexError(f"{exc} [array={self.name}]") from None
        self._note(index, True, value if np.ndim(value) == 0 else None)
