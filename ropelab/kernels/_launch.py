"""The one way ropelab launches a kernel: a declared :class:`Variant`, a :class:`Plan`, :func:`launch`.

Every caller goes through here: the public functions (``ropelab.rope``,
``ropelab.fused_qknorm_rope``), the benchmark's kernel-only rows, the PTX census (which compiles
exactly the argument types a plan passes, so the census cannot drift from the launch), the
checks and the notebooks' thread tracer.

Why not just ``kernel[grid, block, stream](*args)``?  numba's dispatcher spends 30-60 us of host
time per launch (type inference of every argument, ``__cuda_array_interface__`` parsing, ctypes
conversion of every field of every array), and a PyTorch tensor costs another ~13 us in
``cuda.as_cuda_array``.  A memory-bound RoPE kernel on a 17 MB tensor runs in ~8 us, so a
dispatcher launch leaves the GPU idle most of the time.  Here the kernel is compiled once per
argument-type signature, its parameters are packed once into a ctypes buffer, and each launch
only patches the three data pointers and calls ``cuLaunchKernel`` (cuda-bindings) directly.

Under the Numba CUDA simulator (no driver) :func:`launch` calls the dispatcher instead: same
plan, same arguments, Python threads.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from numba import cuda, typeof, types
from numba.np.numpy_support import from_dtype

from ..errors import RopeInputError
from ..problem import census_problem
from ..target import SIMULATED


@cache
def jitted(fn, fastmath: bool = True):
    """One lazily compiled dispatcher per (kernel function, fastmath) pair.

    Kernel modules define plain Python functions and never decorate them with an eager
    signature: importing a kernel module must not need a CUDA driver (the census imports them in
    a driver-less child process) and must work under the simulator.
    """
    return cuda.jit(fastmath=fastmath)(fn)


def blocks_for(work_items: int, threads: int) -> int:
    """Enough blocks of ``threads`` threads to cover ``work_items`` (ceil division)."""
    return (work_items + threads - 1) // threads


def dim3(value) -> tuple[int, int, int]:
    if isinstance(value, tuple):
        return tuple(int(v) for v in value) + (1,) * (3 - len(value))
    return int(value), 1, 1


# The caller arrays of plain RoPE, in kernel order: x, out (float32), positions (int32).
ROPE_ARRAYS = (np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.int32))

# CUDA's grid limits (every GPU since compute capability 3.0): a plan past them is refused on
# the host with a clear error instead of failing inside the driver.
MAX_GRID = (2**31 - 1, 65535, 65535)


@dataclass(frozen=True, eq=False)  # eq=False: hashed by identity (plans are cached upstream)
class Plan:
    """Everything one launch needs besides the caller's arrays.

    The kernel receives, in order: the caller's arrays (each as a 1-D C-contiguous array),
    ``tables`` (host NumPy arrays; :func:`launch` passes a device copy made once), the device
    error word when ``errors`` is set, then ``scalars`` (NumPy scalars whose types are the
    kernel's argument types: ``np.uint64`` for index math, ``np.float32`` for floats).
    """

    kernel: object
    fastmath: bool
    grid: tuple
    block: tuple
    caller: tuple  # dtypes of the caller's arrays, in kernel order
    tables: tuple = ()
    scalars: tuple = ()
    errors: bool = False
    # Positions must be below this for the plan's stated accuracy (None: any int32).  Host
    # positions are checked against it; device positions are flagged by the kernel (``errors``).
    position_limit: int | None = None
    limit_reason: str = ""

    def __post_init__(self):
        object.__setattr__(self, "grid", dim3(self.grid))
        object.__setattr__(self, "block", dim3(self.block))
        for g, limit in zip(self.grid, MAX_GRID):
            if g > limit:
                raise RopeInputError(f"this input needs a grid of {self.grid} blocks; CUDA allows "
                                     f"at most {MAX_GRID}")

    def argtypes(self) -> tuple:
        """numba argument types of the kernel exactly as :func:`launch` passes its arguments."""
        out = [types.Array(from_dtype(np.dtype(d)), 1, "C") for d in self.caller]
        out += [types.Array(from_dtype(t.dtype), t.ndim, "C") for t in self.tables]
        if self.errors:
            out.append(types.Array(types.int32, 1, "C"))
        out += [typeof(s) for s in self.scalars]
        return tuple(out)

    def signature(self) -> str:
        """:meth:`argtypes` as numba signature text (see :func:`signature_text`)."""
        return signature_text(self.argtypes())


def signature_text(argtypes) -> str:
    """numba's signature string of argument types (``"void(float32[::1], uint64, ...)"``), the
    form a child process can receive as text and hand to ``cuda.compile_ptx``."""
    def one(t):
        if isinstance(t, types.Array):
            dims = [":"] * (t.ndim - 1) + ["::1"]
            return f"{t.dtype}[{', '.join(dims)}]"
        return str(t)

    return f"void({', '.join(one(t) for t in argtypes)})"


@dataclass(frozen=True)
class Variant:
    """A kernel variant as the rest of ropelab sees it.

    ``plan(problem, options, fastmath=, threads=, aligned=)`` checks nothing the public API has
    not checked, except the variant's own ``options`` (declared here with their defaults), and
    returns the :class:`Plan`.  ``aligned`` says whether every caller array starts on a 16-byte
    boundary (128-bit accesses need it).  ``census_options`` are the option sets whose kernels
    the PTX census compiles; ``check_options`` the ones ``python -m ropelab check`` runs.
    """

    name: str
    summary: str
    features: frozenset
    make_plan: object
    kernel: object  # the main kernel function (notebooks show its source)
    options: dict = field(default_factory=dict)
    census_options: tuple = ({},)
    check_options: tuple = ()
    census: object = None  # () -> [Plan]: overrides the census's default problems

    def plan(self, problem, options=None, *, fastmath=True, threads=None, aligned=True) -> Plan:
        return self.make_plan(problem, dict(options or {}), fastmath=fastmath, threads=threads,
                              aligned=aligned)

    def census_plans(self, fastmath: bool = True) -> list[Plan]:
        """The plans whose kernels the PTX census compiles (argument types included)."""
        if self.census is not None:
            return self.census()
        return [self.plan(census_problem(self.features), o, fastmath=fastmath)
                for o in self.census_options]


# ---- device-side state shared by all launches --------------------------------------------------

_state_lock = threading.Lock()
_device_tables: dict[int, tuple] = {}
_error_word = []


def device_table(host: np.ndarray):
    """The device copy of a host table, made once (keyed by identity; the host array is kept
    alive here so the key cannot be reused by another array)."""
    hit = _device_tables.get(id(host))
    if hit is None:
        with _state_lock:
            hit = _device_tables.get(id(host))
            if hit is None:
                hit = _device_tables[id(host)] = (host, cuda.to_device(host))
    return hit[1]


def error_word():
    """The device's int32[1] error word: 0, or an out-of-range position a kernel met.

    Allocated on first use.  Kernels store into it without reading it, and only
    :func:`read_errors` (a synchronization) reads and clears it.
    """
    if not _error_word:
        with _state_lock:
            if not _error_word:
                _error_word.append(cuda.to_device(np.zeros(1, np.int32)))
    return _error_word[0]


def read_errors() -> int:
    """Read and clear the error word (waits for all queued GPU work: a synchronization)."""
    if not _error_word:
        return 0
    word = _error_word[0]
    value = int(word.copy_to_host()[0])
    if value:
        word.copy_to_device(np.zeros(1, np.int32))
    return value


# ---- the launch ----------------------------------------------------------------------------------

def launch(plan: Plan, arrays, stream=0) -> None:
    """Launch ``plan`` on the caller's device arrays (1-D, C-contiguous) on ``stream``.

    ``arrays`` are numba/CuPy/PyTorch device arrays (anything with ``__cuda_array_interface__``);
    under the simulator, numba's simulated device arrays or array-like objects.  ``stream`` is a
    raw ``CUstream`` handle (an int; 0 is the legacy default stream).  No validation: the public
    functions have done it.
    """
    if SIMULATED:
        _launch_simulated(plan, arrays)
        return
    metas = [_cai_meta(a) for a in arrays]
    prepared = bind(plan, tuple((n, size) for _, n, size in metas))
    prepared.fire(tuple(p for p, _, _ in metas), stream)


def _launch_simulated(plan: Plan, arrays) -> None:
    tables = [device_table(t) for t in plan.tables]
    if plan.errors:
        tables.append(error_word())
    jitted(plan.kernel, plan.fastmath)[plan.grid, plan.block, 0](*arrays, *tables, *plan.scalars)


def _cai_meta(array) -> tuple[int, int, int]:
    """(data pointer, elements, itemsize) of a device array."""
    cai = array.__cuda_array_interface__
    n = 1
    for s in cai["shape"]:
        n *= int(s)
    return int(cai["data"][0]), n, np.dtype(cai["typestr"]).itemsize


_bound: dict = {}


def bind(plan: Plan, caller: tuple) -> "Bound":
    """The compiled, parameter-packed form of ``plan`` for caller arrays of ``(elements,
    itemsize)``; cached."""
    key = (plan, caller)
    hit = _bound.get(key)
    if hit is None:
        hit = Bound(plan, caller)
        if len(_bound) > 512:  # plans are cached upstream; this only bounds a pathological caller
            _bound.clear()
        _bound[key] = hit
    return hit


_CTYPE = {np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.int64): ctypes.c_int64,
          np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.int32): ctypes.c_int32,
          np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


def _array_params(ptr: int, shape, strides, itemsize: int) -> list:
    """numba's flattened array argument: meminfo, parent, nitems, itemsize, data, shape.., strides..

    The order and widths are numba's array data model for kernel arguments (see
    ``numba.cuda.dispatcher._Kernel._prepare_args``); tests check the count against the model.
    """
    n = 1
    for s in shape:
        n *= int(s)
    return ([ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_ssize_t(n), ctypes.c_ssize_t(itemsize),
             ctypes.c_void_p(ptr)] + [ctypes.c_ssize_t(int(s)) for s in shape]
            + [ctypes.c_ssize_t(int(s)) for s in strides])


def pack_params(plan: Plan, caller: tuple, table_arrays) -> tuple[list, list]:
    """ctypes values of every kernel parameter, and the data-pointer slots of the caller arrays.

    Pure host work (no driver): the tests compare the layout with numba's data model.
    """
    values, slots = [], []
    for n, itemsize in caller:
        fields = _array_params(0, (n,), (itemsize,), itemsize)
        slots.append(fields[4])
        values += fields
    for t in table_arrays:
        cai = t.__cuda_array_interface__
        shape = tuple(int(s) for s in cai["shape"])
        itemsize = np.dtype(cai["typestr"]).itemsize
        strides = cai.get("strides") or _c_strides(shape, itemsize)
        values += _array_params(int(cai["data"][0]), shape, strides, itemsize)
    for s in plan.scalars:
        values.append(_CTYPE[np.asarray(s).dtype](s))
    return values, slots


def _c_strides(shape, itemsize) -> tuple:
    out, step = [], itemsize
    for s in reversed(shape):
        out.append(step)
        step *= int(s)
    return tuple(reversed(out))


class LaunchError(RuntimeError):
    """cuLaunchKernel failed."""


class Bound:
    """A plan compiled for one argument signature, with its parameters packed once.

    :meth:`fire` patches the caller arrays' data pointers into the packed buffer and calls
    ``cuLaunchKernel``: a few microseconds of host time, no allocation, no synchronization, so
    it can be captured in a CUDA graph.  The driver copies the parameters at launch, so the
    buffer may be patched again as soon as the call returns; a lock keeps two threads from
    patching it at once.
    """

    def __init__(self, plan: Plan, caller: tuple):
        from cuda.bindings import driver as cu

        self.plan = plan
        tables = [device_table(t) for t in plan.tables]
        if plan.errors:
            tables.append(error_word())
        kernel = jitted(plan.kernel, plan.fastmath).compile(plan.argtypes())
        self.handle = kernel._codelibrary.get_cufunc().handle
        self._values, self._slots = pack_params(plan, caller, tables)
        self._tables = tables  # keep the device tables referenced as long as the pointers are
        self._ptrs = (ctypes.c_void_p * len(self._values))(
            *[ctypes.addressof(v) for v in self._values])
        self._addr = ctypes.addressof(self._ptrs)
        self._lock = threading.Lock()
        self._cu = cu
        self._launch = cu.cuLaunchKernel
        self._args = (plan.grid[0], plan.grid[1], plan.grid[2], plan.block[0], plan.block[1],
                      plan.block[2], 0)

    def fire(self, ptrs, stream) -> None:
        with self._lock:
            for slot, p in zip(self._slots, ptrs):
                slot.value = p
            err, = self._launch(self.handle, *self._args, stream, self._addr, 0)
        if err:
            self._retry(err, ptrs, stream)

    def _retry(self, err, ptrs, stream) -> None:
        # A thread that never used numba has no current context: make numba's (the primary
        # context, which PyTorch and CuPy share) current and try once more.
        if err == self._cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            cuda.current_context()
            with self._lock:
                for slot, p in zip(self._slots, ptrs):
                    slot.value = p
                err, = self._launch(self.handle, *self._args, stream, self._addr, 0)
        if err:
            raise LaunchError(f"cuLaunchKernel failed for {getattr(self.plan.kernel, '__name__', '?')}"
                              f" with {err!r} (grid {self.plan.grid}, block {self.plan.block})")
