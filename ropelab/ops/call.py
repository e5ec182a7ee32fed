"""The one call engine behind the public ops (``ropelab.rope``, ``ropelab.rope_qk``,
``ropelab.fused_qknorm_rope`` and its backward, ``ropelab.fused_qknorm_rope_backward``).

An op (:mod:`ropelab.ops.rope`, :mod:`ropelab.ops.fused`) owns its signature, its checks and
its plan; everything after that is here, written once:

* **the cache key of a call shape** (:func:`fast`): the op's scalar arguments with their types
  (``4.0 == 4`` and ``True == 1`` in Python, but one of them is refused), and for each array its
  type, its metadata key (shape, strides/contiguity, dtype, device) and ``pointer % 16``.  Every
  decision validation makes from an address (a refusal of a misaligned 16-bit ``qkv``, the
  choice of 128-bit accesses) depends only on ``pointer % 16`` of each array, so a key that
  carries all of them never replays a decision made for another alignment;
* **the fast path**: a hit reads the arrays' pointers, checks overlaps, picks the stream and
  fires the pre-bound launch.  No validation, no allocation besides a missing ``out``, no
  synchronization (CUDA-graph capturable);
* **the dispatch** of a validated call: host arrays are copied in and out, simulator arrays are
  launched through numba's dispatcher, device arrays through a :class:`DeviceCall` that is
  remembered under the key;
* **the stream** (:mod:`ropelab.ops.streams`) and the opt-in synchronous check of device
  positions.

Adding an option to an op is a local change in the op: check it where the op checks its
arguments, and add it to the op's scalar tuple that it passes to :func:`fast` (with its type,
through :func:`typed`); nothing here changes.  Adding an array argument: one more entry in the
op's array tuple and its :class:`Slot`.

Pointers are not part of the key: a new tensor of the same shape hits the same entry.

An op that allocates its outputs and runs several kernels (the fused backward) remembers a
:class:`SequenceCall` through :func:`launch_sequence`: an output maker and a list of bound
launches, fired in order on one stream.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from numba import cuda

from ..errors import RopeDeviceError
from ..kernels.launch import bind, launch, on_table_evicted, read_errors
from ..kernels.plan import Plan
from ..target import SIMULATED
from ..validate import check_position_values, fail
from . import streams
from .arrays import FAST_META, ArrayInfo, device_view, register_fast_types

MAX_ENTRIES = 1024  # a program cycling through more call shapes than this re-validates

_entries: dict = {}
_lock = threading.Lock()

MISS = object()  # what :func:`fast` returns when the call shape is not remembered


def typed(values: tuple) -> tuple:
    """``values`` with their types, for cache keys."""
    return values + tuple(map(type, values))


def fast(scalars: tuple, arrays: tuple, stream):
    """Run a remembered call shape: ``(result, None)``; else ``(MISS, key)`` (``key`` is None
    when the call cannot be remembered: a host or simulator array, an unhashable argument)."""
    # The hot path of every repeated public call: the type and its metadata reader are read
    # once per array (ropelab.measure.bench.host_path times this function on the CPU).
    get_meta = FAST_META.get
    ptrs = []
    parts = [scalars]
    for a in arrays:
        if a is None:
            ptrs.append(0)
            parts.append(None)
            continue
        kind = type(a)
        meta = get_meta(kind)
        if meta is None:
            return MISS, None
        p, k = meta(a)
        ptrs.append(p)
        parts.append((kind, k, p & 15))
    key = tuple(parts)
    try:
        entry = _entries.get(key)
    except TypeError:  # an unhashable argument (a dict ``scaling``, say): always validate
        return MISS, None
    if entry is None:
        return MISS, key
    return entry.run(arrays, ptrs, stream), None


def remember(key, entry) -> None:
    try:
        hash(key)
    except TypeError:
        return
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[key] = entry


def clear() -> None:
    """Forget every validated call (tests use it to force the validating path)."""
    with _lock:
        _entries.clear()


def _forget_calls_using(bound_ids: set) -> None:
    # A table copy was evicted (kernels.launch's LRU): drop the calls bound to it, so the
    # device memory is freed and a later call re-validates and re-uploads.
    with _lock:
        for key in [k for k, e in _entries.items() if id(e.bound) in bound_ids]:
            del _entries[key]


on_table_evicted(_forget_calls_using)


_arange = []


def arange_positions(tokens: int):
    """Device int32 ``0 .. tokens-1`` for ``positions=None``, uploaded once and grown on demand
    (a slice of one buffer: the first ``tokens`` entries of a longer arange are the same).

    Outgrown buffers are kept, never freed: a cached call or a captured CUDA graph may still
    hold their address.
    """
    if not _arange or _arange[-1].shape[0] < tokens:
        with _lock:
            if not _arange or _arange[-1].shape[0] < tokens:
                size = max(tokens, 4096, 2 * (_arange[-1].shape[0] if _arange else 0))
                _arange.append(cuda.to_device(np.arange(size, dtype=np.int32)))
    return _arange[-1][:tokens]


def check_device_positions(positions, plan: Plan) -> None:
    """The opt-in synchronous check of device positions (``check_positions=True``).

    Synchronizes the whole context first: the positions may have been written by a kernel on
    any stream (a PyTorch side stream included), which a copy on the legacy stream alone would
    not wait for.
    """
    if SIMULATED:
        host = positions._ary if hasattr(positions, "_ary") else np.asarray(positions)
    else:
        cuda.synchronize()
        host = np.asarray(cuda.as_cuda_array(positions).copy_to_host())
    check_position_values(host, plan.position_limit, plan.limit_reason)


# ---- one argument array, as the engine sees it ----------------------------------------------------

@dataclass
class Slot:
    """One array argument of a kernel, in kernel order.

    ``obj`` is what the caller passed (None: the op fills it, e.g. default positions),
    ``info`` its metadata, ``view`` the dtype the kernel reads it as (bfloat16 as uint32 words),
    ``host_dtype`` the dtype a host array is uploaded as.
    """

    name: str
    obj: object
    info: ArrayInfo | None
    view: object = None
    host_dtype: object = None

    def on_device(self):
        """A 1-D device array for :func:`ropelab.kernels.launch.launch` (uploads host data)."""
        if self.info is None or not self.info.on_device:
            data = np.ascontiguousarray(self.obj, dtype=self.host_dtype).reshape(-1)
            dev = cuda.to_device(data)
            return dev.view(self.view) if self.view is not None else dev
        return device_view(self.obj, self.info, self.view)


def launch_slots(plan: Plan, slots) -> list:
    """The host and simulator route: every slot as a device array, one launch; returns the
    device arrays so the op can copy results back (this route synchronizes on a GPU)."""
    views = [s.on_device() for s in slots]
    launch(plan, views)
    return views


# ---- a validated call on device arrays -------------------------------------------------------------

class DeviceCall:
    """A validated call shape on device arrays: launch again on new pointers.

    ``extents`` are the byte spans of the slots; ``pairs`` the overlap rules ``(written slot,
    read slot, same_start_ok, message)`` (``same_start_ok``: in place on an identical layout; or
    a function ``(written pointer, read pointer) -> bool`` saying when overlapping spans touch
    no common byte, e.g. q and k as column slices of one qkv, asked only when the spans overlap);
    ``defaults`` pointers for slots the caller left None; ``alloc`` ``(slot, make, ptr_of)`` for
    an output the call allocates when absent; ``result`` the slot returned.
    """

    __slots__ = ("bound", "extents", "_pairs", "_checks", "defaults", "alloc", "result",
                 "current", "before")

    @property
    def pairs(self) -> tuple:
        return self._pairs

    @pairs.setter
    def pairs(self, rules) -> None:
        # Each rule's same_start_ok becomes a function once here, so a launch never asks
        # callable() (the rule is consulted only when two spans overlap, e.g. every in-place call).
        self._pairs = tuple(rules)
        self._checks = tuple((w, r, same_ok if callable(same_ok) else
                              _same_start if same_ok else _never, message)
                             for w, r, same_ok, message in self._pairs)

    def run(self, arrays, ptrs, stream):
        result = arrays[self.result]
        if self.alloc is not None and arrays[self.alloc[0]] is None:
            slot, make, ptr_of = self.alloc
            result = make(arrays[0])
            ptrs[slot] = ptr_of(result)
            checks = ()  # fresh memory overlaps nothing
        else:
            checks = self._checks
        self._prepare(arrays, ptrs, checks)
        self.bound.fire(ptrs, self.current() if stream is None else streams.resolve(stream))
        return result

    def _prepare(self, arrays, ptrs, checks) -> None:
        """Fill the defaults' pointers, refuse overlapping spans, run the ``before`` hook."""
        for slot, pointer in self.defaults:
            if arrays[slot] is None:
                ptrs[slot] = pointer
        ext = self.extents
        for w, r, disjoint, message in checks:
            pw, pr = ptrs[w], ptrs[r]
            if (arrays[r] is not None and pw < pr + ext[r] and pr < pw + ext[w]
                    and not disjoint(pw, pr)):
                fail(message)
        if self.before is not None:
            self.before(arrays)


