"""bfloat16 <-> float32 bit conversion (ropelab.bf16), host and device, against exact values.

Budget: about 2 s (one 512-thread simulated kernel).
"""

import numpy as np
import pytest
from numba import cuda

from ropelab import bf16

# (float32 bits, bfloat16 bits after round to nearest even), worked out by hand.
EXACT = [
    (0x3F800000, 0x3F80),  # 1.0
    (0xBF800000, 0xBF80),  # -1.0
    (0x00000000, 0x0000),  # +0
    (0x80000000, 0x8000),  # -0
    (0x3F808000, 0x3F80),  # 1 + 2**-8: a tie, mantissa 0 is even -> down
    (0x3F818000, 0x3F82),  # a tie with odd mantissa 1 -> up to 2
    (0x3F808001, 0x3F81),  # just above the tie -> up
    (0x3F807FFF, 0x3F80),  # just below the tie -> down
    (0x40490FDB, 0x4049),  # pi -> 3.140625
    (0x7F7FFFFF, 0x7F80),  # float32 max rounds up to +inf
    (0x7F7F7FFF, 0x7F7F),  # below the tie: stays the largest finite bfloat16
    (0x7F800000, 0x7F80),  # +inf
    (0xFF800000, 0xFF80),  # -inf
    (0x7FC00000, 0x7FC0),  # quiet NaN
    (0x7F800001, 0x7FC0),  # signalling NaN whose payload would round away: stays NaN, quiet
    (0xFFFFFFFF, 0xFFFF),  # negative NaN with all bits set: no carry into the sign
    (0x00000001, 0x0000),  # smallest subnormal -> +0
    (0x00018000, 0x0002),  # subnormal tie with odd mantissa -> up
]


def _f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def test_host_rounding_matches_hand_worked_values():
    got = bf16.from_float32(_f32([a for a, _ in EXACT]))
    np.testing.assert_array_equal(got, np.array([b for _, b in EXACT], np.uint16))


def test_every_bfloat16_survives_a_round_trip():
    bits = np.arange(2**16, dtype=np.uint16)
    values = bf16.to_float32(bits)
    back = bf16.from_float32(values)
    keep = ~np.isnan(values)
    np.testing.assert_array_equal(back[keep], bits[keep])
    assert np.isnan(bf16.to_float32(back[~keep])).all()


