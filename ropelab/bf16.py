"""bfloat16 storage as ``uint16`` bit patterns, converted to and from float32 exactly.

NumPy has no bfloat16 and numba's CUDA arrays need a NumPy dtype, so ropelab stores bfloat16
data as ``uint16`` holding the bit pattern (what ``torch_tensor.view(torch.uint16)`` gives).
bfloat16 is the top half of a float32 (1 sign, 8 exponent, 7 mantissa bits), which makes both
conversions integer work:

* to float32: put the 16 bits in the top half of a 32-bit word (exact, no rounding);
* from float32: round the low 16 bits away to nearest, ties to even, by adding
  ``0x7FFF + (bit 16)`` before the shift; NaN is handled first (the addition could carry a NaN
  into infinity) and stays a quiet NaN with its sign.  Overflow rounds to infinity, as IEEE
  round-to-nearest does.

On the GPU, two float32 are rounded and packed into one word by the hardware instruction
``cvt.rn.bf16x2.f32`` (sm_80 and later: one ``F2FP.BF16.F32.PACK_AB``), instead of about forty
integer instructions per pair.  It rounds exactly as :func:`from_float32` for every non-NaN
input (subnormals kept, overflow to infinity); a NaN becomes the canonical quiet NaN ``0x7FFF``
(sign and payload dropped), which is what CUDA's own ``cuda_bf16.hpp`` software path gives to
match that instruction.  :func:`from_float32_cvt` is that rule on the host, and the simulator's
``pack2`` uses it, so simulated and GPU words agree bit for bit.  A GPU older than sm_80 has no
such instruction: there ``pack2`` keeps the integer version.

The device helpers need to reinterpret a float32's bits as an integer and back.  On a GPU that
is libdevice's ``__nv_float_as_int``/``__nv_int_as_float``, a plain register move (``mov.b32``);
the simulator cannot call libdevice, so there the same two steps go through NumPy views.  The
rounding logic around them is written once and runs on both.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32, uint16, uint32

from .target import SIMULATED

NAN_QUIET_BIT = 0x0040  # the top mantissa bit of a bfloat16
CANONICAL_NAN = 0x7FFF  # what cvt.rn.bf16(x2).f32 writes for any NaN input
_ABS_MASK = 0x7FFFFFFF
_INF_BITS = 0x7F800000


# ---- host (NumPy) -----------------------------------------------------------------------------

def to_float32(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16, any shape) -> float32, exactly."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        raise TypeError(f"bfloat16 bits must be uint16, got {bits.dtype}")
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def from_float32(x) -> np.ndarray:
    """float32 (any shape) -> bfloat16 bit patterns (uint16), round to nearest even."""
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)  # 64-bit so that the rounding add cannot wrap
    nan = (b & _ABS_MASK) > _INF_BITS
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    quiet = (b >> 16) | NAN_QUIET_BIT
    return np.where(nan, quiet, rounded).astype(np.uint16)


def from_float32_cvt(x) -> np.ndarray:
    """float32 -> bfloat16 bits as the GPU's ``cvt.rn.bf16x2.f32`` rounds them.

    :func:`from_float32` for every non-NaN value; any NaN becomes :data:`CANONICAL_NAN`.
    """
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.isnan(x), np.uint16(CANONICAL_NAN), from_float32(x)).astype(np.uint16)


def random_bf16(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    """Normal random numbers already rounded to bfloat16, as uint16 bits."""
    return from_float32((rng.standard_normal(shape) * scale).astype(np.float32))


# ---- device ------------------------------------------------------------------------------------

if SIMULATED:
    @cuda.jit(device=True)
    def _float_bits(x):
        return np.float32(x).view(np.uint32)

    @cuda.jit(device=True)
    def _bits_float(b):
        return np.uint32(b).view(np.float32)
else:
    from numba.cuda import libdevice

    @cuda.jit(device=True, inline="always")
    def _float_bits(x):
        return uint32(libdevice.float_as_int(x))

    @cuda.jit(device=True, inline="always")
    def _bits_float(b):
        return libdevice.int_as_float(int32(b))


@cuda.jit(device=True, inline="always")
def load_bf16(bits):
    """bfloat16 bits (uint16) -> float32."""
    return _bits_float(uint32(bits) << uint32(16))


@cuda.jit(device=True, inline="always")
def store_bf16(x):
    """float32 -> bfloat16 bits (uint16), round to nearest even."""
    b = _float_bits(x)
    # The carry out of the low half is added to the high half separately, so no sum exceeds
    # 17 bits (no wrap-around even for NaN inputs, whose result is discarded below); uint32()
    # keeps numba from widening the arithmetic to 64 bits.
    carry = uint32((b & uint32(0xFFFF)) + uint32(0x7FFF) + ((b >> uint32(16)) & uint32(1))) >> uint32(16)
    rounded = uint32((b >> uint32(16)) + carry)
    quiet = (b >> uint32(16)) | uint32(NAN_QUIET_BIT)
    # Both computed, one chosen: a select, not a branch per element.
    return uint16(quiet if (b & uint32(_ABS_MASK)) > uint32(_INF_BITS) else rounded)


# Two bfloat16 in one 32-bit word (little-endian: element 2k in the low half, 2k+1 in the high
# half).  Reading a contiguous bfloat16 buffer as uint32 halves the number of memory
# instructions; unpacking is a shift or a mask, since bfloat16 is the top half of a float32.

@cuda.jit(device=True, inline="always")
def unpack_low(word):
    """The float32 value of the bfloat16 in the low half of ``word`` (uint32)."""
    return _bits_float(uint32(word) << uint32(16))


@cuda.jit(device=True, inline="always")
def unpack_high(word):
    """The float32 value of the bfloat16 in the high half of ``word`` (uint32)."""
    return _bits_float(uint32(word) & uint32(0xFFFF0000))


@cuda.jit(device=True, inline="always")
def pack2_integer(lo, hi):
    """float32 ``lo``, ``hi`` -> one uint32 word of two bfloat16 by integer work (any GPU)."""
    return uint32(store_bf16(lo)) | (uint32(store_bf16(hi)) << uint32(16))


def _has_bf16_cvt() -> bool:
    """Whether every visible GPU is sm_80 or later, asked of libcuda without a context.

    No driver (the census child compiles for sm_90 without one) counts as yes.
    """
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    count, major = ctypes.c_int(0), ctypes.c_int(0)
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return True
    for dev in range(count.value):
        # 75: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        if lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) == 0 and major.value < 8:
            return False
    return True


if SIMULATED:
    def pack2(lo, hi):
        """float32 ``lo``, ``hi`` -> one uint32 word (``lo`` in the low half), as the GPU's
        ``cvt.rn.bf16x2.f32`` rounds them (:func:`from_float32_cvt`)."""
        b = from_float32_cvt(np.array([lo, hi], dtype=np.float32))
        return np.uint32(b[0]) | (np.uint32(b[1]) << np.uint32(16))
elif _has_bf16_cvt():
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    _CVT_TYPE = ir.FunctionType(ir.IntType(32), [ir.FloatType(), ir.FloatType()])

    @intrinsic
    def _cvt_rn_bf16x2(typingctx, hi, lo):
        """``cvt.rn.bf16x2.f32 d, hi, lo``: ``hi`` rounded into the upper half of ``d``."""
        if hi != types.float32 or lo != types.float32:  # a float64 would round twice
            raise TypingError(f"_cvt_rn_bf16x2 needs two float32, got {hi}, {lo}")

        def codegen(context, builder, sig, args):
            # Pure (no side effect): the compiler may schedule or drop it like arithmetic.
            asm = ir.InlineAsm(_CVT_TYPE, "cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f")
            return builder.call(asm, args)

        return types.uint32(hi, lo), codegen

    @cuda.jit(device=True, inline="always")
    def pack2(lo, hi):
        """float32 ``lo``, ``hi`` -> one uint32 word of two bfloat16 (``lo`` in the low half),
        each rounded to nearest even by one hardware instruction."""
        return _cvt_rn_bf16x2(float32(hi), float32(lo))
else:
    pack2 = pack2_integer
