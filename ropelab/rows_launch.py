"""Launching the rope_rows kernel for the public calls: host (NumPy / simulated) arrays through
device copies of their spans, and device arrays through the fast-path entries remembered in
:mod:`ropelab.calls`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from . import streams
from .arrays import FAST_META, ArrayInfo
from .kernels._launch import launch
from .problem import check_position_values
from .rows_checks import columns_disjoint
from .validate import fail


def host_side(obj, info: ArrayInfo) -> np.ndarray:
    """The NumPy array behind a NumPy or simulated device array (written back in place)."""
    return obj._ary if info.kind == "simulator" else obj


def _span_view(array: np.ndarray, elements: int) -> np.ndarray:
    """A 1-D view from ``array``'s first element over ``elements`` elements (rows and the gaps
    between them, which belong to the same allocation)."""
    return np.lib.stride_tricks.as_strided(array, shape=(elements,),
                                           strides=(array.dtype.itemsize,), writeable=False)


def _write_back(target: np.ndarray, flat: np.ndarray, info: ArrayInfo) -> None:
    """Copy the logical elements of ``flat`` (laid out as ``info``) into ``target`` only: the
    gaps between rows may hold another array's columns (k beside q in qkv)."""
    item = info.dtype.itemsize
    strides = tuple(s // item * flat.dtype.itemsize for s in info.strides)
    target[...] = np.lib.stride_tricks.as_strided(flat, shape=info.shape, strides=strides)


def launch_host(plan, arrays, spans, positions, cache_array):
    """Host (NumPy) or simulated arrays: copy each span to the device, launch, copy back.

    ``arrays``: [(object, info, written)] in kernel order (x, out) or (q, k).
    """
    devs, done = [], {}
    for obj, info, _ in arrays:
        key = (info.ptr, info.shape, info.strides)
        if key not in done:
            host = _span_view(host_side(obj, info), spans[key])
            done[key] = cuda.to_device(np.ascontiguousarray(host))
        devs.append(done[key])
    pos = cuda.to_device(np.ascontiguousarray(positions, dtype=np.int32))
    extra = [cuda.to_device(np.ascontiguousarray(cache_array).reshape(-1))] \
        if cache_array is not None else []
    launch(plan, (*devs, pos, *extra))
    for (obj, info, written), dev in zip(arrays, devs):
        if written:
            _write_back(host_side(obj, info), dev.copy_to_host(), info)


def fast_meta(obj):
    """(pointer, hashable layout key) on the fast path, or None: torch's key gains strides."""
    m = FAST_META.get(type(obj))
    if m is None:
        return None
    ptr, key = m(obj)
    stride = getattr(obj, "stride", None)
    return ptr, (key, stride() if callable(stride) else None)


def ptr_of(a) -> int:
    return a.data_ptr() if hasattr(a, "data_ptr") else int(a.__cuda_array_interface__["data"][0])


def alloc_like(x, info: ArrayInfo):
    """A contiguous device array of x's shape and dtype, from x's library."""
    if info.kind == "torch":
        import torch

        return torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device)
    if info.kind == "cupy":
        import cupy

        return cupy.empty(info.shape, dtype=info.dtype)
    return cuda.device_array(info.shape, info.dtype)


class _QKCall:
    """A validated ``rope_qk`` call shape on device arrays: check new pointers, launch."""

    __slots__ = ("bound", "current", "spans", "rows")

    def fire(self, qp, kp, pp, cp, stream):
        q_bytes, k_bytes, pos_bytes = self.spans
        if pp < qp + q_bytes and qp < pp + pos_bytes or pp < kp + k_bytes and kp < pp + pos_bytes:
            fail("positions overlap q or k; the kernel writes them while it reads positions")
        if qp < kp + k_bytes and kp < qp + q_bytes and not columns_disjoint(qp, *self.rows[:2],
                                                                            kp, *self.rows[2:]):
            fail("q and k overlap; they must be disjoint (column slices of one qkv are fine)")
        handle = self.current() if stream is None else streams.resolve(stream)
        self.bound.fire((qp, kp, pp) if cp is None else (qp, kp, pp, cp), handle)


class _RowsCall:
    """A validated ``rope`` call shape of the rope_rows path: the public fast path's entry."""

    __slots__ = ("bound", "x_span", "out_span", "pos_nbytes", "alloc", "ptr_of", "same_layout",
                 "arange", "current", "check")

    def run(self, x, xp, out, op, positions, pp, stream, cp=None):
        if out is None:
            out = self.alloc(x)
            op = self.ptr_of(out)
        elif op != xp:
            if xp < op + self.out_span and op < xp + self.x_span:
                fail("out partially overlaps x; pass out=x for in place, or a separate array")
        elif not self.same_layout:
            fail("out starts where x starts but has another layout; pass out=x for in place")
        if positions is None:
            pp = self.arange
        elif pp < op + self.out_span and op < pp + self.pos_nbytes:
            fail("out overlaps positions; the kernel would overwrite positions it still reads")
        elif self.check:
            host = np.asarray(cuda.as_cuda_array(positions).copy_to_host())
            check_position_values(host, self.bound.plan.position_limit,
                                  self.bound.plan.limit_reason)
        handle = self.current() if stream is None else streams.resolve(stream)
        self.bound.fire((xp, op, pp) if cp is None else (xp, op, pp, cp), handle)
        return out
