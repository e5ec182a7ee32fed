"""The host and simulator route of a validated call: copy each array to the device, launch
every plan in order, copy back what the kernels wrote.  It synchronizes (a NumPy result must be
complete when the call returns).

NumPy arrays and the Numba CUDA simulator's device arrays (an ordinary ndarray behind a fake
device array) take this route; real device arrays take the engine's device route
(:mod:`ropelab.ops.call`).  A row-strided array travels as its byte range, *the gaps between
its rows included* (they may hold another array's columns: k beside q in one qkv), and only its
own elements are written back, so the gaps are never written.  Arrays with the same address and
layout (``out=x``) share one device copy.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..kernels.launch import launch
from .arrays import device_view, host_array
from .slots import INT32, OUT, POSITIONS, SCRATCH, WRITTEN, Call, kernel_elements


def _span(array: np.ndarray, elements: int) -> np.ndarray:
    """A 1-D view from ``array``'s first element over ``elements`` elements (rows and the gaps
    between them, which belong to the same allocation)."""
    return np.lib.stride_tricks.as_strided(array, shape=(elements,),
                                           strides=(array.dtype.itemsize,), writeable=False)


def made_here(call: Call, values: list, simulated: bool) -> list:
    """``values`` with the arrays the engine makes filled in: an ``OUT`` the caller did not pass
    (like its source, C-contiguous) and the ``SCRATCH`` buffers, as NumPy arrays (simulated
    device arrays when ``simulated``)."""
    wrap = cuda.to_device if simulated else (lambda a: a)
    for i, s in enumerate(call.slots):
        if s.role == OUT and s.obj is None:
            source = call.slots[s.source].info
            values[i] = wrap(np.empty(source.shape, source.dtype))
        elif s.role == SCRATCH and s.within is None:
            dtype = call.slots[s.source].info.dtype if s.source_dtype else np.float32
            values[i] = wrap(np.zeros(s.size, dtype) if s.zero else np.empty(s.size, dtype))
    for i, s in enumerate(call.slots):
        if s.within is not None:
            base, offset = s.within
            values[i] = values[base][offset:offset + s.size]
    return values


def run_here(call: Call, views: list):
    """Run ``call`` on host or simulator arrays; return what the op returns."""
    slots = call.slots
    devices = [None] * len(slots)
    shared = {}
    # Every array the kernels read first, then the outputs, so that out=x finds x's copy.
    for i in sorted(range(len(slots)), key=lambda j: slots[j].role in WRITTEN):
        s, view = slots[i], views[i]
        if s.within is not None or (view is None and s.role != SCRATCH):
            continue
        if s.role == SCRATCH:
            dtype = view if s.source_dtype else np.float32  # the kernel's view of the source's
            devices[i] = cuda.to_device(np.zeros(s.size, dtype)) if s.zero \
                else cuda.device_array(s.size, dtype)
        elif s.info is not None and s.info.on_device and s.info.kind != "simulator":
            devices[i] = device_view(s.obj, s.info, view)  # device positions beside host data
        elif s.role == POSITIONS:
            host = (np.arange(call.tokens, dtype=np.int32) if s.obj is None
                    else np.ascontiguousarray(host_array(s.obj, s.info), dtype=INT32))
            devices[i] = cuda.to_device(host)
        elif s.obj is None:  # an OUT the engine makes
            devices[i] = cuda.device_array(kernel_elements(call, s, view), view)
        else:
            key = (s.info.on_device, s.info.ptr, s.info.shape, s.info.strides)
            if key not in shared:
                n = kernel_elements(call, s, s.info.dtype)
                if s.role == OUT:  # written in full: nothing to copy in
                    shared[key] = cuda.device_array(n * s.info.dtype.itemsize // view.itemsize,
                                                    view)
                else:
                    host = np.ascontiguousarray(_span(host_array(s.obj, s.info), n))
                    shared[key] = cuda.to_device(host.view(view))
            devices[i] = shared[key]
    for i, s in enumerate(slots):
        if s.within is not None:
            base, offset = s.within
            devices[i] = devices[base][offset:offset + s.size]
    for plan, indices in call.launches:
        launch(plan, [devices[i] for i in indices])
    return call.returned(_copied_back(call, devices))


def _copied_back(call: Call, devices: list) -> list:
    """What the kernels wrote, where the caller sees it: into the caller's arrays (their own
    elements only, or the slot's ``region``), or as the arrays the engine made."""
    simulated = call.slots[0].info.kind == "simulator"
    values = made_here(call, [s.obj for s in call.slots], simulated=False)
    for i, s in enumerate(call.slots):
        if s.within is not None or not (s.role in WRITTEN or s.role == SCRATCH):
            continue
        flat = devices[i].copy_to_host()
        if s.obj is None:  # made here: C-contiguous, the kernel's view of it
            values[i][...] = flat.view(values[i].dtype).reshape(values[i].shape)
            continue
        target = host_array(s.obj, s.info)
        written = np.lib.stride_tricks.as_strided(flat.view(s.info.dtype), shape=s.info.shape,
                                                  strides=s.info.strides)
        region = Ellipsis if s.region is None else s.region
        target[region] = written[region]
    if simulated:  # the arrays made here are device arrays, like the caller's
        values = [cuda.to_device(v) if s.obj is None and v is not None and s.within is None
                  and (s.role == OUT or s.role == SCRATCH) else v
                  for s, v in zip(call.slots, values)]
        for i, s in enumerate(call.slots):
            if s.within is not None:
                base, offset = s.within
                values[i] = values[base][offset:offset + s.size]
    return values

