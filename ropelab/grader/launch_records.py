"""What the grader records of each simulated launch, and the launch rules every GPU holds.

:func:`intercepted_launches` records ``kernel[grid, block, stream, shared]`` of every launch,
the arguments it is called with and the blocks that wrote nothing: no element of a step's array
(:class:`~.recording.WatchedArray` tells :class:`Running`'s launch which blocks wrote one) and
none of a device array the learner's code made (:class:`Written` stands in for it during the
launch),
and refuses an illegal configuration, or arguments of other types than the step's contract,
before a thread runs (:class:`LaunchRejected`).  A kernel object cannot leave the grading
child, so what crosses to the parent is :meth:`Launch.portable`: the kernel as a
:class:`KernelRef` (where its code was defined) and each argument as an :class:`ArgRef` (which
object, how many elements).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

from ..cuda_limits import MAX_GRID, MAX_THREADS_PER_BLOCK  # noqa: F401  (re-exported)

MAX_BLOCK = (MAX_THREADS_PER_BLOCK, MAX_THREADS_PER_BLOCK, 64)
MAX_DYNAMIC_SHARED = 227 * 1024  # bytes per block on an H100/H200 (opt-in maximum)


class LaunchRejected(RuntimeError):
    """A launch configuration a GPU would refuse; the message says which rule."""


class Running:
    """The launch whose threads are running now (launches run one at a time)."""

    launch = None


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


_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # .../ropelab


_GIVEN: list = []  # the set below, made once: before any learner's code runs in a trial


def _given_codes() -> set:
    """The code objects of the kernels the steps give (``ropelab.grader.steps.*``: 08's
    ``reduce_partials_kernel``, say), which a learner's launch function may launch.

    Judged by the code object itself, not by a name a function carries: ``__module__`` is any
    string its maker sets, so a learner's kernel could claim to be ropelab's."""
    from .kernel_census import python_function

    if _GIVEN:
        return _GIVEN[0]
    found = set()
    for name, module in list(sys.modules.items()):
        if name.startswith("ropelab.grader.steps.") and module is not None:
            for value in list(vars(module).values()):
                fn = python_function(value) if hasattr(value, "py_func") or hasattr(
                    value, "fn") else None
                if fn is not None:
                    found.add(fn.__code__)
    _GIVEN.append(frozenset(found))
    return _GIVEN[0]


def _ropelab_code(code) -> bool:
    """Whether ``code`` was compiled from a file of the ropelab package (``ropelab/kernels/
    block2d.py``, say), however it was loaded (another module name, a symlinked folder).  Not
    the wheel's bundle of repository files (``ropelab/_bundle``), which carries the course's
    solutions."""
    from ..resources import BUNDLE

    filename = getattr(code, "co_filename", "")
    if not isinstance(filename, str) or not filename:
        return False
    path = os.path.realpath(filename)
    return path.startswith(_PACKAGE + os.sep) and not path.startswith(
        os.path.join(_PACKAGE, BUNDLE) + os.sep)


@dataclass
class KernelRef:
    """A launched kernel as data: its name, and the module, file and first line of its Python
    function's code (what :mod:`.launched` finds it by in the parent); ``learners``: not one of
    ropelab's."""

    name: str
    module: str
    filename: str
    line: int
    learners: bool
    # one of ropelab's own kernels (ropelab.kernels, say) that the step does not give: its
    # launch is refused (the step asks for the learner's kernel, not the package's answer)
    borrowed: bool = False

    BORROWED_HINT = "ropelab's kernels are the answer to compare with, not a part of it"

    @classmethod
    def of(cls, kernel) -> KernelRef:
        from .kernel_census import python_function

        fn = python_function(kernel)
        code = getattr(fn, "__code__", None)
        module = getattr(fn or kernel, "__module__", "") or ""
        module = module if isinstance(module, str) else ""
        given = code is not None and code in _given_codes()
        return cls(str(getattr(fn, "__name__", "kernel")), module,
                   str(getattr(code, "co_filename", "?")),
                   int(getattr(code, "co_firstlineno", 0)), not given,
                   not given and _ropelab_code(code))

    def same_code(self, code) -> bool:
        """Whether ``code`` (a code object) is the one this kernel's function was made from."""
        return (code.co_filename, code.co_firstlineno, code.co_name) == (
            self.filename, self.line, self.name)


@dataclass
class ArgRef:
    """One argument of a launch as data: ``token`` is the same for the same object within one
    run (the buffer one launch writes and the next reads), ``size`` its elements (-1: not an
    array); ``value`` a number argument's value as a float (None for anything else), so that
    a rule can hold a launch to the scalar its step computes (05.3's stride_ratio)."""

    token: int
    size: int
    value: float | None = None


