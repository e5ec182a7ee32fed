"""The one call engine behind the public ops (``ropelab.rope``, ``ropelab.rope_qk``,
``ropelab.fused_qknorm_rope`` and its backward).

An op owns its signature, its checks and its plans, and describes the call it validated as a
:class:`~ropelab.ops.slots.Call`: the plans, and each array with its role.  Everything after
that is here, written once:

* **the cache key of a call shape** (:func:`fast`): the op's scalar arguments with their types
  (``4.0 == 4`` and ``True == 1`` in Python, but one of them is refused), and for each array its
  type, its metadata key (shape, strides, dtype, device) and ``pointer % 16``.  Every decision
  validation makes from an address (a refusal of a misaligned 16-bit ``qkv``, the choice of
  128-bit accesses) depends only on ``pointer % 16`` of each array, so a key that carries all
  of them never replays a decision made for another alignment.  Pointers are not part of the
  key: a new tensor of the same shape hits the same entry;
* **what every call checks** (:func:`run`): the stream, read-only outputs, the overlap rules
  derived from the roles (:func:`ropelab.ops.slots.overlap_rules`), and the position policy
  (:func:`ropelab.validate.check_position_values`): host positions are checked on the host,
  device positions only with ``check_positions=True``, absent positions are ``0 .. tokens-1``;
* **the routes**: host and simulator arrays are copied in and out
  (:mod:`ropelab.ops.host_route`); device arrays run a :class:`DeviceCall`, which the first
  call builds, remembers under the key and runs exactly as every later call does: check the
  overlaps on the new pointers, make the outputs, pick the stream, fire the pre-bound launches.
  No validation, no synchronization: capturable in a CUDA graph.

Adding an option to an op is a local change in the op: check it where the op checks its
arguments and add it to the scalar tuple it passes to :func:`fast`; nothing here changes.
Adding an array argument: one more entry in the op's array tuple and its
:class:`~ropelab.ops.slots.Slot` (with its role: nothing here changes either).
"""

from __future__ import annotations

import threading

import numpy as np
from numba import cuda

from ..errors import RopeDeviceError
from ..kernels.launch import bind, on_table_evicted, read_errors
from ..target import SIMULATED
from ..validate import check_position_values, check_positions_array, fail
from . import memory, streams
from .arrays import FAST_META, host_array, register_fast_types
from .host_route import made_here, run_here
from .memory import arange_positions
from .slots import (INT32, OUT, POSITIONS, SCRATCH, WRITTEN, Call, kernel_elements,
                    kernel_views, overlap_rules, refuse_overlaps)

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


def remembered() -> list:
    """The remembered call shapes, ``(key, entry)``, oldest first (tests and benches read them)."""
    with _lock:
        return list(_entries.items())


def clear() -> None:
    """Forget every validated call (tests use it to force the validating path)."""
    with _lock:
        _entries.clear()


def _forget_calls_using(bound_ids: set) -> None:
    # A table copy was evicted (kernels.launch's LRU): drop the calls bound to it, so the
    # device memory is freed and a later call re-validates and re-uploads.
    with _lock:
        for key in [k for k, e in _entries.items()
                    if any(id(b) in bound_ids for b in e.bounds)]:
            del _entries[key]


on_table_evicted(_forget_calls_using)


def check_device_positions(positions, limit, reason: str) -> None:
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
    check_position_values(host, limit, reason)


# ---- a validated call ----------------------------------------------------------------------------

def run(call: Call, key):
    """Check what every call checks, then run ``call`` on its route (device arrays: remembered
    under ``key``, the op's fast-path key, when every array is on the device)."""
    if call.stream is not None:
        streams.resolve(call.stream)  # refused before anything runs
    for s in call.slots:
        if s.role in WRITTEN and s.info is not None and s.info.readonly:
            fail(f"{s.name} is read-only; the kernel writes it")
    p = call.index(POSITIONS)
    pos = call.slots[p]
    if pos.info is not None:
        check_positions_array(pos.info, call.tokens)
    first = call.slots[0].info
    here = not first.on_device or first.kind == "simulator" or SIMULATED
    if pos.obj is None:
        if call.limit is not None and call.tokens > call.limit:
            fail(f"position {call.tokens - 1} is out of range: {call.reason}")
    elif not pos.info.on_device:
        check_position_values(np.asarray(host_array(pos.obj, pos.info)), call.limit,
                              call.reason)
    elif call.check_positions and here and call.tokens:
        check_device_positions(pos.obj, call.limit, call.reason)
    values = [s.obj for s in call.slots]
    if call.tokens == 0 or here:
        # checked like any call, overlaps too (two caches in one buffer are a bad call with or
        # without tokens); with no token there is nothing to launch
        starts = [s.info.byte_range()[0] if s.info is not None else 0 for s in call.slots]
        refuse_overlaps(overlap_rules(call, range(len(call.slots))), starts)
    if here:
        if call.tokens == 0:
            return call.returned(made_here(call, values, first.kind == "simulator"))
        return run_here(call, kernel_views(call))
    if call.tokens == 0:
        return call.returned(_made_on_device(call, values))
    return _first_device_call(call, key)