class SequenceCall(DeviceCall):
    """A validated call shape that allocates its outputs and fires several launches in order
    (the fused backward: the main kernel, then the reduction of its partial sums).

    ``outputs(arrays, handle) -> (result, pointers)`` allocates this call's outputs through the
    caller's library and queues any zero fill on ``handle`` (no host sync); their pointers are
    appended after the caller arrays'.  ``launches`` are ``(bound, indices)``: each bound launch
    gets the pointers at ``indices`` of that list, all on one stream, in order.
    """

    __slots__ = ("launches", "outputs")

    def run(self, arrays, ptrs, stream):
        handle = self.current() if stream is None else streams.resolve(stream)
        self._prepare(arrays, ptrs, self._checks)
        result, fresh = self.outputs(arrays, handle)
        ptrs = list(ptrs) + list(fresh)  # fresh memory overlaps nothing
        for bound, indices in self.launches:
            bound.fire([ptrs[i] for i in indices], handle)
        return result


def launch_sequence(key, slots, launches, outputs, *, handle, extents=(), pairs=()):
    """The device route of a validated call that allocates outputs and fires several plans:
    ``launches`` are ``(plan, caller_sizes, indices)`` (see :class:`SequenceCall`).  Remembers
    the call under ``key`` and runs it once on this call's arrays (so the first call and every
    cached one take the same steps)."""
    register_fast_types()
    entry = SequenceCall()
    entry.launches = tuple((bind(plan, sizes), tuple(indices)) for plan, sizes, indices in launches)
    entry.bound = entry.launches[0][0]  # what the table-eviction listener looks at
    entry.outputs = outputs
    entry.extents, entry.pairs, entry.defaults = tuple(extents), tuple(pairs), ()
    entry.alloc, entry.result, entry.before = None, 0, None
    entry.current = streams.current_for(slots[0].info.kind, slots[0].obj)
    arrays = tuple(s.obj for s in slots)
    ptrs = [s.info.ptr for s in slots]
    result = entry.run(arrays, ptrs, None if handle is None else streams.RawStream(handle))
    if key is not None:
        remember(key, entry)
    return result


