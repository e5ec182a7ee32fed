"""Which CUDA stream a call runs on.

``stream=`` on the public functions accepts a numba stream, a CuPy stream, a PyTorch stream, any
object with the ``__cuda_stream__`` protocol (cuda.core), or a raw ``CUstream`` handle (an int;
0 is the legacy default stream).  Without one, a call on PyTorch tensors runs on PyTorch's
current stream and a call on CuPy arrays on CuPy's, as FlashInfer and CuPy do, so ropelab
orders correctly with the surrounding framework code and can be captured in a CUDA graph that
the framework is recording; numba arrays and other device arrays use the default stream 0.
"""

from __future__ import annotations

import functools
import sys

import numpy as np


def resolve(stream) -> int:
    """The raw handle of ``stream`` (see the module docstring), or a TypeError."""
    if stream is None:
        return 0
    if isinstance(stream, (bool, np.bool_)):
        raise TypeError(f"stream must be a stream object or a raw CUstream handle, got {stream!r}")
    if isinstance(stream, (int, np.integer)):
        if stream < 0:
            raise ValueError(f"a raw stream handle is a non-negative address, got {stream}")
        return int(stream)
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if isinstance(handle, int):
        return handle
    handle = getattr(stream, "ptr", None)  # cupy.cuda.Stream
    if isinstance(handle, int):
        return handle
    if hasattr(stream, "__cuda_stream__"):  # cuda.core and other protocol implementers
        return int(stream.__cuda_stream__()[1])
    if type(stream).__name__ == "FakeStream":  # the simulator's numba stream
        return 0
    handle = getattr(stream, "handle", None)  # numba's Stream
    if handle is not None:
        value = getattr(handle, "value", handle)  # a ctypes c_void_p or a CUstream
        return int(value or 0)
    raise TypeError(f"stream must be a numba, CuPy or PyTorch stream, an object with "
                    f"__cuda_stream__, or an int handle; got {type(stream).__name__}")


def _torch_current(x):
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:  # one C call per launch; the public route builds a Stream object
        return functools.partial(raw, x.get_device())
    device = x.device
    return lambda: torch.cuda.current_stream(device).cuda_stream


def _cupy_current(x):
    get = sys.modules["cupy"].cuda.get_current_stream
    return lambda: get().ptr


def _default_stream() -> int:
    return 0


def current_for(kind: str, x):
    """A function ``() -> handle`` of the stream that calls on ``x`` (an array of library
    ``kind``, on one device) run on by default; cached with the validated call, so a launch pays
    one call for it."""
    if kind == "torch":
        return _torch_current(x)
    if kind == "cupy":
        return _cupy_current(x)
    return _default_stream
