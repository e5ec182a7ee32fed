"""Which CUDA stream a call runs on, checked before anything launches.

``stream=`` on the public functions accepts:

* a PyTorch stream (``torch.cuda.Stream``), a CuPy stream, a numba stream (``cuda.stream()``,
  also under the simulator);
* any object with the ``__cuda_stream__`` protocol (cuda.core): ``__cuda_stream__()`` must
  return ``(0, handle)`` with a non-negative int handle.  The object vouches for its handle;
* a raw int handle, only the well-known ones: ``0`` (the legacy default stream), ``1``
  (``CU_STREAM_LEGACY``) and ``2`` (``CU_STREAM_PER_THREAD``);
* :class:`RawStream` ``(handle)`` for any other raw ``CUstream`` address.  A made-up handle
  handed to the driver crashes the process (a segfault, not an exception) and ropelab cannot
  test a handle without touching it, so a bare int like ``stream=12345`` is refused: wrapping it
  says "this is a live stream I created", and the caller answers for it.

Every refusal is a ``TypeError`` (wrong kind of object, wrong tuple shape) or a
:class:`~ropelab.RopeInputError` (negative or unknown handle), raised before any launch.

Without ``stream=``, a call on PyTorch tensors runs on PyTorch's current stream and a call on
CuPy arrays on CuPy's, as FlashInfer and CuPy do, so ropelab orders correctly with the
surrounding framework code and can be captured in a CUDA graph that the framework is recording;
numba arrays and other device arrays use the default stream 0.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from ..target import SIMULATED
from ..validate import fail

# Raw handles every CUDA program may name without owning a stream object.
KNOWN_HANDLES = {0: "the legacy default stream", 1: "CU_STREAM_LEGACY",
                 2: "CU_STREAM_PER_THREAD"}


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _handle(value, what: str) -> int:
    if not _is_int(value):
        raise TypeError(f"{what} must be an int stream handle, got {type(value).__name__} "
                        f"{value!r}")
    if value < 0:
        fail(f"{what} must be a non-negative address, got {value}")
    return int(value)


class RawStream:
    """A raw ``CUstream`` handle the caller vouches for: ``stream=ropelab.RawStream(h)``.

    Use it for a handle from another library that ropelab does not know (a bare int other than
    0, 1, 2 is refused, since a wrong one would crash the process inside the driver).
    """

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = _handle(handle, "RawStream's handle")

    def __repr__(self) -> str:
        return f"RawStream({self.handle:#x})"


@functools.cache
def _numba_stream_type():
    if SIMULATED:
        from numba.cuda.simulator.api import stream

        return stream
    from numba.cuda.cudadrv.driver import Stream

    return Stream


def _from_protocol(stream) -> int:
    value = stream.__cuda_stream__()
    if not (isinstance(value, tuple) and len(value) == 2):
        raise TypeError(f"__cuda_stream__() must return a (version, handle) tuple of two ints, "
                        f"got {value!r}")
    version, handle = value
    if not _is_int(version):
        raise TypeError(f"__cuda_stream__() version must be an int, got {version!r}")
    if version != 0:
        fail(f"__cuda_stream__() protocol version {version} is not supported (only 0)")
    return _handle(handle, "the handle __cuda_stream__() returned")


def resolve(stream) -> int:
    """The raw handle of ``stream`` (see the module docstring), or TypeError/RopeInputError."""
    if stream is None:
        return 0
    if _is_int(stream):
        handle = _handle(stream, "a raw stream handle")
        if handle not in KNOWN_HANDLES:
            fail(f"stream={handle} is not a stream ropelab can vouch for (a wrong handle crashes "
                 f"the process in the driver); pass the stream object, or "
                 f"stream=ropelab.RawStream({handle}) if it is a live CUstream you created")
        return handle
    if isinstance(stream, RawStream):
        return stream.handle
    if isinstance(stream, (bool, np.bool_)) or isinstance(stream, (str, bytes, float)):
        raise TypeError(f"stream must be a stream object or a raw CUstream handle, got {stream!r}")
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if handle is not None:
        return _handle(handle, "the stream's cuda_stream")
    if type(stream).__module__.split(".", 1)[0] == "cupy":
        return _handle(getattr(stream, "ptr", None), "the CuPy stream's ptr")
    if hasattr(stream, "__cuda_stream__"):  # cuda.core and other protocol implementers
        return _from_protocol(stream)
    if isinstance(stream, _numba_stream_type()):
        if SIMULATED:  # the simulator runs every launch synchronously, on no real stream
            return 0
        handle = stream.handle
        value = getattr(handle, "value", handle)  # a ctypes c_void_p or a CUstream
        return int(value or 0)
    raise TypeError(f"stream must be a numba, CuPy or PyTorch stream, an object with "
                    f"__cuda_stream__, a ropelab.RawStream or an int handle (0, 1, 2); got "
                    f"{type(stream).__name__}")


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
