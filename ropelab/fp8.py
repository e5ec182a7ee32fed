"""FP8 e4m3 (``torch.float8_e4m3fn``) as ``uint8`` bit patterns, from float32 exactly as torch
rounds, on the host (NumPy) and in kernels.

The format: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits.  The "fn" variant has no
infinities and one NaN pattern per sign (``S.1111.111``), so the largest finite value is
``S.1111.110`` = 448; the smallest normal is 2**-6 and the subnormals are multiples of 2**-9.

Conversion from float32 (what ``tensor.to(torch.float8_e4m3fn)`` does on torch 2.13, and what
:func:`from_float32` / :func:`e4m3_bits` do here, bit for bit; torch 2.11's cast, on the
H200 image, differs only past 448, which it makes NaN: ropelab saturates there, as a KV-cache
quantiser must, and equals torch's cast of the clamped value on both):

* round to nearest, ties to even, in the normal range (the mantissa keeps 3 of 23 bits) and in
  the subnormal range (a multiple of 2**-9);
* saturate: every magnitude that would round past 448, and infinity, becomes +-448 (``0x7E``);
* NaN becomes ``0x7F`` with the input's sign bit (``0xFF`` for a NaN whose sign bit is set).

The kernels' form (:func:`e4m3_bits`) is integer work on the float32 bits plus one float32
addition that rounds the subnormal range, exact whatever ``fastmath`` does (flush-to-zero only
touches inputs that round to zero anyway), and selects instead of branches; the host form
(:func:`from_float32`) rounds the subnormals with integers alone, so the two check each other,
and both are checked against torch.  On a GPU of compute capability 8.9 or newer (the H200 is
9.0) the kernels' :func:`pack2` / :func:`pack4` use the hardware conversion instead, one
``cvt.rn.satfinite.e4m3x2.f32`` per two values (rounding and saturating as above; it writes
every NaN as ``0x7F``, so the inputs' sign bits are put back), as :mod:`ropelab.bf16` does for
bfloat16; the simulator and older GPUs run :func:`e4m3_bits`.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, uint32

from .target import SIMULATED

from .bf16 import _bits_float, _float_bits

MAX = 448.0  # the largest finite e4m3fn value
NAN_BITS = 0x7F  # S.1111.111, with the sign bit of the input
MAX_BITS = 0x7E  # S.1111.110 = 448
_ABS = 0x7FFFFFFF
_INF = 0x7F800000
_F32_448 = 0x43E00000  # float32 bits of 448.0: this magnitude and above saturate
_F32_MIN_NORMAL = 0x3C800000  # float32 bits of 2**-6, e4m3's smallest normal
_REBIAS = 120 << 23  # float32 exponent bias 127 -> e4m3 bias 7, in place
_ROUND = 0x7FFFF  # half of the 20 mantissa bits dropped, less one (ties go by the kept bit)
_SUB_ADD = 16384.0  # 2**14: its float32 ulp is 2**-9, e4m3's subnormal step
_SUB_ADD_BITS = 0x46800000  # float32 bits of 2**14


# ---- host (NumPy) -------------------------------------------------------------------------------

def from_float32(x) -> np.ndarray:
    """float32 (any shape) -> e4m3fn bits (uint8): nearest even, saturating, NaN keeps its sign."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = (b >> 24) & 0x80
    a = b & _ABS
    odd = (a >> 20) & 1
    normal = (a - _REBIAS + _ROUND + odd) >> 20
    e = np.maximum(a >> 23, 1)  # a float32 subnormal has the exponent of 2**-126
    m = (a & 0x7FFFFF) | np.where(a >> 23 > 0, 0x800000, 0)
    shift = np.clip(141 - e, 1, 40)  # value = m * 2**(e - 150); a multiple of 2**-9 is 2**(e-141)
    q = m >> shift
    rem = m & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    q = q + ((rem > half) | ((rem == half) & (q & 1) == 1))
    sub = np.where(shift > 24, 0, q)
    out = np.where(a > _INF, NAN_BITS, np.where(a >= _F32_448, MAX_BITS,
                                                np.where(a >= _F32_MIN_NORMAL, normal, sub)))
    return (out | sign).astype(np.uint8)


def to_float32(bits) -> np.ndarray:
    """e4m3fn bits (uint8, any shape) -> float32, exactly (NaN for ``S.1111.111``)."""
    b = np.asarray(bits)
    if b.dtype != np.uint8:
        raise TypeError(f"e4m3 bits must be uint8, got {b.dtype}")
    b = b.astype(np.int64)
    exp, man = (b >> 3) & 0xF, b & 7
    mag = np.where(exp == 0, man * 2.0**-9, (1.0 + man / 8.0) * np.exp2(exp - 7.0))
    mag = np.where((exp == 15) & (man == 7), np.nan, mag)
    return np.where(b & 0x80, -mag, mag).astype(np.float32)


