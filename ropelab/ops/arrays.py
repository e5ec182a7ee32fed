"""What an input array is, where it lives, and how to read that cheaply.

ropelab accepts NumPy arrays (copied to the device and back) and, on a GPU, device arrays:
PyTorch tensors, CuPy arrays, numba device arrays, or anything exporting
``__cuda_array_interface__``.  Device arrays are used where they lie; no data crosses to the host.
Under the simulator, numba's fake device arrays (from ``cuda.to_device``) play the device role.

Two ways to look at an array:

* :func:`inspect_array` -> :class:`ArrayInfo`, complete (shape, dtype, byte strides, address,
  read-only flag), used on the validating path.  It never touches the data.
* :data:`FAST_META` maps a device array *type* to a reader returning ``(pointer, key)``, where
  ``key`` is a hashable summary of everything validation looked at (shape, strides, dtype,
  device).  Reading it costs well under a microsecond for a tensor, against ~13 us for
  ``cuda.as_cuda_array``; the public functions key their cache of validated calls on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..target import SIMULATED


@dataclass(frozen=True)
class ArrayInfo:
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...]  # in bytes
    ptr: int  # address of element 0 (host or device address space)
    on_device: bool
    readonly: bool = False
    kind: str = "numpy"  # numpy, torch, cupy, numba, cai, simulator
    storage: str | None = None  # "bfloat16" for a torch.bfloat16 tensor (dtype then says uint16)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def c_contiguous(self) -> bool:
        expected = self.dtype.itemsize
        for dim, stride in zip(reversed(self.shape), reversed(self.strides)):
            if dim > 1 and stride != expected:
                return False
            expected *= dim
        return True

    def byte_range(self) -> tuple[int, int]:
        """``[low, high)``: the bytes the array's elements occupy, gaps between rows included,
        for any strides (empty for an empty array)."""
        if not self.size:
            return self.ptr, self.ptr
        low = high = self.ptr
        for dim, stride in zip(self.shape, self.strides):
            if stride < 0:
                low += (dim - 1) * stride
            else:
                high += (dim - 1) * stride
        return low, high + self.dtype.itemsize


def _is_fake_device_array(obj) -> bool:
    return type(obj).__name__ == "FakeCUDAArray"


def _module_of(obj) -> str:
    return type(obj).__module__.split(".", 1)[0]


# torch dtypes by name -> (NumPy dtype the kernels see, storage tag).  bfloat16 has no NumPy
# dtype: ropelab moves it as its uint16 bit patterns.
TORCH_DTYPES = {"float32": (np.float32, None), "float16": (np.float16, None),
                 "bfloat16": (np.uint16, "bfloat16"), "float64": (np.float64, None),
                 "int32": (np.int32, None), "int64": (np.int64, None), "uint16": (np.uint16, None),
                 "uint32": (np.uint32, None), "int16": (np.int16, None), "uint8": (np.uint8, None),
                 "int8": (np.int8, None), "bool": (np.bool_, None),
                 "float8_e4m3fn": (np.uint8, "float8_e4m3fn")}  # an FP8 KV cache: its bits


def _torch_info(t) -> ArrayInfo:
    name = str(t.dtype).rsplit(".", 1)[-1]
    if name not in TORCH_DTYPES:
        raise TypeError(f"unsupported torch dtype {t.dtype}")
    dt, storage = TORCH_DTYPES[name]
    dt = np.dtype(dt)
    if t.requires_grad and _grad_enabled():
        # A raw kernel launch is invisible to autograd: the result would have no grad_fn and the
        # caller's gradient would vanish without an error.  The torch ops carry the backward.
        from ..errors import RopeInputError
        raise RopeInputError("a tensor that requires grad: ropelab's launch is invisible to "
                             "autograd; call ropelab.torch_ops.rope / fused_qknorm_rope (which "
                             "have a backward or refuse clearly), or run under torch.no_grad()")
    if not t.is_cuda:
        raise TypeError("a CPU torch tensor is not a device array: pass tensor.numpy() for the "
                        "copy-in/copy-out path, or a CUDA tensor")
    return ArrayInfo(tuple(t.shape), dt, tuple(s * dt.itemsize for s in t.stride()), t.data_ptr(),
                     True, False, "torch", storage)


def _grad_enabled() -> bool:
    import torch  # only reached for a torch tensor, so torch is imported already

    return torch.is_grad_enabled()


def inspect_array(obj, name: str) -> ArrayInfo:
    """Read shape/dtype/strides/address of ``obj`` or raise a TypeError naming ``name``."""
    if isinstance(obj, np.ndarray):
        return ArrayInfo(obj.shape, obj.dtype, obj.strides, obj.ctypes.data, False,
                         not obj.flags.writeable)
    if _is_fake_device_array(obj):
        host = obj._ary  # the simulator keeps device data in an ordinary ndarray
        return ArrayInfo(host.shape, host.dtype, host.strides, host.ctypes.data, True,
                         not host.flags.writeable, "simulator")
    if _module_of(obj) == "torch" and hasattr(obj, "data_ptr"):
        try:
            return _torch_info(obj)
        except TypeError as exc:
            raise TypeError(f"{name}: {exc}") from None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(s) for s in cai["shape"])
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is None:  # None means C-contiguous in the interface
            strides = tuple(dtype.itemsize * int(np.prod(shape[i + 1:], dtype=np.int64))
                            for i in range(len(shape)))
        kind = {"cupy": "cupy", "numba": "numba"}.get(_module_of(obj), "cai")
        return ArrayInfo(shape, dtype, tuple(int(s) for s in strides), int(cai["data"][0]), True,
                         bool(cai["data"][1]), kind)
    raise TypeError(
        f"{name} must be a NumPy array or a CUDA array (PyTorch, CuPy, numba device array, or "
        f"anything with __cuda_array_interface__); got {type(obj).__name__}"
    )


def host_array(obj, info: ArrayInfo) -> np.ndarray:
    """The NumPy array behind a NumPy array or a simulated device array (its data, not a copy)."""
    return obj._ary if info.kind == "simulator" else obj


def device_view(obj, info: ArrayInfo, dtype=None):
    """A 1-D view of a device array for :func:`ropelab.kernels.launch` (no copy).

    Under the simulator: the fake array itself, flattened.  On a GPU: a numba device array
    over the same memory (``dtype`` reinterprets the bytes, e.g. bfloat16 as uint32 words).
    """
    if info.kind == "simulator":
        flat = obj.reshape(-1)
        return flat.view(dtype) if dtype is not None else flat
    # The launcher needs only the address and the element count; describing the memory here
    # skips cuda.as_cuda_array (~13 us per tensor), and works for torch.bfloat16, which has no
    # __cuda_array_interface__.
    dt = np.dtype(dtype) if dtype is not None else info.dtype
    return RawDevice(info.ptr, info.nbytes // dt.itemsize, dt)


class RawDevice:
    """The minimal ``__cuda_array_interface__`` of a contiguous device buffer."""

    def __init__(self, ptr: int, n: int, dtype):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": np.dtype(dtype).str,
                                         "data": (ptr, False), "strides": None, "version": 3}


# ---- fast metadata readers (GPU only) ----------------------------------------------------------

def torch_meta(t):
    # Strides, not only contiguity: the rope_rows path takes row-strided tensors (a column
    # slice of a packed qkv), whose plan depends on the row stride.  get_device() is a C call
    # where .device builds an object.  requires_grad is in the key: a call shape validated
    # without it must not replay for a tensor that needs a gradient (validation refuses that).
    # Grad mode too: a tensor that requires grad passes validation under torch.no_grad(), and
    # that entry must not replay outside it (validation refuses that call).  ``and`` keeps the
    # common tensor (no grad) at one attribute read.
    return t.data_ptr(), (t.shape, t.stride(), t.dtype, t.get_device(),
                          t.requires_grad and _grad_enabled())


def cupy_meta(a):
    return a.data.ptr, (a.shape, a.strides, a.dtype, a.device.id)


def cai_meta(a):
    cai = a.__cuda_array_interface__
    return cai["data"][0], (tuple(cai["shape"]), cai.get("strides"), cai["typestr"], cai["data"][1])


FAST_META: dict = {}


def register_fast_types() -> None:
    """Fill :data:`FAST_META` for the array libraries that are imported (GPU only).

    Called on each public call that misses the cache, so a library imported after ropelab
    still gets the fast path from its second call on.  Under the simulator nothing is fast.
    """
    if SIMULATED:
        return
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.Tensor not in FAST_META:
        FAST_META[torch.Tensor] = torch_meta
        param = getattr(getattr(torch, "nn", None), "Parameter", None)
        if param is not None:
            FAST_META[param] = torch_meta
    cupy = sys.modules.get("cupy")
    if cupy is not None and cupy.ndarray not in FAST_META:
        FAST_META[cupy.ndarray] = cupy_meta
    devicearray = sys.modules.get("numba.cuda.cudadrv.devicearray")
    if devicearray is not None:
        for cls in (devicearray.DeviceNDArray,):
            FAST_META.setdefault(cls, cai_meta)
