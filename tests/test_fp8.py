"""FP8 e4m3 (ropelab.fp8): the host and the device conversion against torch's
``Tensor.to(torch.float8_e4m3fn)``, bit for bit, on every e4m3 value, every midpoint between
two of them (the ties), both neighbours of each midpoint, the saturation range, float32
subnormals, infinities, NaNs of both signs and random float32 bit patterns.

NaN policy (torch's, kept): a NaN becomes 0x7F with the input's sign bit (0xFF when it is set).
Saturation: every magnitude from 448 up, infinity included, becomes +-448 (0x7E / 0xFE).
"""

import numpy as np
import pytest
from numba import cuda

from ropelab import fp8

torch = pytest.importorskip("torch")


def _values(rng, random_count):
    finite = fp8.to_float32(np.arange(256, dtype=np.uint8))
    finite = np.unique(finite[np.isfinite(finite)])  # -448 .. 448, -0 and 0 as one
    mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2  # exact in float32 (4 bits)
    mids = mids.astype(np.float32)
    around = np.concatenate([np.nextafter(mids, np.float32(np.inf)),
                             np.nextafter(mids, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, 448.0, 449.0, 463.99, 464.0, 464.01, 479.9, 480.0, 1e6, 3e38,
                        np.inf, -np.inf, 2.0**-9, 2.0**-10, 2.0**-11, 3 * 2.0**-10, 2.0**-6,
                        2.0**-6 - 2.0**-10, 1e-40, -1e-40, 1.4e-45], np.float32)
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345], np.uint32).view(np.float32)
    random = rng.integers(0, 2**32, random_count, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([finite, mids, around, special, -special, nans, random])


def _torch_bits(x):
    """torch's cast of the value clamped to +-448: the saturating conversion on every torch.
    (torch 2.13's cast saturates by itself; 2.11's, on the H200 image, turns a magnitude past
    448 into NaN.  The clamp leaves NaN a NaN and every in-range value as it was.)"""
    t = torch.from_numpy(np.ascontiguousarray(x, np.float32))
    return t.clamp(-fp8.MAX, fp8.MAX).to(torch.float8_e4m3fn).view(torch.uint8).numpy()


def test_host_conversion_is_torchs_bit_for_bit(rng):
    x = _values(rng, 300_000)
    np.testing.assert_array_equal(fp8.from_float32(x), _torch_bits(x))
    # The stated policies, spelled out (torch agrees, above):
    nan = np.array([0x7FC00000, 0xFFC00000], np.uint32).view(np.float32)
    assert fp8.from_float32(nan).tolist() == [0x7F, 0xFF]
    assert fp8.from_float32(np.array([np.inf, -np.inf, 1e30, 460.0], np.float32)).tolist() == \
        [0x7E, 0xFE, 0x7E, 0x7E]


def test_device_conversion_is_torchs_bit_for_bit(rng):
    # The device function itself, on the simulator (its GPU build: scripts/gpu_serving_op.sh).
    x = _values(rng, 2_000)
    got = np.array([int(fp8.e4m3_bits(np.float32(v))) for v in x], np.uint8)
    np.testing.assert_array_equal(got, _torch_bits(x))


def test_device_conversion_inside_a_kernel_packs_four_bytes_little_endian(rng):
    @cuda.jit
    def convert(x, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = fp8.pack4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3])

    x = _values(rng, 0)[:64]
    out = np.zeros(16, np.uint32)
    convert[1, 16](x, out)
    np.testing.assert_array_equal(out.view(np.uint8), _torch_bits(x))


def test_round_trip_and_quantization_error_against_the_scale(rng):
    bits = np.arange(256, dtype=np.uint8)
    values = fp8.to_float32(bits)
    finite = np.isfinite(values)
    np.testing.assert_array_equal(fp8.from_float32(values[finite]), bits[finite])
    assert np.isnan(values[[0x7F, 0xFF]]).all() and values[0x7E] == 448.0
    # Half a step: 2**-4 of the value in the normal range, 2**-10 * scale among subnormals.
    x = (rng.standard_normal(20_000) * 3).astype(np.float32)
    for scale in (0.01, 0.5, 4.0):
        back = fp8.dequantize(fp8.quantize(x, scale), scale)
        bound = 2.0**-4 * np.abs(x) + 2.0**-10 * scale
        inside = np.abs(x / scale) < 448
        assert (np.abs(back - x)[inside] <= bound[inside]).all()
        assert (np.abs(back - x)[inside] > bound[inside] / 4).any()  # the bound is tight
    # A scale too small saturates: 448 * scale is the largest value the cache can hold.
    assert fp8.dequantize(fp8.quantize(np.float32(100.0), 0.01), 0.01) == np.float32(4.48)


def test_a_planted_rounding_error_is_seen(rng):
    x = _values(rng, 1_000)
    wrong = fp8.from_float32(x)
    wrong[len(wrong) // 2] ^= 1  # one bit of one value
    assert not np.array_equal(wrong, _torch_bits(x))