def _made_on_device(call: Call, values: list) -> list:
    """``values`` with the outputs and buffers the engine makes, in the caller's library."""
    for i, s in enumerate(call.slots):
        if s.role == OUT and s.obj is None:
            source = call.slots[s.source]
            values[i] = memory.maker(source.info)[0](source.obj)
        elif s.role == SCRATCH and s.within is None:
            make, source = memory.scratch_maker(call.slots, s, s.zero)
            values[i] = make(call.slots[source].obj)
    for i, s in enumerate(call.slots):
        if s.within is not None:
            base, offset = s.within
            values[i] = values[base][offset:offset + s.size]
    return values


def _first_device_call(call: Call, key):
    """Build the call's :class:`DeviceCall`, remember it (unless a small host array had to be
    uploaded for this call: a hit would skip the upload) and run it as a cached call runs."""
    views = kernel_views(call)
    uploads = {}  # host positions or weights beside device data, referenced until the launch
    for i, s in enumerate(call.slots):
        if s.info is not None and not s.info.on_device:
            host = host_array(s.obj, s.info)
            data = np.ascontiguousarray(host, dtype=INT32 if s.role == POSITIONS else None)
            uploads[i] = cuda.to_device(data.reshape(-1).view(views[i]))
    present = [i for i, s in enumerate(call.slots) if s.info is not None and i not in uploads]
    ptrs = [memory.cai_pointer(uploads[i]) if i in uploads else s.info.ptr if s.info else 0
            for i, s in enumerate(call.slots[:call.callers])]
    rules = overlap_rules(call, present)
    refuse_overlaps(rules, ptrs)  # before anything compiles (the entry checks every call again)
    entry = DeviceCall(call, views, rules)
    if key is not None and not uploads:
        remember(key, entry)
    return entry.run(tuple(s.obj for s in call.slots[:call.callers]), ptrs, call.stream)


