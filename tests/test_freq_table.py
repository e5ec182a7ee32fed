"""freq_table in its three modes against the float64 reference, on shapes that fill no block evenly.

Budget: about 10 s on the simulator (each launch is at most a few hundred threads).
"""

import math

import numpy as np
import pytest
from numba import cuda

import ropelab
from reference_check import assert_matches_reference as check
from ropelab import RopeInputError, reference
from ropelab.kernels import freq_table
from ropelab.kernels._device import NO_SHIFT
from ropelab.kernels.launch import launch
from ropelab.problem import RopeProblem
from ropelab.scaling import Llama3, YaRN, resolve

MODES = {"table": {}, "cache": {"cache": True, "max_positions": 1000}, "reduced": {"reduce_angle": True}}




@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("opts", [
    dict(),
    dict(interleave=False),
    dict(rotary_dim=6, inverse=True),
    dict(rotary_dim=10, interleave=False, scaling=YaRN(4.0, 64)),
    dict(scaling=Llama3(8.0, 1.0, 4.0, 64), inverse=True),
], ids=["gptj", "neox", "partial-inverse", "partial-neox-yarn", "llama3-inverse"])
def test_modes_layouts_schemes_with_heads(rng, mode, opts):
    x = rng.standard_normal((5, 3, 18)).astype(np.float32)  # 5 x 3 x 9 = 135 slots
    pos = rng.integers(0, 1000, 5).astype(np.int32)
    got = ropelab.rope(x, variant="freq_table", positions=pos, **opts, **MODES[mode])
    assert got.shape == x.shape
    check(x, got, pos, variant_options=MODES[mode], **opts)  # each mode its own error model


@pytest.mark.parametrize("mode", list(MODES))
def test_two_d_input_and_precise_math(rng, mode):
    x = rng.standard_normal((7, 22)).astype(np.float32)
    pos = rng.integers(0, 1000, 7).astype(np.int32)
    got = ropelab.rope(x, variant="freq_table", positions=pos, fastmath=False, rotary_dim=14,
                       **MODES[mode])
    check(x, got, pos, fastmath=False, rotary_dim=14, variant_options=MODES[mode])


def test_every_element_is_written_and_the_tail_passes_through(rng):
    problem = RopeProblem(tokens=3, heads=2, head_dim=10, rotary_dim=4, interleave=False)
    host = rng.standard_normal(problem.elements).astype(np.float32)
    for mode, options in MODES.items():
        out = cuda.to_device(np.full(problem.elements, np.nan, np.float32))
        plan = freq_table.VARIANT.plan(problem, options, threads=32)
        launch(plan, (cuda.to_device(host), out, cuda.to_device(np.array([1, 0, 999], np.int32))))
        got = out.copy_to_host().reshape(3, 2, 10)
        assert np.isfinite(got).all(), mode
        np.testing.assert_array_equal(got[..., 4:], host.reshape(3, 2, 10)[..., 4:])


def test_tables_hold_the_scaled_float64_frequencies():
    freqs, att = resolve(YaRN(4.0, 256), rotary_dim=32, base=1e4)
    problem = RopeProblem(2, 1, 32, 32, inv_freq=freqs, attention_factor=att, scaling=YaRN(4.0, 256))
    table = freq_table.VARIANT.plan(problem)
    np.testing.assert_array_equal(table.tables[0], freqs.astype(np.float32))
    assert table.position_limit is None and not table.errors
    cache = freq_table.VARIANT.plan(problem, {"cache": True, "max_positions": 50})
    assert cache.position_limit == 50 and cache.errors
    cos, sin = cache.tables
    assert cos.shape == sin.shape == (50, 16) and cos.dtype == np.float32
    theta = np.outer(np.arange(50), freqs)
    np.testing.assert_array_equal(cos, np.cos(theta).astype(np.float32))
    np.testing.assert_array_equal(sin, np.sin(theta).astype(np.float32))
    hi, lo = freq_table.turns_tables(freqs)
    np.testing.assert_allclose(hi.astype(np.float64) + lo, freqs / (2 * math.pi), rtol=1e-13, atol=0)


def _emulated_reduced_angle(pos, hi, lo):
    """The kernel's reduction in NumPy float32, with an exact fma (float64 holds the exact
    product of two float32 numbers)."""
    p = np.float32(pos)
    t = np.float32(p * hi)
    err = np.float32(np.float64(p) * np.float64(hi) - np.float64(t))
    frac = np.float32(np.float32(t - np.float32(np.int64(t))) +
                      np.float32(np.float64(err) + np.float64(p) * np.float64(lo)))
    return np.float32(frac * np.float32(2 * math.pi))


