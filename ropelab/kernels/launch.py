"""Launching a :class:`~ropelab.kernels.plan.Plan`: the compiled, pre-packed :class:`Bound`,
the device copies of the plans' tables, and the device error word.

Every launch goes through here: the public functions (through :mod:`ropelab.ops.call`), the
benchmark's kernel-only rows, the checks and the notebooks' thread tracer.

Why not just ``kernel[grid, block, stream](*args)``?  numba's dispatcher spends 30-60 us of host
time per launch (type inference of every argument, ``__cuda_array_interface__`` parsing, ctypes
conversion of every field of every array), and a PyTorch tensor costs another ~13 us in
``cuda.as_cuda_array``.  A memory-bound RoPE kernel on a 17 MB tensor runs in ~8 us, so a
dispatcher launch leaves the GPU idle most of the time.  Here the kernel is compiled once per
argument-type signature, its parameters are packed once into a ctypes buffer, and each launch
only patches the caller arrays' data pointers and calls ``cuLaunchKernel`` (cuda-bindings).

Under the Numba CUDA simulator (no driver) :func:`launch` calls the dispatcher instead: same
plan, same arguments, Python threads.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
import weakref
from collections import OrderedDict

import numpy as np
from numba import cuda

from ..target import SIMULATED
from .plan import Plan, jitted

# ---- device copies of the plans' tables (cos/sin caches, frequency tables) ---------------------

# How many device copies of host tables stay on the GPU.  A plan has at most two tables, so 16
# holds the tables of 8 different (frequencies, max_positions) choices; the least recently used
# copy is dropped first.  Keyed by the table's *value* (dtype, shape, content digest), so a table
# rebuilt with the same content reuses its copy and a new id() never leaks one.
MAX_TABLES = 16

_state_lock = threading.RLock()
_tables: OrderedDict = OrderedDict()  # table key -> device array
_digests: dict = {}  # id(host) -> (weakref to host, key): each live host table is hashed once
_evict_listeners: list = []


def table_key(host: np.ndarray) -> tuple:
    """The value key of a host table: ``(dtype, shape, blake2b digest of its bytes)``."""
    hit = _digests.get(id(host))
    if hit is not None and hit[0]() is host:
        return hit[1]
    digest = hashlib.blake2b(np.ascontiguousarray(host).data, digest_size=16).digest()
    key = (host.dtype.str, host.shape, digest)
    ident = id(host)

    def forget(ref, ident=ident):
        entry = _digests.get(ident)
        if entry is not None and entry[0] is ref:
            del _digests[ident]

    _digests[ident] = (weakref.ref(host, forget), key)
    return key


def device_table(host: np.ndarray):
    """The device copy of a host table (uploaded once per value, kept in an LRU of
    :data:`MAX_TABLES`).  Evicting a copy also forgets every :class:`Bound` that points at it and
    tells the listeners (:func:`on_table_evicted`), so nothing cached keeps the memory alive.
    A CUDA graph captured with that table is not tracked: re-capture after changing tables."""
    key = table_key(host)
    with _state_lock:
        hit = _tables.get(key)
        if hit is not None:
            _tables.move_to_end(key)
            return hit
        hit = _tables[key] = cuda.to_device(host)
        while len(_tables) > MAX_TABLES:
            old, _ = _tables.popitem(last=False)
            _forget_bounds_of(old)
    return hit


def live_tables() -> int:
    """How many table copies ropelab holds on the device now."""
    return len(_tables)


def on_table_evicted(listener) -> None:
    """Register ``listener(bounds)``, called with the set of :class:`Bound` objects dropped
    because a table they use was evicted (the call cache forgets the calls holding them)."""
    _evict_listeners.append(listener)


def _forget_bounds_of(key) -> None:
    dropped = {k: b for k, b in _bound.items() if key in b.table_keys}
    for k in dropped:
        del _bound[k]
    if dropped:
        gone = set(map(id, dropped.values()))
        for listener in _evict_listeners:
            listener(gone)


# ---- the device error word -----------------------------------------------------------------------

_error_word = []


def error_word():
    """The device's int32[2] error word: ``[0]`` 0 or an out-of-range position a kernel met,
    ``[1]`` 0 or a cache slot past the end of a paged KV cache (the serving kernel's).

    Allocated on first use.  Kernels store into it without reading it, and only
    :func:`read_errors` (a synchronization) reads and clears it.
    """
    if not _error_word:
        with _state_lock:
            if not _error_word:
                _error_word.append(cuda.to_device(np.zeros(2, np.int32)))
    return _error_word[0]


def read_errors() -> tuple[int, int]:
    """Read and clear the error word: ``(position, slot)``, each 0 when none was met.

    It first synchronizes the whole context (``cuCtxSynchronize``), so kernels on *any* stream
    have finished, a PyTorch side stream included: a copy on the legacy stream alone does not
    wait for a non-blocking stream.
    """
    if not _error_word:
        return 0, 0
    word = _error_word[0]
    cuda.synchronize()
    position, slot = (int(v) for v in word.copy_to_host())
    if position or slot:
        word.copy_to_device(np.zeros(2, np.int32))
    return position, slot


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
        with _state_lock:
            if len(_bound) > 512:  # plans are cached upstream; this bounds a pathological caller
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
        self.table_keys = frozenset(table_key(t) for t in plan.tables)
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