@dataclass
class Launch:
    kernel: str
    grid: tuple
    block: tuple
    shared_bytes: int
    fn: object = None  # the launched kernel object (a KernelRef once portable)
    arguments: tuple | None = None  # what it was called with (None: configured, never called)
    # blocks none of whose threads wrote a watched array or a learner-made device array, and the
    # first of them (-1: none); counted when the launch returns
    idle_blocks: int = 0
    first_idle: int = -1

    @property
    def learners(self) -> bool:
        """Whether the kernel is the learner's (not one a step gives)."""
        ref = self.fn if isinstance(self.fn, KernelRef) else KernelRef.of(self.fn)
        return ref.learners

    def portable(self, tokens: dict) -> Launch:
        """This launch as data (see the module docstring); ``tokens`` numbers the argument
        objects of one run, and is filled as new ones are met."""
        def ref(value):
            key = id(value)
            if key not in tokens:
                tokens[key] = (len(tokens), value)  # the value kept: ids stay unique
            size = getattr(value, "size", None) if hasattr(value, "shape") else None
            number = (float(value) if isinstance(value, (int, float, np.integer, np.floating))
                      and not isinstance(value, bool) else None)
            return ArgRef(tokens[key][0], int(size) if isinstance(size, (int, np.integer))
                          else -1, number)
        arguments = None if self.arguments is None else tuple(ref(a) for a in self.arguments)
        fn = self.fn if isinstance(self.fn, KernelRef) else KernelRef.of(self.fn)
        return Launch(str(self.kernel), tuple(int(v) for v in self.grid),
                      tuple(int(v) for v in self.block), int(self.shared_bytes), fn, arguments,
                      int(self.idle_blocks), int(self.first_idle))

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


def simulated_thread() -> tuple[int, int] | None:
    """(linear block, linear thread in block) of the current simulated thread, or None."""
    t = threading.current_thread()
    manager = getattr(t, "_manager", None)
    if manager is None:
        return None
    b, th = t.blockIdx, t.threadIdx
    gx, gy, _ = manager._grid_dim
    bx, by, _ = manager._block_dim
    return b.x + gx * (b.y + gy * b.z), th.x + bx * (th.y + by * th.z)


def _made_on_device(value) -> bool:
    """A buffer the learner's code made: a simulated device array (cuda.device_array /
    to_device's), or a NumPy array handed to a launch (numba copies it over and back)."""
    return type(value).__name__ == "FakeCUDAArray" or (
        type(value) is np.ndarray and value.ndim > 0)


class Written:
    """A simulated device array that the learner's code made (a scratch buffer, partial sums),
    as one launch's kernel sees it: every access is the array's, and a store tells the launch
    which block did work.  Views and atomics go through it."""

    __slots__ = ("_array", "_launch")

    def __init__(self, array, launch: Launch):
        self._array, self._launch = array, launch

    def __getattr__(self, attr):
        return getattr(self._array, attr)

    def __len__(self):
        return len(self._array)

    def _ordering(self, index, write: bool, value=None) -> None:
        """The ordering check of :class:`~.recording.Ordering` on this buffer's element
        ``index`` (an element is known by its address, whatever view reaches it); threads that
        race through a scratch buffer are as wrong as through ``out``.  An unordered store of
        a different value raises here: nothing judges a scratch buffer's values later."""
        from .ordering import GlobalMemoryRace, Ordering

        if simulated_thread() is None:
            return
        data = getattr(self._array, "_ary", self._array)
        items = index if isinstance(index, tuple) else (index,)
        if len(items) != data.ndim or not all(isinstance(i, (int, np.integer)) for i in items):
            return  # a slice or a mask: left to the kernel's other accesses
        address = data.__array_interface__["data"][0] + sum(
            (int(i) % n) * st for i, n, st in zip(items, data.shape, data.strides))
        order = self._launch.__dict__.setdefault("_scratch_order", Ordering(
            "a device array your launch function made", self._launch,
            "element [{index}] of {name}"))
        found = order.access(address, ", ".join(str(int(i)) for i in items), write, value)
        if found is not None:
            raise GlobalMemoryRace(found)

    def __getitem__(self, index):
        value = self._array[index]
        if _made_on_device(value):
            return Written(value, self._launch)
        self._ordering(index, False)
        return value

    def __array__(self, dtype=None, copy=None):  # a NumPy operand inside the kernel
        data = np.asarray(self._array)
        return data if dtype is None else data.astype(dtype)

    def __setitem__(self, index, value):
        self._array[index] = value
        self._ordering(index, True, value if np.ndim(value) == 0 else None)
        who = simulated_thread()
        if who is not None:
            self._launch.touched.add(who[0])


class _Configured:
    """``kernel[grid, block]``: launching it records the arguments (and checks their types)."""

    def __init__(self, kernel, launch: Launch, signature: str | None):
        self._kernel, self._launch, self._signature = kernel, launch, signature

    def __call__(self, *args):
        launch = self._launch
        launch.arguments = args
        if self._signature is not None and launch.learners:
            problem = argument_problem(self._kernel, args, self._signature)
            if problem is not None:
                raise LaunchRejected(f"{launch.kernel}: {problem}")
        launch.touched = set()
        Running.launch = launch
        try:
            return self._kernel(*(Written(a, launch) if _made_on_device(a) else a
                                  for a in args))
        finally:
            Running.launch = None
            idle = [b for b in range(launch.blocks) if b not in launch.touched]
            launch.idle_blocks, launch.first_idle = len(idle), (idle[0] if idle else -1)

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
    _given_codes()  # made now, before the learner's code could add to the steps' modules

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

    from numba import cuda

    original_to_device = cuda.to_device

    def to_device(obj, *args, **kwargs):
        # numba-cuda on a GPU hands a device array back as it is (auto_device): no copy, no
        # host read; the simulator's would copy a step's array through NumPy
        if type(obj).__name__ in ("WatchedArray", "FakeCUDAArray") and not args and \
                kwargs.get("to") is None:
            return obj
        return original_to_device(obj, *args, **kwargs)

    FakeCUDAKernel.__getitem__ = getitem
    cuda.to_device = to_device
    try:
        yield launches
    finally:
        FakeCUDAKernel.__getitem__ = original
        cuda.to_device = original_to_device
