"""What the grader sees of a simulated launch: who touched which element, and each launch's
configuration.

:class:`WatchedArray` stands in for one kernel argument under the Numba CUDA simulator (which
hands non-NumPy arguments to the kernel unchanged and runs each CUDA thread as a Python thread
that carries its ``blockIdx``/``threadIdx``).  Every access is recorded: the last writer of each
element, a reader of each element, and reads/writes per thread; an index past either end (a
negative one included, which NumPy would wrap around) raises ``IndexError`` naming the array.

Two more records on ``out``: the first read of an element no thread had written yet (``out[i]
+= ...`` on an output that starts uninitialised), and, when the step says which thread writes
which element (``owner``: a global thread index per element), the first write by another
thread.

:func:`intercepted_launches` records ``kernel[grid, block, stream, shared]`` of every launch and
the arguments it is called with, and refuses an illegal configuration, or arguments of other
types than the step's contract, before a thread runs (:class:`LaunchRejected`).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import numpy as np

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_DYNAMIC_SHARED = 227 * 1024  # bytes per block on an H100/H200 (opt-in maximum)


class LaunchRejected(RuntimeError):
    """A launch configuration a GPU would refuse; the message says which rule."""


def _who() -> tuple[int, int] | None:
    """(linear block, linear thread in block) of the current simulated thread, or None."""
    t = threading.current_thread()
    manager = getattr(t, "_manager", None)
    if manager is None:
        return None
    b, th = t.blockIdx, t.threadIdx
    gx, gy, _ = manager._grid_dim
    bx, by, _ = manager._block_dim
    return b.x + gx * (b.y + gy * b.z), th.x + bx * (th.y + by * th.z)


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


class WatchedArray:
    """One kernel argument that records its accesses; see the module docstring."""

    def __init__(self, name: str, data: np.ndarray, owner: np.ndarray | None = None):
        self.name = name
        self.data = data
        self.access = Access.of(data.shape)
        self.shape, self.size, self.ndim, self.dtype = data.shape, data.size, data.ndim, data.dtype
        self.owner = owner  # global thread index that must write each element (-1: any), or None
        # (index, (block, thread)) of the lowest element read while no thread had written it,
        # and (index, (block, thread), owner) of the lowest one written by a thread not its owner
        self.read_unwritten = None
        self.foreign_write = None

    def __getattr__(self, attr):  # strides, nbytes, ...: what NumPy says
        return getattr(self.data, attr)

    @property
    def _ary(self):  # launchers that check alignment read a simulator array's buffer here
        return self.data

    def __len__(self):
        return len(self.data)

    def copy_to_host(self, *args, **kwargs):  # what a device array offers a launch function
        return self.data.copy()

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

    def _note(self, index, write: bool):
        who = _who()
        if who is None:
            return
        a = self.access
        counts = a.per_thread.setdefault(who, [0, 0])
        counts[1 if write else 0] += 1
        if write:
            if self.owner is not None and isinstance(index, tuple):
                owner = int(self.owner[index])
                # the lowest element written by a non-owner: the same report whatever order
                # the threads ran in
                if owner >= 0 and owner != who[0] * _threads_per_block() + who[1] and (
                        self.foreign_write is None or index < self.foreign_write[0]):
                    self.foreign_write = (index, who, owner)
            a.writer_block[index], a.writer_thread[index] = who
        else:
            if isinstance(index, tuple) and a.writer_block[index] < 0 and (
                    self.read_unwritten is None or index < self.read_unwritten[0]):
                self.read_unwritten = (index, who)
            a.reader_block[index], a.reader_thread[index] = who

    def __getitem__(self, index):
        index = self._checked(index)
        try:
            value = self.data[index]
        except IndexError as exc:
            raise IndexError(f"{exc} [array={self.name}]") from None
        self._note(index, False)
        return value

    def __setitem__(self, index, value):
        index = self._checked(index)
        try:
            self.data[index] = value
        except IndexError as exc:
            raise IndexError(f"{exc} [array={self.name}]") from None
        self._note(index, True)


def _dims(value) -> tuple:
    if isinstance(value, (int, np.integer)):
        return (int(value), 1, 1)
    dims = tuple(int(v) for v in value)
    return dims + (1,) * (3 - len(dims))


def launch_problem(grid, block, shared_bytes: int = 0) -> str | None:
    """Which rule a launch configuration breaks, in words; None when a GPU would accept it."""
    try:
        g, b = _dims(grid), _dims(block)
    except (TypeError, ValueError):
        return f"grid {grid!r} and block {block!r} must be ints or tuples of ints"
    if len(g) > 3 or len(b) > 3:
        return "grid and block have at most three dimensions (x, y, z)"
    if min(g) < 1 or min(b) < 1:
        return f"grid {g[:len(g)]} and block {b} must be at least 1 in every dimension"
    threads = b[0] * b[1] * b[2]
    if threads > MAX_THREADS_PER_BLOCK:
        return f"block of {threads} threads: the limit is {MAX_THREADS_PER_BLOCK}"
    for axis, (n, cap) in enumerate(zip(b, MAX_BLOCK)):
        if n > cap:
            return f"block dimension {'xyz'[axis]} = {n}: the limit is {cap}"
    for axis, (n, cap) in enumerate(zip(g, MAX_GRID)):
        if n > cap:
            return f"grid dimension {'xyz'[axis]} = {n} blocks: the limit is {cap}"
    if shared_bytes > MAX_DYNAMIC_SHARED:
        return (f"{shared_bytes} bytes of dynamic shared memory per block: the limit is "
                f"{MAX_DYNAMIC_SHARED}")
    return None


@dataclass
class Launch:
    kernel: str
    grid: tuple
    block: tuple
    shared_bytes: int
    fn: object = None  # the launched kernel object
    arguments: tuple | None = None  # what it was called with (None: configured, never called)

    @property
    def learners(self) -> bool:
        """Whether the kernel is the learner's (not one of ropelab's, which a step may give)."""
        from .kernel_census import python_function

        module = getattr(python_function(self.fn) or self.fn, "__module__", "") or ""
        return not (module == "ropelab" or module.startswith("ropelab."))

    @property
    def blocks(self) -> int:
        return int(np.prod(self.grid))

    @property
    def threads_per_block(self) -> int:
        return int(np.prod(self.block))

    def text(self) -> str:
        """"grid 3 x block 64" (trailing 1s dropped)."""
        return f"grid {dims_text(self.grid)} x block {dims_text(self.block)}"


def dims_text(dims: tuple) -> str:
    used = list(dims)
    while len(used) > 1 and used[-1] == 1:
        used.pop()
    return str(used[0]) if len(used) == 1 else "(" + ", ".join(map(str, used)) + ")"


def _typeof(value):
    """The Numba type a GPU launch gives ``value`` (an array of the simulator's, too)."""
    from numba import typeof

    for attr in ("data", "_ary"):  # WatchedArray / the simulator's device arrays
        inner = getattr(value, attr, None)
        if isinstance(inner, np.ndarray):
            value = inner
            break
    return typeof(value)


def _spelled(numba_type) -> str:
    """"float32[::1]" / "uint64": a type as a signature string writes it."""
    if hasattr(numba_type, "dtype") and hasattr(numba_type, "ndim"):
        return f"{numba_type.dtype}[{', '.join([':'] * numba_type.ndim)}]"
    return str(numba_type)


def argument_problem(fn, arguments: tuple, signature: str) -> str | None:
    """Which argument of a launch differs in type from ``signature`` (the step's contract), in
    words; None when they all agree.  An array agrees in element type and dimensions."""
    from numba.core import sigutils

    from .kernel_census import python_function

    wanted, _ = sigutils.normalize_signature(signature)
    inner = python_function(fn)
    names = list(inner.__code__.co_varnames[:inner.__code__.co_argcount]) if inner else []
    if len(arguments) != len(wanted):
        # A kernel of the learner's own besides the step's (a second stage, say): the others a
        # launch step launches are the kernels it gives.
        return (f"{len(arguments)} arguments, but the contract has {len(wanted)}: "
                f"{signature} (every kernel of yours that this step launches is the kernel of "
                "its contract; the step gives any other)")
    for k, (value, want) in enumerate(zip(arguments, wanted)):
        got = _typeof(value)
        name = names[k] if k < len(names) else f"argument {k + 1}"
        if hasattr(want, "dtype") and hasattr(want, "ndim"):
            same = (getattr(got, "dtype", None) == want.dtype
                    and getattr(got, "ndim", -1) == want.ndim)
        else:
            same = got == want
        if not same:
            python = {int: " (a Python int)", float: " (a Python float)",
                      bool: " (a Python bool)"}.get(type(value), "")
            fix = (f": pass numba.{want}({name})" if not hasattr(want, "ndim")
                   and str(want) in ("uint64", "uint32", "int64", "int32", "float32") else "")
            return (f"argument {k + 1} ({name}) is {_spelled(got)}{python}, but the contract "
                    f"wants {_spelled(want)}{fix}")
    return None


class _Configured:
    """``kernel[grid, block]``: launching it records the arguments (and checks their types)."""

    def __init__(self, kernel, launch: Launch, signature: str | None):
        self._kernel, self._launch, self._signature = kernel, launch, signature

    def __call__(self, *args):
        self._launch.arguments = args
        if self._signature is not None and self._launch.learners:
            problem = argument_problem(self._kernel, args, self._signature)
            if problem is not None:
                raise LaunchRejected(f"{self._launch.kernel}: {problem}")
        return self._kernel(*args)

    def __getattr__(self, attr):
        return getattr(self._kernel, attr)


@contextlib.contextmanager
def intercepted_launches(signature: str | None = None):
    """Record (and check) every simulated ``kernel[grid, block, ...](...)`` inside the block.

    Yields the list of :class:`Launch` it fills.  An illegal configuration raises
    :class:`LaunchRejected` at the ``[...]``, before any thread runs; so do arguments of the
    learner's kernel whose types differ from ``signature`` (the step's contract), when given.
    """
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    launches: list = []
    original = FakeCUDAKernel.__getitem__

    def getitem(self, configuration):
        if not isinstance(configuration, tuple) or len(configuration) < 2:
            raise LaunchRejected(f"a launch is kernel[grid, block]; got kernel[{configuration!r}]")
        grid, block = configuration[:2]
        shared = int(configuration[3]) if len(configuration) >= 4 else 0
        problem = launch_problem(grid, block, shared)
        if problem is not None:
            raise LaunchRejected(problem)
        name = getattr(getattr(self, "fn", None), "__name__", "kernel")
        launch = Launch(name, _dims(grid), _dims(block), shared, fn=self)
        launches.append(launch)
        return _Configured(original(self, configuration), launch, signature)

    FakeCUDAKernel.__getitem__ = getitem
    try:
        yield launches
    finally:
        FakeCUDAKernel.__getitem__ = original