def quantize(x, scale: float) -> np.ndarray:
    """The cache's rule for a float32 value ``x`` and a per-tensor ``scale``: ``x`` times the
    float32 reciprocal of ``scale`` (one float32 multiply), then :func:`from_float32`."""
    inv = np.float32(1.0 / float(scale))
    return from_float32(np.asarray(x, dtype=np.float32) * inv)


def dequantize(bits, scale: float) -> np.ndarray:
    """What a cache entry stands for: ``to_float32(bits) * scale`` (float32)."""
    return to_float32(bits) * np.float32(scale)


# ---- device --------------------------------------------------------------------------------------

# ex: begin e4m3_bits
@cuda.jit(device=True, inline="always")
def e4m3_bits(x):
    """float32 -> e4m3fn bits in the low byte of a uint32 (see the module docstring)."""
    b = _float_bits(float32(x))
    sign = uint32(b >> uint32(24)) & uint32(0x80)
    a = uint32(b & uint32(_ABS))
    # Normal range: rebias the exponent in place and round the 20 dropped mantissa bits to
    # nearest even (a carry out of the mantissa bumps the exponent, which is right).  Clamped
    # below first, so that nothing wraps in the lanes that take another result.
    an = a if a > uint32(_F32_MIN_NORMAL) else uint32(_F32_MIN_NORMAL)
    odd = uint32(an >> uint32(20)) & uint32(1)
    normal = uint32(uint32(uint32(an - uint32(_REBIAS)) + uint32(_ROUND) + odd) >> uint32(20))
    # Subnormal range (below 2**-6): adding 2**14, whose float32 ulp is 2**-9, rounds |x| to a
    # multiple of 2**-9 (nearest even) and leaves that multiple in the low mantissa bits.
    # Exact under fast-math too: flush-to-zero only touches inputs that round to 0 anyway.
    # (Clamped above as well: no NaN or infinity meets the addition.)
    small = a < uint32(_F32_MIN_NORMAL)
    sa = a if small else uint32(0)
    sub = uint32(_float_bits(_bits_float(sa) + float32(_SUB_ADD)) - uint32(_SUB_ADD_BITS))
    r = sub if small else normal
    r = uint32(MAX_BITS) if a >= uint32(_F32_448) else r  # 448, past it, infinity: saturate
    r = uint32(NAN_BITS) if a > uint32(_INF) else r
    return uint32(r | sign)
# ex: end e4m3_bits


@cuda.jit(device=True, inline="always")
def pack2_integer(a, b):
    """Two float32 -> two e4m3 bytes in the low half of a uint32 (``a`` in the lowest), by
    :func:`e4m3_bits` (any GPU, and the simulator)."""
    return uint32(e4m3_bits(a) | uint32(e4m3_bits(b) << uint32(8)))


def _has_fp8_cvt() -> bool:
    """Whether every visible GPU has ``cvt.rn.satfinite.e4m3x2.f32`` (compute capability 8.9
    or later), asked of libcuda without a context; no driver (the census child, compiling for
    sm_90) counts as yes."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    count, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return True
    for dev in range(count.value):
        # 75, 76: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR
        if (lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) == 0
                and lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) == 0
                and (major.value, minor.value) < (8, 9)):
            return False
    return True


if SIMULATED or not _has_fp8_cvt():
    pack2 = pack2_integer
else:
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    _CVT_TYPE = ir.FunctionType(ir.IntType(16), [ir.FloatType(), ir.FloatType()])

    @intrinsic
    def _cvt_e4m3x2(typingctx, hi, lo):
        """``cvt.rn.satfinite.e4m3x2.f32 d, hi, lo``: two e4m3 bytes, ``hi`` in the upper."""
        if hi != types.float32 or lo != types.float32:
            raise TypingError(f"_cvt_e4m3x2 needs two float32, got {hi}, {lo}")

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(_CVT_TYPE, "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f")
            return builder.zext(builder.call(asm, args), ir.IntType(32))

        return types.uint32(hi, lo), codegen

    @cuda.jit(device=True, inline="always")
    def pack2(a, b):
        """Two float32 -> two e4m3 bytes (``a`` in the lowest) by one hardware conversion
        (round to nearest even, saturating: :func:`e4m3_bits`'s result).  The instruction
        writes every NaN as 0x7F; torch keeps a NaN's sign bit.  Every other result already
        carries its input's sign (zeros included), so both signs are simply put in again."""
        signs = uint32(uint32(_float_bits(float32(a)) >> uint32(24)) & uint32(0x80)) | uint32(
            uint32(_float_bits(float32(b)) >> uint32(16)) & uint32(0x8000))
        return uint32(_cvt_e4m3x2(float32(b), float32(a)) | signs)


@cuda.jit(device=True, inline="always")
def pack4(a, b, c, d):
    """Four float32 -> one uint32 of four e4m3 bytes (``a`` in the lowest: little-endian)."""
    return uint32(pack2(a, b) | uint32(pack2(c, d) << uint32(16)))