def test_host_rounding_is_the_nearest_bfloat16(rng):
    # Independent check: of the two bfloat16 neighbours (truncation and one step away from zero),
    # the answer must be the nearer in float64, the even one on a tie.
    x = rng.uniform(-1, 1, 20000) * np.exp2(rng.integers(-130, 127, 20000))
    x = x.astype(np.float32)
    x = x[np.isfinite(x)]
    got = bf16.to_float32(bf16.from_float32(x)).astype(np.float64)
    down = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    up = ((x.view(np.uint32) & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32).astype(np.float64)
    xd = x.astype(np.float64)
    d_down, d_up = np.abs(xd - down), np.abs(up - xd)
    even_down = ((x.view(np.uint32) >> 16) & 1) == 0
    want = np.where(d_down < d_up, down, np.where(d_up < d_down, up, np.where(even_down, down, up)))
    np.testing.assert_array_equal(got, want)


def test_to_float32_refuses_other_dtypes():
    with pytest.raises(TypeError, match="uint16"):
        bf16.to_float32(np.zeros(3, np.int16))


def round_trip_kernel(x, bits_out, back_out):
    i = cuda.grid(1)
    if i < x.size:
        b = bf16.store_bf16(x[i])
        bits_out[i] = b
        back_out[i] = bf16.load_bf16(b)


def test_device_helpers_match_the_host(rng):
    specials = _f32([a for a, _ in EXACT])
    x = np.concatenate([specials, (rng.standard_normal(500) * 1e3).astype(np.float32)])
    bits = np.zeros(x.size, np.uint16)
    back = np.zeros(x.size, np.float32)
    cuda.jit(round_trip_kernel)[(x.size + 255) // 256, 256](x, bits, back)
    np.testing.assert_array_equal(bits, bf16.from_float32(x))
    want_back = bf16.to_float32(bits)
    same = (back.view(np.uint32) == want_back.view(np.uint32)) | (np.isnan(back) & np.isnan(want_back))
    assert same.all()


def pack_kernel(words, lo_out, hi_out, repacked):
    i = cuda.grid(1)
    if i < words.size:
        lo_out[i] = bf16.unpack_low(words[i])
        hi_out[i] = bf16.unpack_high(words[i])
        repacked[i] = bf16.pack2(lo_out[i], hi_out[i])


def test_packed_words_hold_element_2k_low_and_2k_plus_1_high(rng):
    bits = bf16.random_bf16(rng, 128)
    words = bits.view(np.uint32)  # little-endian: bits[2k] is the low half of word k
    lo, hi = np.zeros(64, np.float32), np.zeros(64, np.float32)
    again = np.zeros(64, np.uint32)
    cuda.jit(pack_kernel)[1, 64](words, lo, hi, again)
    np.testing.assert_array_equal(lo, bf16.to_float32(bits[0::2]))
    np.testing.assert_array_equal(hi, bf16.to_float32(bits[1::2]))
    np.testing.assert_array_equal(again, words)


# Halfway cases, subnormals, infinities and NaNs of both signs, for the hardware-style pack.
PACK_SPECIALS = [a for a, _ in EXACT] + [
    0x3F80C000, 0xBF808000, 0xBF818000,  # more ties (odd up, even down), negative too
    0x007F8000, 0x80008000, 0x00800000,  # subnormal ties, smallest normal
    0x7F7F8000, 0xFF7F8000,  # ties at the top: odd mantissa rounds up to +-inf
    0x7FFFFFFF, 0xFFC00000, 0xFF800001, 0x7FA00000,  # NaNs: quiet, signalling, negative
]


def test_cvt_rule_is_the_reference_except_nan_is_canonical(rng):
    x = np.concatenate([_f32(PACK_SPECIALS), rng.integers(0, 2**32, 50000, dtype=np.uint32).view(np.float32)])
    got = bf16.from_float32_cvt(x)
    nan = np.isnan(x)
    assert nan.sum() > 100  # random bit patterns include NaNs (about 1 in 256)
    np.testing.assert_array_equal(got[~nan], bf16.from_float32(x[~nan]))
    assert (got[nan] == bf16.CANONICAL_NAN).all()
    assert bf16.CANONICAL_NAN & bf16.NAN_QUIET_BIT  # a quiet NaN


def pair_kernel(lo, hi, words):
    i = cuda.grid(1)
    if i < words.size:
        words[i] = bf16.pack2(lo[i], hi[i])


def test_pack2_matches_the_cvt_rule_bit_for_bit(rng):
    # On a GPU this checks cvt.rn.bf16x2.f32 itself (operand order, rounding, NaN); on the
    # simulator, the simulator's twin of it.
    specials = _f32(PACK_SPECIALS)
    n = 1024
    lo = np.concatenate([specials, rng.integers(0, 2**32, n, dtype=np.uint32).view(np.float32),
                         (rng.standard_normal(n) * 1e3).astype(np.float32)])
    hi = np.concatenate([specials[::-1], rng.integers(0, 2**32, n, dtype=np.uint32).view(np.float32),
                         (rng.standard_normal(n) * 1e-3).astype(np.float32)])
    words = np.zeros(lo.size, np.uint32)
    cuda.jit(pair_kernel)[(lo.size + 255) // 256, 256](lo, hi, words)
    np.testing.assert_array_equal(words & np.uint32(0xFFFF), bf16.from_float32_cvt(lo))
    np.testing.assert_array_equal(words >> np.uint32(16), bf16.from_float32_cvt(hi))


@pytest.mark.skipif(not bf16.SIMULATED, reason="calls the simulator's pack2 as a Python function")
def test_simulated_pack2_over_many_random_pairs(rng):
    x = rng.integers(0, 2**32, (20000, 2), dtype=np.uint32).view(np.float32)
    got = np.array([bf16.pack2(a, b) for a, b in x], dtype=np.uint32)
    want = bf16.from_float32_cvt(x).astype(np.uint32)
    np.testing.assert_array_equal(got, want[:, 0] | (want[:, 1] << np.uint32(16)))