class DeviceCall:
    """A validated call shape on device arrays, everything decided once: the bound launches,
    the overlap rules, which outputs and buffers to make (and how), the default positions'
    pointer.  ``run(arrays, pointers, stream)`` touches only the new pointers."""

    __slots__ = ("launches", "single", "bounds", "rules", "made", "extra", "derived", "zeros",
                 "defaults", "check", "current", "result", "returns_slot", "made_out", "run")

    def __init__(self, call: Call, views: list, rules: tuple):
        register_fast_types()
        slots = call.slots
        like = slots[0]
        sizes = [None if v is None else (kernel_elements(call, s, v), v.itemsize)
                 for s, v in zip(slots, views)]
        identity = tuple(range(len(slots)))
        self.launches = tuple((bind(plan, tuple(sizes[i] for i in indices)),
                               None if tuple(indices) == identity else tuple(indices))
                              for plan, indices in call.launches)
        self.bounds = tuple(b for b, _ in self.launches)  # what the table-eviction listener reads
        self.single = self.bounds[0] if len(self.launches) == 1 and \
            self.launches[0][1] is None else None
        self.rules = rules
        # The caller's arrays come first (call.callers of them); what the engine alone makes
        # follows, with pointers appended on every call.
        self.extra = [0] * (len(slots) - call.callers)
        made = []
        for i, s in enumerate(slots):
            if s.role == OUT and s.obj is None:
                make, ptr_of = memory.maker(slots[s.source].info)
            elif s.role == SCRATCH and s.within is None:
                make, source = memory.scratch_maker(slots, s, False)
                ptr_of = memory.maker(slots[source].info)[1]
            else:
                continue
            made.append((i, source if s.role == SCRATCH else s.source, make, ptr_of, s.align,
                         f"the allocator returned {s.name} at an address not {s.align}-byte "
                         f"aligned, which this call shape's vector accesses need; call "
                         f"ropelab.ops.call.clear()"))
        self.made = tuple(made)
        self.derived = tuple((i, s.within[0], 4 * s.within[1])
                             for i, s in enumerate(slots) if s.within is not None)
        if any(s.zero and s.source_dtype for s in slots):  # zero_fill counts float32 words
            raise ValueError("a source_dtype buffer is zeroed only where nothing launches")
        self.zeros = tuple((i, s.size) for i, s in enumerate(slots) if s.role == SCRATCH
                           and s.zero and s.within is None)
        p = call.index(POSITIONS)
        self.defaults = ((p, memory.cai_pointer(arange_positions(call.tokens))),) \
            if slots[p].obj is None else ()
        self.check = (p, call.limit, call.reason) if call.check_positions and slots[p].obj \
            is not None else None
        self.current = streams.current_for(like.info.kind, like.obj)
        self.result = call.result
        self.returns_slot = isinstance(call.result, int)
        # What a cached call does, chosen once: the two common shapes (every array given, or
        # only the returned output made) take short paths with the same steps.
        simple = self.single is not None and self.returns_slot and self.check is None
        one_out = (simple and len(made) == 1 and not self.extra and not made[0][4]
                   and call.result == made[0][0])
        self.made_out = made[0][:4] if one_out else None
        self.run = (self._run_given if simple and not made and not self.defaults else
                    self._run_made_out if one_out else self._run_any)

    def _run_any(self, arrays, ptrs, stream):
        """Every step a cached call may take, in order: stream, overlaps, outputs and buffers
        (zero fills queued), default positions, the opt-in position check, the launches."""
        handle = self.current() if stream is None else streams.resolve(stream)
        if self.rules:
            refuse_overlaps(self.rules, ptrs)
        values = self._made(arrays, ptrs, handle) if self.made else arrays
        if self.defaults:
            for slot, pointer in self.defaults:
                ptrs[slot] = pointer
        if self.check is not None:
            slot, limit, reason = self.check
            check_device_positions(arrays[slot], limit, reason)
        if self.single is not None:  # one launch of the slots in order: the common case
            self.single.fire(ptrs, handle)
        else:
            for bound, indices in self.launches:
                bound.fire(ptrs if indices is None else [ptrs[i] for i in indices], handle)
        return values[self.result] if self.returns_slot else self.result(values)

    def _run_given(self, arrays, ptrs, stream):
        """The common call on the caller's arrays only: check, launch once, return one of them."""
        handle = self.current() if stream is None else streams.resolve(stream)
        if self.rules:
            refuse_overlaps(self.rules, ptrs)
        self.single.fire(ptrs, handle)
        return arrays[self.result]

    def _run_made_out(self, arrays, ptrs, stream):
        """The common ``out=None`` call: make the one output, launch once, return it."""
        handle = self.current() if stream is None else streams.resolve(stream)
        if self.rules:
            refuse_overlaps(self.rules, ptrs)
        slot, source, make, ptr_of = self.made_out
        out = make(arrays[source])
        ptrs[slot] = ptr_of(out)
        for slot, pointer in self.defaults:  # positions=None: 0 .. tokens-1
            ptrs[slot] = pointer
        self.single.fire(ptrs, handle)
        return out

    def _made(self, arrays, ptrs, handle) -> list:
        """Make this call's outputs and buffers; ``ptrs`` gets their pointers."""
        values = [*arrays, *self.extra]
        if self.extra:
            ptrs.extend(self.extra)
        for slot, source, make, ptr_of, align, misaligned in self.made:
            obj = make(values[source])
            p = ptr_of(obj)
            if align and p % align:
                fail(misaligned)
            values[slot], ptrs[slot] = obj, p
        for slot, base, offset in self.derived:  # a part of a buffer made above: its pointer
            ptrs[slot] = ptrs[base] + offset
        for slot, words in self.zeros:  # queued on the launch stream: no host sync
            memory.zero_fill(ptrs[slot], words, handle)
        return values


def check_errors() -> None:
    """Raise :class:`ropelab.RopeDeviceError` if a kernel met an out-of-range device position.

    Kernels with a position limit (``freq_table``'s cos/sin cache and ``reduce_angle``, the
    fused kernel's cache) do not stop on one: they write NaN for that token and store the
    position in a device error word.  This synchronizes the whole context (so kernels on every
    stream, PyTorch side streams included, have finished), then reads and clears the word: call
    it where a synchronization is acceptable, e.g. once per step.  The serving kernel
    (``ropelab.fused_qknorm_rope_kv``) records a device slot past its cache the same way (its
    token's K and V are not written), and this raises for it too.
    """
    position, slot = read_errors()
    if position:
        raise RopeDeviceError(f"a kernel met position {position}, outside the range its mode is "
                              f"accurate for (see the variant's position limit); the affected "
                              f"tokens were written as NaN")
    if slot:
        raise RopeDeviceError(f"fused_qknorm_rope_kv met slot {slot} (or more), past the end of "
                              f"its KV cache (num_blocks * block_size slots); those tokens' K "
                              f"and V were not written")
