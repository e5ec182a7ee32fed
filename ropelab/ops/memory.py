"""Device memory the engine makes for a call: outputs in the caller's library, float32 buffers,
zero fills on the launch stream, and the default positions ``0 .. tokens-1``.

An output is made by the library its source came from (a PyTorch tensor for a tensor, a CuPy
array for a CuPy array, a numba device array otherwise), so it lives on the caller's device,
in the caller's allocator (and its CUDA graph pool), and is returned as the caller expects.
Every maker is chosen once, when a call shape is validated; a cached call only calls it.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import cuda

from .arrays import ArrayInfo

_lock = threading.Lock()


def cai_pointer(a) -> int:
    return int(a.__cuda_array_interface__["data"][0])


def maker(info: ArrayInfo):
    """``(x -> new C-contiguous array of x's shape and dtype, array -> pointer)`` for the library
    ``x`` came from (``info`` describes ``x``)."""
    if info.kind == "torch":
        import torch

        if info.c_contiguous:
            return torch.empty_like, torch.Tensor.data_ptr
        return (lambda x: torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device),
                torch.Tensor.data_ptr)
    if info.kind == "cupy":
        import cupy

        make = cupy.empty_like if info.c_contiguous else (
            lambda x: cupy.empty(x.shape, dtype=x.dtype))
        return make, lambda a: a.data.ptr
    shape, dtype = info.shape, info.dtype
    return (lambda x: cuda.device_array(shape, dtype)), cai_pointer


def scratch_maker(slots, s, zero: bool):
    """``x -> new buffer`` for ``SCRATCH`` slot ``s`` of ``slots``, and the slot whose object
    ``x`` is: float32 from slot 0's library, or (``source_dtype``) its source slot's dtype."""
    if s.source_dtype:
        return buffer_maker(slots[s.source].info, s.size, zero), s.source
    return buffer_maker(slots[0].info, s.size, zero, "float32"), 0


def buffer_maker(info: ArrayInfo, n: int, zero: bool, dtype: str | None = None):
    """``x -> new [n] device buffer`` (zeroed when ``zero``) from ``x``'s library (``info``
    describes ``x``), of ``dtype`` (a NumPy name) or, when None, of ``x``'s own dtype."""
    if info.kind == "torch":
        import torch

        new = torch.zeros if zero else torch.empty
        if dtype is None:
            return lambda x: new(n, dtype=x.dtype, device=x.device)
        typed = getattr(torch, dtype)
        return lambda x: new(n, dtype=typed, device=x.device)
    if info.kind == "cupy":
        import cupy

        new = cupy.zeros if zero else cupy.empty
        return lambda x: new(n, dtype=x.dtype if dtype is None else dtype)
    np_dtype = np.dtype(info.dtype if dtype is None else dtype)
    if zero:
        return lambda x: cuda.to_device(np.zeros(n, np_dtype))
    return lambda x: cuda.device_array(n, np_dtype)


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