def zero_fill(pointer: int, words: int, handle) -> None:
    """Queue a zero fill of ``words`` 32-bit words at ``pointer`` on stream ``handle``
    (``cuMemsetD32Async``: no host sync, capturable in a CUDA graph)."""
    from cuda.bindings import driver as cu

    err, = cu.cuMemsetD32Async(pointer, 0, words, handle)
    if err == cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:  # a thread that never used numba (as
        cuda.current_context()  # Bound.fire): make the primary context current, try once more
        err, = cu.cuMemsetD32Async(pointer, 0, words, handle)
    if err:
        raise RuntimeError(f"cuMemsetD32Async failed with {err!r}")


def _same_start(written: int, read: int) -> bool:
    return written == read  # in place on an identical layout


def _never(written: int, read: int) -> bool:
    return False


def alloc_like(info: ArrayInfo):
    """``(x -> new device array like x, array -> pointer)`` for the library ``x`` came from."""
    if info.kind == "torch":
        import torch

        return torch.empty_like, lambda t: t.data_ptr()
    if info.kind == "cupy":
        import cupy

        return cupy.empty_like, lambda a: a.data.ptr
    shape, dtype = info.shape, info.dtype
    return (lambda x: cuda.device_array(shape, dtype),
            lambda a: int(a.__cuda_array_interface__["data"][0]))


def launch_device(key, plan: Plan, slots, caller_sizes, *, handle, extents, pairs=(),
                  defaults=(), alloc=None, result=0, before=None):
    """The device route of a validated call: bind the plan, remember the call under ``key``
    (when every array was on the device), and launch it on this call's arrays.

    ``slots`` are the kernel's arrays in order; a host array among them (small arrays only:
    positions, weights) is uploaded for this call, and the call is then not remembered (a hit
    would skip the upload).  ``handle``: the resolved ``stream=``, or None for the default.
    """
    register_fast_types()
    call = DeviceCall()
    call.bound = bind(plan, caller_sizes)
    call.extents, call.pairs, call.defaults = tuple(extents), tuple(pairs), tuple(defaults)
    call.alloc, call.result, call.before = alloc, result, before
    call.current = streams.current_for(slots[0].info.kind, slots[0].obj)
    uploads = [s.on_device() if s.info is not None and not s.info.on_device else None
               for s in slots]  # referenced until the launch is queued
    if key is not None and all(u is None for u in uploads):
        remember(key, call)
    ptrs = [int(u.__cuda_array_interface__["data"][0]) if u is not None
            else s.info.ptr if s.info is not None else 0 for s, u in zip(slots, uploads)]
    out = slots[result].obj
    if alloc is not None and out is None:
        slot, make, ptr_of = alloc
        out = make(slots[0].obj)
        ptrs[slot] = ptr_of(out)
    for slot, pointer in defaults:
        if slots[slot].obj is None:
            ptrs[slot] = pointer
    call.bound.fire(ptrs, handle if handle is not None else call.current())
    del uploads
    return out


def check_errors() -> None:
    """Raise :class:`ropelab.RopeDeviceError` if a kernel met an out-of-range device position.

    Kernels with a position limit (``freq_table``'s cos/sin cache and ``reduce_angle``, the
    fused kernel's cache) do not stop on one: they write NaN for that token and store the
    position in a device error word.  This synchronizes the whole context (so kernels on every
    stream, PyTorch side streams included, have finished), then reads and clears the word: call
    it where a synchronization is acceptable, e.g. once per step.
    """
    value = read_errors()
    if value:
        raise RopeDeviceError(f"a kernel met position {value}, outside the range its mode is "
                              f"accurate for (see the variant's position limit); the affected "
                              f"tokens were written as NaN")
