"""The host and simulator route of the rope_rows calls (``ropelab.rope_qk`` and 16-bit /
strided / cached ``ropelab.rope``): copy each array's span to the device, launch, and write back
only the logical elements.

A row-strided array spans its rows *and the gaps between them*; the gaps may hold another
array's columns (k beside q in one qkv), so they travel to the device with the span but are
never written back.  Device arrays take the engine's route (:mod:`ropelab.ops.call`).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..kernels.launch import launch
from .arrays import ArrayInfo


def host_side(obj, info: ArrayInfo) -> np.ndarray:
    """The NumPy array behind a NumPy or simulated device array (written back in place)."""
    return obj._ary if info.kind == "simulator" else obj


def host_copy(obj, info: ArrayInfo | None):
    """A NumPy array of ``obj`` (a simulated device array is read back), or None."""
    if obj is None or info is None:
        return None if obj is None else np.asarray(obj)
    return obj.copy_to_host() if info.kind == "simulator" else obj


def _span_view(array: np.ndarray, elements: int) -> np.ndarray:
    """A 1-D view from ``array``'s first element over ``elements`` elements (rows and the gaps
    between them, which belong to the same allocation)."""
    return np.lib.stride_tricks.as_strided(array, shape=(elements,),
                                           strides=(array.dtype.itemsize,), writeable=False)


def _write_back(target: np.ndarray, flat: np.ndarray, info: ArrayInfo) -> None:
    """Copy the logical elements of ``flat`` (laid out as ``info``) into ``target`` only."""
    item = info.dtype.itemsize
    strides = tuple(s // item * flat.dtype.itemsize for s in info.strides)
    target[...] = np.lib.stride_tricks.as_strided(flat, shape=info.shape, strides=strides)


def launch_host(plan, arrays, spans, positions, cache_array) -> None:
    """Copy each span to the device, launch once, write the written arrays back.

    ``arrays``: ``[(object, info, written)]`` in kernel order ((x, out) or (q, k)); ``spans``
    maps ``(ptr, shape, strides)`` to elements, so ``out=x`` shares one device copy.
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
