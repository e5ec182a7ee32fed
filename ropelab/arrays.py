"""What an input array is, where it lives, and how to hand it to a kernel without copies.

ropelab accepts NumPy arrays (copied to the device and back) and, on a GPU, anything that
exports ``__cuda_array_interface__``: numba device arrays, CuPy arrays, PyTorch tensors.  Those
are wrapped in place with ``cuda.as_cuda_array``; no data crosses to the host.  Under the
simulator, numba's fake device arrays (from ``cuda.to_device``) play the device-array role.

Everything here inspects metadata only, so validation can finish before any kernel runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import cuda


@dataclass(frozen=True)
class ArrayInfo:
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]  # in bytes
    ptr: int  # address of element 0 (host or device address space)
    on_device: bool

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def c_contiguous(self) -> bool:
        expected = self.dtype.itemsize
        for dim, stride in zip(reversed(self.shape), reversed(self.strides)):
            if dim > 1 and stride != expected:
                return False
            expected *= dim
        return True

    def span(self) -> tuple[int, int]:
        """[first, last) byte addresses the array can touch (contiguous arrays only)."""
        return self.ptr, self.ptr + self.nbytes


def _is_fake_device_array(obj) -> bool:
    return type(obj).__name__ == "FakeCUDAArray"


def inspect_array(obj, name: str) -> ArrayInfo:
    """Read shape/dtype/strides/address of ``obj`` or raise a TypeError naming ``name``."""
    if isinstance(obj, np.ndarray):
        return ArrayInfo(obj.shape, obj.dtype, obj.strides, obj.ctypes.data, False)
    if _is_fake_device_array(obj):
        host = obj._ary  # the simulator keeps device data in an ordinary ndarray
        return ArrayInfo(host.shape, host.dtype, host.strides, host.ctypes.data, True)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(s) for s in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is None:  # None means C-contiguous in the interface
            strides = tuple(np.empty(0, dtype).itemsize * int(np.prod(shape[i + 1:], dtype=np.int64))
                            for i in range(len(shape)))
        return ArrayInfo(shape, dtype, tuple(int(s) for s in strides), int(cai["data"][0]), True)
    raise TypeError(
        f"{name} must be a NumPy array or a CUDA array (__cuda_array_interface__: numba device "
        f"array, CuPy, PyTorch); got {type(obj).__name__}"
    )


def data_address(array) -> int:
    """Address of element 0 of a device array (the simulator's fake ones: their host buffer).

    Only the address, so launchers can check alignment on every call without building an
    :class:`ArrayInfo`.
    """
    cai = getattr(array, "__cuda_array_interface__", None)
    if cai is not None:
        return int(cai["data"][0])
    host = getattr(array, "_ary", array)  # the simulator keeps device data in an ndarray
    return int(host.ctypes.data)


def overlaps(a: ArrayInfo, b: ArrayInfo) -> bool:
    if a.on_device != b.on_device:
        return False
    a0, a1 = a.span()
    b0, b1 = b.span()
    return a0 < b1 and b0 < a1


def same_memory(a: ArrayInfo, b: ArrayInfo) -> bool:
    """Exactly the same elements in the same order: in-place use, which is allowed."""
    return a.on_device == b.on_device and a.ptr == b.ptr and a.shape == b.shape and a.strides == b.strides


def to_device_flat(obj, info: ArrayInfo):
    """A 1-D contiguous device view of ``obj`` (a copy only for host arrays)."""
    if not info.on_device:
        return cuda.to_device(np.ascontiguousarray(obj).reshape(-1))
    if _is_fake_device_array(obj):
        return obj.reshape(-1)
    return cuda.as_cuda_array(obj).reshape(-1)
