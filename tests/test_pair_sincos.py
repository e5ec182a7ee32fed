"""pair_sincos: chunks of pairs per thread, the ratio recurrence, the in-kernel YaRN/Llama 3.1 blend.

Budget: about 10 s on the simulator.
"""

import numpy as np
import pytest
from numba import cuda

import ropelab
from reference_check import assert_matches_reference as check
from ropelab import RopeInputError, reference
from ropelab.kernels import pair_sincos
from ropelab.kernels.launch import launch
from ropelab.kernels.plan import jitted
from ropelab.problem import RopeProblem
from ropelab.scaling import NTK, Linear, Llama3, YaRN, resolve
from ropelab.tolerance import max_angle, rope_atol

SCHEMES = [None, Linear(3.0), NTK(4.0), YaRN(4.0, 64), YaRN(16.0, 512, beta_fast=8.0, beta_slow=2.0,
                                                             truncate=False),
           Llama3(8.0, 1.0, 4.0, 64), Llama3(4.0, 2.0, 3.0, 200)]




@pytest.mark.parametrize("scheme", SCHEMES, ids=repr)
@pytest.mark.parametrize("rotary_dim", [32, 64])
def test_in_kernel_formula_reproduces_every_scheme(scheme, rotary_dim):
    """The parameters the kernel gets, evaluated in float64, are the scheme's frequencies."""
    params = pair_sincos.freq_params(scheme, rotary_dim, 1e4)
    freqs, _ = resolve(scheme, rotary_dim=rotary_dim, base=1e4)
    np.testing.assert_allclose(params.freqs(rotary_dim // 2), freqs, rtol=1e-12, atol=0)
    if isinstance(scheme, (YaRN, Llama3)):
        assert params.ramp_mode != pair_sincos.RAMP_NONE
        geometric = params.freq_scale * params.freq_base ** (params.exponent_step * np.arange(rotary_dim // 2))
        assert not np.allclose(geometric, freqs)  # the blend is doing real work here


@pytest.mark.parametrize("chunk", [1, 3, 4, 64])
@pytest.mark.parametrize("opts", [
    dict(),
    dict(interleave=False, inverse=True),
    dict(rotary_dim=14, scaling=YaRN(4.0, 64)),
    dict(rotary_dim=14, interleave=False, scaling=Llama3(8.0, 1.0, 4.0, 64)),
], ids=["gptj", "neox-inverse", "partial-yarn", "partial-neox-llama3"])
def test_layouts_and_chunks_with_heads(rng, chunk, opts):
    x = rng.standard_normal((5, 2, 22)).astype(np.float32)  # 11 slots a head: no chunk divides it
    pos = rng.integers(0, 3000, 5).astype(np.int32)
    got = ropelab.rope(x, variant="pair_sincos", positions=pos, pairs_per_thread=chunk, **opts)
    check(x, got, pos, **opts)


@pytest.mark.parametrize("scheme", [Linear(2.0), NTK(2.0)], ids=repr)
def test_geometric_schemes_and_precise_math(rng, scheme):
    x = rng.standard_normal((6, 20)).astype(np.float32)
    pos = rng.integers(0, 3000, 6).astype(np.int32)
    got = ropelab.rope(x, variant="pair_sincos", positions=pos, scaling=scheme, fastmath=False)
    check(x, got, pos, scaling=scheme, fastmath=False)


def test_every_element_is_written_and_the_tail_passes_through(rng):
    problem = RopeProblem(tokens=3, heads=2, head_dim=18, rotary_dim=6)
    host = rng.standard_normal(problem.elements).astype(np.float32)
    out = cuda.to_device(np.full(problem.elements, np.nan, np.float32))
    plan = pair_sincos.VARIANT.plan(problem, {"pairs_per_thread": 4}, threads=32)
    launch(plan, (cuda.to_device(host), out, cuda.to_device(np.array([2, 0, 40], np.int32))))
    got = out.copy_to_host().reshape(3, 2, 18)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got[..., 6:], host.reshape(3, 2, 18)[..., 6:])


def test_drift_kernel_recurrence_matches_pow_for_chunks_of_one():
    params = pair_sincos.freq_params(None, 32, 1e4)
    p = cuda.device_array(16, np.float32)
    r = cuda.device_array(16, np.float32)
    for chunk in (1, 5, 16):
        args = pair_sincos.drift_args(params, 16, chunk)
        jitted(pair_sincos.DRIFT_KERNEL)[1, 32](p, r, np.int64(16), *args)
        pw, rec = p.copy_to_host(), r.copy_to_host()
        np.testing.assert_allclose(pw, reference.inv_freq(32), rtol=1e-6)
        np.testing.assert_allclose(rec, reference.inv_freq(32), rtol=1e-5)
        # a thread's first slot (j < stride) takes no multiplication, so both paths agree exactly
        stride = int(args[0])
        assert stride == -(-16 // chunk)
        np.testing.assert_array_equal(rec[:stride], pw[:stride])


@pytest.mark.parametrize("value, exc, match", [
    (0, RopeInputError, ">= 1"), (65, RopeInputError, "<= 64"), (2.0, TypeError, "int"),
    (True, TypeError, "int"),
])
def test_bad_pairs_per_thread_raise_before_launch(launches, value, exc, match):
    with pytest.raises(exc, match=match):
        ropelab.rope(np.ones((3, 8), np.float32), variant="pair_sincos", pairs_per_thread=value)
    with pytest.raises(TypeError):
        ropelab.rope(np.ones((3, 8), np.float32), variant="pair_sincos", cache=True)
    assert launches == []


def test_prepare_refuses_frequencies_it_cannot_reproduce():
    # A problem whose table does not come from a known scheme: the kernel's formula would be wrong.
    problem = RopeProblem(2, 1, 8, 8, inv_freq=np.array([1.0, 0.5, 0.2, 0.01]))
    with pytest.raises(RuntimeError, match="disagree"):
        pair_sincos.VARIANT.plan(problem)


def test_each_thread_owns_slots_one_stride_apart(rng):
    # Launch only the first thread or two of the grid: the elements they write show the layout.
    # 10 slots a head, 4 pairs a thread: stride 3 threads a head, thread t owns t, t+3, t+6, t+9.
    problem = RopeProblem(tokens=2, heads=2, head_dim=20, rotary_dim=16)
    args = list(pair_sincos.VARIANT.plan(problem, {"pairs_per_thread": 4}).scalars)
    assert int(args[4]) == 3  # stride: threads per head
    host = rng.standard_normal(problem.elements).astype(np.float32)
    for first_threads, want_slots in ((1, [0, 3, 6, 9]), (2, [0, 1, 3, 4, 6, 7, 9])):
        args[6] = np.int64(first_threads)  # total_threads
        out = cuda.to_device(np.full(problem.elements, np.nan, np.float32))
        jitted(pair_sincos.KERNEL)[1, 32](cuda.to_device(host), out,
                                          cuda.to_device(np.array([5, 9], np.int32)), *args)
        written = np.isfinite(out.copy_to_host().reshape(2, 2, 10, 2))  # token, head, slot, element
        assert written[0, 0].all(axis=1).tolist() == [s in want_slots for s in range(10)]
        assert written[0, 0].any(axis=1).tolist() == [s in want_slots for s in range(10)]
        assert not written[1].any() and not written[0, 1].any()


def test_stride_ratio_is_the_float64_power_rounded_once():
    params = pair_sincos.freq_params(None, 128, 1e4)
    f = params.freqs(64)
    for stride in (1, 3, 16, 63):
        got = params.kernel_args(stride)[3]
        assert got == np.float32(params.ratio ** stride)
        assert got == np.float32(f[stride] / f[0])  # what advancing `stride` pairs multiplies by
    assert params.kernel_args()[3] == np.float32(params.ratio)


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_non_power_of_two_heads_and_strides(rng, chunk):
    # 3 heads (divided, not shifted); 8 slots a head: strides 8, 4 (shifted) and 3 (divided).
    x = rng.standard_normal((4, 3, 16)).astype(np.float32)
    pos = rng.integers(0, 3000, 4).astype(np.int32)
    got = ropelab.rope(x, variant="pair_sincos", positions=pos, pairs_per_thread=chunk,
                       interleave=False, rotary_dim=12)
    check(x, got, pos, interleave=False, rotary_dim=12)
    np.testing.assert_array_equal(got[..., 12:], x[..., 12:])


def test_tiny_rotary_with_a_stride_ratio_that_underflows(rng):
    # 32 threads a head, 2 rotated pairs: ratio ** 32 = 1e-64 rounds to 0 in float32, but no
    # rotated pair is ever reached by a step, so the result is still right.
    problem_ratio = pair_sincos.freq_params(None, 4, 1e4).kernel_args(32)[3]
    assert problem_ratio == 0.0
    x = rng.standard_normal((2, 64)).astype(np.float32)
    pos = np.array([7, 2999], np.int32)
    got = ropelab.rope(x, variant="pair_sincos", positions=pos, pairs_per_thread=1, rotary_dim=4)
    check(x, got, pos, rotary_dim=4)
    np.testing.assert_array_equal(got[:, 4:], x[:, 4:])


def test_shift_for_marks_powers_of_two_only():
    shift_for = pair_sincos.shift_for
    assert [shift_for(d) for d in (1, 2, 4, 64, 2**20)] == [0, 1, 2, 6, 20]
    assert {shift_for(d) for d in (3, 6, 7, 12, 100)} == {64}


def test_in_place_matches_out_of_place(rng):
    # The loop loads the next step's pair before storing this one; in place, that must still
    # read only values no thread has overwritten yet.
    problem = RopeProblem(tokens=3, heads=2, head_dim=18, rotary_dim=14)
    host = rng.standard_normal(problem.elements).astype(np.float32)
    pos = cuda.to_device(np.array([3, 0, 2000], np.int32))
    plan = pair_sincos.VARIANT.plan(problem, {"pairs_per_thread": 3}, threads=32)
    out = cuda.device_array_like(host)
    launch(plan, (cuda.to_device(host), out, pos))
    both = cuda.to_device(host)
    launch(plan, (both, both, pos))
    np.testing.assert_array_equal(both.copy_to_host(), out.copy_to_host())
    assert not np.array_equal(out.copy_to_host(), host)
