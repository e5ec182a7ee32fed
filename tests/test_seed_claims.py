"""The controlled experiments behind the seed-claims ledger (ropelab.measure.seed_claims)."""

import numpy as np
import pytest

import ropelab
from ropelab import reference
from ropelab.measure import seed_claims as sc
from ropelab.tolerance import max_angle, rope_atol

YARN = (4.0, 3.0, 20.0)  # factor, low, high: the ramp crosses the 32 pairs of a 64-float head


@pytest.mark.parametrize("per_pair, yarn", [(True, "off"), (False, "off"), (True, "on"),
                                            (True, "runtime"), (False, "runtime")])
def test_every_build_rotates_like_the_reference(per_pair, yarn):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)  # 3 heads: the last block is ragged
    pos = np.array([5, 1234], dtype=np.int32)
    params = YARN if yarn != "off" else (1.0, 0.0, 1.0)
    freqs = sc.host_freqs(64, yarn=YARN if yarn != "off" else None)
    got = sc.run(x.copy(), pos, per_pair=per_pair, yarn=yarn, yarn_params=params)
    want = reference.rope(x, pos, freqs=freqs)
    tol = rope_atol(float(np.abs(x).max()), max_angle(pos, freqs), fastmath=True)
    assert np.abs(got - want).max() <= tol


def test_the_runtime_yarn_build_skips_the_blend_when_factor_is_one():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 1, 64)).astype(np.float32)
    pos = np.array([300], dtype=np.int32)
    plain = sc.run(x.copy(), pos, yarn="off")
    runtime = sc.run(x.copy(), pos, yarn="runtime", yarn_params=(1.0, 3.0, 20.0))
    np.testing.assert_array_equal(plain, runtime)


def test_bad_builds_are_refused():
    with pytest.raises(ValueError, match="yarn must be one of"):
        sc.make_kernel(True, "maybe")
    with pytest.raises(ValueError, match="multiple of 64"):
        sc.make_kernel(True, "off", head_dim=96)


def test_host_freqs_blend_towards_freq_over_factor():
    plain = sc.host_freqs(64)
    blended = sc.host_freqs(64, yarn=YARN)
    np.testing.assert_allclose(plain, reference.inv_freq(64))
    assert blended[0] == plain[0]  # below low: kept
    np.testing.assert_allclose(blended[25:], plain[25:] / 4.0)  # above high: divided by factor


def test_census_of_the_claims():
    """What the ledger reads: compile both compilers' builds (or read the cache)."""
    doc = sc.census()
    row = lambda compiler, kernel: sc.census_row(doc, compiler, kernel)  # noqa: E731
    # __sincosf is one sin and one cos on the SFU, the same as __sinf + __cosf.
    assert row("nvrtc", "sincosf_intrinsic")["sfu"] == row("nvrtc", "sinf_and_cosf")["sfu"]
    # Compile-time YaRN: the off build has neither the blend nor a branch on the factor.
    for compiler, prefix in (("numba", ""), ("nvrtc", "sglang_")):
        off = row(compiler, f"{prefix}per_pair")
        on = row(compiler, f"{prefix}per_pair_yarn_on")
        runtime = row(compiler, f"{prefix}per_pair_yarn_runtime")
        assert off["instructions"] < on["instructions"] < runtime["instructions"]
        assert runtime["branches"] > off["branches"] == on["branches"]
    # Per pair never evaluates more sines than per element.
    for compiler, prefix in (("numba", ""), ("nvrtc", "sglang_")):
        assert (row(compiler, f"{prefix}per_pair")["sfu"]["sin"]
                <= row(compiler, f"{prefix}per_element")["sfu"]["sin"])