def _wrapped(a):
    return np.abs(np.angle(np.exp(1j * a)))


def test_angle_reduction_algorithm_is_accurate_at_long_context():
    # The algorithm in NumPy, apart from the kernel: the kernel itself meets the same claim on
    # the simulator (its cuda.fma is the once-rounded shim) in test_tolerance.py.
    freqs = reference.inv_freq(128)
    hi, lo = freq_table.turns_tables(freqs)
    worst_reduced = worst_naive = 0.0
    for pos in (4097, 65535, 100003, 131072):
        exact = pos * freqs
        reduced = np.array([_emulated_reduced_angle(pos, h, l) for h, l in zip(hi, lo)], np.float64)
        naive = (np.float32(pos) * freqs.astype(np.float32)).astype(np.float64)
        worst_reduced = max(worst_reduced, _wrapped(reduced - exact).max())
        worst_naive = max(worst_naive, _wrapped(naive - exact).max())
    assert worst_reduced < 2e-6, worst_reduced
    assert worst_naive > 1e-3, worst_naive  # the float32 product alone is far off at 1e5 rad


@pytest.mark.parametrize("kwargs, match", [
    (dict(cache=True), "needs max_positions"),
    (dict(max_positions=10), "pass cache=True"),
    (dict(cache=True, max_positions=0), ">= 1"),
    (dict(cache=True, max_positions=10.0), "int"),
    (dict(cache=True, max_positions=10, reduce_angle=True), "not both"),
    (dict(cache=True, max_positions=2**30), "reduce_angle"),
    (dict(cache=True, max_positions=8, positions=np.array([0, 1, 8], np.int32)), "position 8 is out of range: the cos/sin cache holds positions 0 .. 7"),
    (dict(cache=True, max_positions=2), "position 2 is out of range: the cos/sin cache holds positions 0 .. 1"),  # default positions 0..2
])
def test_bad_options_raise_before_launch(launches, kwargs, match):
    with pytest.raises((RopeInputError, TypeError), match=match):
        ropelab.rope(np.ones((3, 8), np.float32), variant="freq_table", **kwargs)
    assert launches == []


def test_device_positions_beyond_the_cache_are_refused_when_checked(launches):
    # check_positions=True: the opt-in synchronous check (the default flags them on the device).
    with pytest.raises(RopeInputError, match="out of range"):
        ropelab.rope(cuda.to_device(np.ones((3, 8), np.float32)), variant="freq_table", cache=True,
                     max_positions=4, positions=cuda.to_device(np.array([0, 4, 1], np.int32)),
                     check_positions=True)
    with pytest.raises(TypeError, match="cache must be True or False"):
        ropelab.rope(np.ones((3, 8), np.float32), variant="freq_table", cache="yes")
    with pytest.raises(TypeError):
        ropelab.rope(np.ones((3, 8), np.float32), variant="freq_table", cahce=True)
    assert launches == []


def test_the_last_cached_position_is_accepted(rng):
    x = rng.standard_normal((2, 8)).astype(np.float32)
    pos = np.array([0, 7], np.int32)
    got = ropelab.rope(x, variant="freq_table", positions=pos, cache=True, max_positions=8)
    check(x, got, pos, variant_options=dict(cache=True))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("heads", [3, 4])
def test_power_of_two_head_sizes_take_the_shift_path(rng, mode, heads):
    # 8 slots a head: the slot and head row come from a shift; 4 heads a token shift too, 3 divide.
    x = rng.standard_normal((3, heads, 16)).astype(np.float32)
    pos = rng.integers(0, 1000, 3).astype(np.int32)
    args = freq_table.scalar_args(RopeProblem(3, heads, 16, 12, interleave=False))
    assert [int(a) for a in args[:4]] == [heads, {3: NO_SHIFT, 4: 2}[heads], 8, 3]
    got = ropelab.rope(x, variant="freq_table", positions=pos, rotary_dim=12, interleave=False,
                       **MODES[mode])
    check(x, got, pos, rotary_dim=12, interleave=False, variant_options=MODES[mode])
    np.testing.assert_array_equal(got[..., 12:], x[..., 12:])


def test_scalar_args_are_typed_as_the_kernel_wants():
    a = RopeProblem(3, 2, 16, 16)
    b = RopeProblem(5, 2, 16, 16)  # equal in all but tokens: a different total_slots
    first = freq_table.scalar_args(a)
    assert freq_table.scalar_args(b)[5] == 5 * 2 * 8 and first[5] == 3 * 2 * 8
    # uint64 index math, int64 for the bound compared with the signed cuda.grid(1), float32 scales
    assert [type(v) for v in first] == [np.uint64] * 5 + [np.int64] + [np.uint64] * 2 + [np.float32] * 2
