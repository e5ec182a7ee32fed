"""Two 16-bit floats in one 32-bit word, to and from float32: bfloat16 and float16.

A lane that moves 16-bit storage with 64- or 128-bit accesses (:mod:`ropelab.kernels.vec`)
holds ``uint32`` words, each with element ``2k`` in its low half and ``2k + 1`` in its high
half (little-endian).  Each storage dtype needs three device functions, collected in
:data:`CODECS`:

* ``low(word)`` / ``high(word)``: the float32 value of one half;
* ``pack(lo, hi)``: two float32, each rounded to nearest even, as one word.

Kernels that move one element at a time take :data:`ELEMENT_CODECS` instead: per storage, an
element to float32 and a float32 to what the element takes (float32 passes through).

bfloat16 is the top half of a float32, so its halves unpack with a shift or a mask, and its
pack is one ``cvt.rn.bf16x2.f32`` on sm_80+ (:mod:`ropelab.bf16`).
float16 has its own exponent width, so its halves go through the hardware conversions:
``cvt.f32.f16`` (exact) and ``cvt.rn.f16.f32`` (round to nearest even, overflow to infinity,
NaN kept).  Numba has no way to reinterpret 16 bits as a ``float16`` scalar, so two small
intrinsics do the bitcast and the conversion in LLVM IR (``fpext half`` / ``fptrunc ... to
half``, which NVVM lowers to exactly those ``cvt`` instructions).  Under the simulator the same
names are plain Python on NumPy scalars, whose float16 conversions round the same way.
"""

from numba import cuda, float32, uint32

from ..bf16 import load_bf16, store_bf16
from ..bf16 import pack2 as _bf16_pack2
from ..bf16 import unpack_high as _bf16_high
from ..bf16 import unpack_low as _bf16_low
from ..target import SIMULATED

if SIMULATED:
    import numpy as np

    def f16_bits_to_f32(bits):
        """The float32 value of the float16 in the low 16 bits of ``bits``."""
        half = np.array(int(bits) & 0xFFFF, np.uint16).view(np.float16)[()]
        return np.float32(half)

    def f32_to_f16_bits(x):
        """float32 -> float16 bits (round to nearest even) in the low half of a uint32."""
        return np.uint32(np.array(np.float32(x), np.float32).astype(np.float16).view(np.uint16)[()])

else:
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.cuda.extending import intrinsic

    _HALF = ir.HalfType()
    _I16 = ir.IntType(16)

    @intrinsic
    def f16_bits_to_f32(typingctx, bits):
        """The float32 value of the float16 in the low 16 bits of ``bits`` (exact)."""
        if not isinstance(bits, types.Integer) or bits.bitwidth < 16:
            raise TypingError(f"f16_bits_to_f32 needs an integer of 16 bits or more, got {bits}")

        def codegen(context, builder, sig, args):
            low = args[0] if bits.bitwidth == 16 else builder.trunc(args[0], _I16)
            return builder.fpext(builder.bitcast(low, _HALF), ir.FloatType())

        return types.float32(bits), codegen

    @intrinsic
    def f32_to_f16_bits(typingctx, x):
        """float32 -> float16 bits (round to nearest even) in the low half of a uint32."""
        if x != types.float32:  # a float64 would be rounded from double, not from float32
            raise TypingError(f"f32_to_f16_bits needs a float32, got {x}")

        def codegen(context, builder, sig, args):
            half = builder.fptrunc(args[0], _HALF)
            return builder.zext(builder.bitcast(half, _I16), ir.IntType(32))

        return types.uint32(x), codegen


@cuda.jit(device=True, inline="always")
def _f16_low(word):
    return f16_bits_to_f32(uint32(word))


@cuda.jit(device=True, inline="always")
def _f16_high(word):
    return f16_bits_to_f32(uint32(word) >> uint32(16))


@cuda.jit(device=True, inline="always")
def _f16_pack(lo, hi):
    return f32_to_f16_bits(lo) | (f32_to_f16_bits(hi) << uint32(16))


# storage -> (low half to float32, high half to float32, two float32 to one word)
CODECS = {
    "bfloat16": (_bf16_low, _bf16_high, _bf16_pack2),
    "float16": (_f16_low, _f16_high, _f16_pack),
}


# One element at a time, for kernels that read and write single elements (pair_sincos, the
# pack4 fallback): storage -> (element to float32, float32 to what the element takes).
# float32 passes through (the float32 builds compile as before); a float16 array rounds on
# assignment (cvt.rn.f16.f32, round to nearest even); bfloat16 bits are rounded by store_bf16.

@cuda.jit(device=True, inline="always")
def _as_float32(v):
    return float32(v)


@cuda.jit(device=True, inline="always")
def _as_is(v):
    return v


ELEMENT_CODECS = {
    "float32": (_as_float32, _as_is),
    "float16": (_as_float32, _as_is),
    "bfloat16": (load_bf16, store_bf16),
}
