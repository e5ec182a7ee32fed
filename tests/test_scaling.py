"""Scaling schemes: values worked out by hand from each formula, HF-style dicts, bad parameters,
YaRN's two forms (Hugging Face's and SGLang's ramp bounds) in one class.

Few kernels run here (one tiny launch each); budget: about 3 s.
"""

import math

import numpy as np
import pytest

import ropelab
from ropelab import RopeInputError, reference, scaling
from ropelab.kernels import pair_sincos
from ropelab.scaling import NTK, Linear, Llama3, YaRN, resolve
from test_freqs import llama3_by_hand, yarn_by_hand


def test_linear_divides_every_frequency():
    # rotary_dim 4, base 100: default frequencies 100**0 = 1 and 100**(-2/4) = 0.1.
    freqs, att = resolve(Linear(2.0), rotary_dim=4, base=100.0)
    np.testing.assert_allclose(freqs, [0.5, 0.05], rtol=1e-15)
    assert att == 1.0


def test_ntk_changes_the_base():
    # base' = 100 * 4 ** (4 / 2) = 1600, so the frequencies are 1 and 1600 ** -0.5 = 0.025:
    # the highest is kept and the lowest (0.1) is divided by the factor exactly.
    freqs, att = resolve(NTK(4.0), rotary_dim=4, base=100.0)
    np.testing.assert_allclose(freqs, [1.0, 0.025], rtol=1e-14)
    assert att == 1.0
    assert scaling.ntk_base(4, 100.0, 4.0) == pytest.approx(1600.0)


def test_yarn_by_hand():
    # rotary_dim 8, base 1e4 -> f = 1, 0.1, 0.01, 0.001; original context 4096, factor 4.
    # correction dim for b turns: 8 * ln(4096 / (2 pi b)) / (2 ln 1e4)
    #   b = 32: 8 * ln(20.37) / 18.42 = 1.309 -> floor 1;  b = 1: 8 * ln(651.9) / 18.42 = 2.814 -> ceil 3
    # ramp over pairs 0..3: clip((i - 1) / 2) = 0, 0, 0.5, 1
    low, high = scaling.yarn_correction_range(8, 1e4, 4096, 32.0, 1.0)
    assert (low, high) == (1, 3)
    freqs, att = resolve(YaRN(4.0, 4096), rotary_dim=8, base=1e4)
    expected = [1.0, 0.1, 0.5 * 0.01 + 0.5 * 0.01 / 4, 0.001 / 4]
    np.testing.assert_allclose(freqs, expected, rtol=1e-13)
    assert att == pytest.approx(0.1 * math.log(4.0) + 1.0)  # 1.1386


def test_yarn_without_truncation_keeps_fractional_bounds():
    low, high = scaling.yarn_correction_range(8, 1e4, 4096, 32.0, 1.0, truncate=False)
    assert low == pytest.approx(8 * math.log(4096 / (2 * math.pi * 32)) / (2 * math.log(1e4)))
    assert high == pytest.approx(8 * math.log(4096 / (2 * math.pi)) / (2 * math.log(1e4)))


def test_yarn_attention_factor_choices():
    assert YaRN(4.0, 4096, attention_factor=0.5).resolved_attention_factor() == 0.5
    # DeepSeek style: mscale(4, 1) / mscale(4, 0.707)
    y = YaRN(4.0, 4096, mscale=1.0, mscale_all_dim=0.707)
    want = (0.1 * math.log(4) + 1) / (0.1 * 0.707 * math.log(4) + 1)
    assert y.resolved_attention_factor() == pytest.approx(want)
    assert YaRN(1.0, 4096).resolved_attention_factor() == 1.0


def test_llama3_by_hand():
    # rotary_dim 8, base 1e4: f = 1, 0.1, 0.01, 0.001; wavelengths 2 pi / f = 6.28, 62.8, 628, 6283.
    # L0 = 1024, low/high freq factors 1 / 4: wavelengths below 1024/4 = 256 keep f, above 1024
    # are divided by 8, and 628 is in between with s = (1024 / 628.3 - 1) / (4 - 1).
    freqs, att = resolve(Llama3(8.0, 1.0, 4.0, 1024), rotary_dim=8, base=1e4)
    s = (1024 / (2 * math.pi / 0.01) - 1.0) / 3.0
    assert 0 < s < 1
    expected = [1.0, 0.1, (1 - s) * 0.01 / 8 + s * 0.01, 0.001 / 8]
    np.testing.assert_allclose(freqs, expected, rtol=1e-13)
    assert att == 1.0


def test_schemes_give_the_published_formulas():
    # Against plain-Python versions of Hugging Face's definitions (tests/test_freqs.py), not
    # against ropelab's own functions: this fails if a scheme or a formula drifts.
    np.testing.assert_allclose(resolve(YaRN(4.0, 2048), rotary_dim=64, base=1e4)[0],
                               yarn_by_hand(64, 1e4, 4.0, 2048), rtol=1e-13, atol=0)
    np.testing.assert_allclose(resolve(Llama3(8.0, 1.0, 4.0, 8192), rotary_dim=64, base=5e5)[0],
                               llama3_by_hand(64, 5e5, 8.0, 1.0, 4.0, 8192), rtol=1e-13, atol=0)
    np.testing.assert_allclose(resolve(Linear(3.0), rotary_dim=16, base=1e4)[0],
                               [1e4 ** (-2 * i / 16) / 3.0 for i in range(8)], rtol=1e-14)
    # NTK: base 1e4 * 2 ** (16 / 14); the last frequency is exactly half the default one.
    ntk = resolve(NTK(2.0), rotary_dim=16, base=1e4)[0]
    np.testing.assert_allclose(ntk, [(1e4 * 2.0 ** (16 / 14)) ** (-2 * i / 16) for i in range(8)],
                               rtol=1e-13)
    assert ntk[-1] == pytest.approx(1e4 ** (-14 / 16) / 2.0, rel=1e-13)


# ---- YaRN's two forms ---------------------------------------------------------------------------

def test_yarn_from_ramp_is_the_hugging_face_yarn_with_the_same_bounds():
    low, high = scaling.yarn_correction_range(64, 1e4, 2048, 32.0, 1.0)
    hf = YaRN(4.0, 2048, attention_factor=1.25)
    ramp = YaRN.from_ramp(4.0, low, high, attention_factor=1.25)
    assert ramp.ramp(64, 1e4) == hf.ramp(64, 1e4) == (low, high)
    np.testing.assert_array_equal(resolve(ramp, rotary_dim=64, base=1e4)[0],
                                  resolve(hf, rotary_dim=64, base=1e4)[0])
    assert resolve(ramp, rotary_dim=64, base=1e4)[1] == 1.25
    # SGLang's form by hand: rotary_dim 8, base 1e4 (f = 1, 0.1, 0.01, 0.001), ramp 1 .. 3.
    freqs, att = resolve(YaRN.from_ramp(2.0, 1.0, 3.0), rotary_dim=8, base=1e4)
    np.testing.assert_allclose(freqs, [1.0, 0.1, 0.5 * 0.01 + 0.5 * 0.01 / 2, 0.001 / 2], rtol=1e-14)
    assert att == 1.0  # SGLang's default: no attention scaling unless given


def test_yarn_step_when_the_bounds_meet():
    # low == high: high moves up by 0.001 (the one guard, ropelab.freqs.yarn_ramp_bounds), so
    # pairs up to low keep their frequency and the ones after it are divided by the factor.
    freqs, _ = resolve(YaRN.from_ramp(4.0, 2.0, 2.0), rotary_dim=8, base=1e4)
    np.testing.assert_allclose(freqs, [1.0, 0.1, 0.01, 0.001 / 4], rtol=1e-14)


@pytest.mark.parametrize("build, match", [
    (lambda: YaRN(4.0), "original_max_positions .* or the ramp's pair bounds"),
    (lambda: YaRN.from_ramp(4.0, 5.0, 1.0), "high .* must not be below low"),
    (lambda: YaRN(4.0, low=1.0), r"needs \['high'\]"),
    (lambda: YaRN(4.0, 2048, low=1.0, high=3.0), "not both"),
    (lambda: YaRN(4.0, beta_fast=8.0, low=1.0, high=3.0), "not both"),
    (lambda: YaRN.from_ramp(4.0, 1.0, float("inf")), "finite"),
    (lambda: YaRN.from_ramp(0.5, 1.0, 3.0), "factor must be >= 1"),
    (lambda: YaRN.from_ramp(4.0, 1.0, 3.0, attention_factor=0.0), "attention_factor must be > 0"),
    (lambda: YaRN.from_ramp(4.0, 1.0, 3.0, attention_factor=-1.2), "attention_factor must be > 0"),
    (lambda: scaling.as_fused_yarn(dict(factor=2.0, low=1.0)), r"yarn needs \['high'\]"),
    (lambda: scaling.as_fused_yarn(dict(factor=2.0, low=1.0, high=3.0, mscale=1.0)), "unknown keys"),
    (lambda: scaling.as_fused_yarn(dict(factor=2.0, low=1.0, high=3.0, attention_factor=0)),
     "attention_factor must be > 0"),
])
def test_yarn_refuses_bad_parameters(build, match):
    with pytest.raises(RopeInputError, match=match):
        build()


def test_fused_yarn_takes_the_dict_or_the_class():
    assert scaling.as_fused_yarn(None) is None
    assert scaling.as_fused_yarn(dict(factor=2.0, low=1.0, high=3.0)) == YaRN.from_ramp(2.0, 1.0, 3.0)
    hf = YaRN(4.0, 4096)
    assert scaling.as_fused_yarn(hf) is hf
    with pytest.raises(TypeError, match="yarn must be None"):
        scaling.as_fused_yarn((2.0, 1.0, 3.0))


def test_fused_kernel_takes_a_yarn_object_like_its_dict(rng):
    qkv = rng.standard_normal((2, 3 * 64)).astype(np.float32)
    weights = np.ones(64, np.float32)
    kw = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64, q_weight=weights,
              k_weight=weights, positions=np.array([3, 900], np.int32))
    as_dict = ropelab.fused_qknorm_rope(qkv.copy(), yarn=dict(factor=4.0, low=2.0, high=9.0,
                                                              attention_factor=1.2), **kw)
    as_object = ropelab.fused_qknorm_rope(qkv.copy(), yarn=YaRN.from_ramp(4.0, 2.0, 9.0, 1.2), **kw)
    np.testing.assert_array_equal(as_dict, as_object)
    plain = ropelab.fused_qknorm_rope(qkv.copy(), **kw)
    assert np.abs(as_object - plain).max() > 0.1  # the YaRN parameters did reach the kernel


def test_fused_kernel_refuses_a_non_positive_attention_factor_before_launch(launches):
    qkv = np.ones((2, 3 * 64), np.float32)
    before = qkv.copy()
    with pytest.raises(RopeInputError, match="attention_factor must be > 0"):
        ropelab.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
                                  q_weight=np.ones(64, np.float32), k_weight=np.ones(64, np.float32),
                                  positions=np.zeros(2, np.int32),
                                  yarn=dict(factor=2.0, low=1.0, high=3.0, attention_factor=0.0))
    assert launches == [] and np.array_equal(qkv, before)


def test_hugging_face_dicts():
    cfg = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 8192}
    assert scaling.parse(cfg) == Llama3(8.0, 1.0, 4.0, 8192)
    assert scaling.parse({"type": "linear", "factor": 2.0}) == Linear(2.0)  # the older key
    yarn = scaling.parse({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                          "beta_fast": None, "attention_factor": 0.9})
    assert yarn == YaRN(4.0, 32768, attention_factor=0.9)  # None means the default, as in HF
    assert scaling.parse({"rope_type": "default"}) is None
    np.testing.assert_array_equal(resolve(cfg, rotary_dim=32, base=5e5)[0],
                                  resolve(Llama3(8.0, 1.0, 4.0, 8192), rotary_dim=32, base=5e5)[0])


@pytest.mark.parametrize("cfg, match", [
    ({"rope_type": "rotating"}, "unknown RoPE scaling scheme 'rotating'"),
    ({"rope_type": "dynamic", "factor": 2.0}, "dynamic NTK"),
    ({"rope_type": "linear", "factor": 2.0, "fator": 3.0}, r"unknown key\(s\) \['fator'\]"),
    ({"rope_type": "llama3", "factor": 8.0}, "missing"),
    ({"factor": 2.0}, "rope_type"),
    ({"rope_type": 3}, "string"),
])
def test_bad_dicts(cfg, match):
    with pytest.raises(RopeInputError, match=match):
        scaling.parse(cfg)


@pytest.mark.parametrize("build, match", [
    (lambda: Linear(0.0), "factor must be > 0"),
    (lambda: Linear(-2.0), "factor must be > 0"),
    (lambda: NTK(0), "factor must be > 0"),
    (lambda: Linear(float("nan")), "finite"),
    (lambda: Linear(True), "number"),
    (lambda: Linear("2"), "number"),
    (lambda: YaRN(0.5, 4096), "factor must be >= 1"),
    (lambda: YaRN(4.0, 0), "positive int"),
    (lambda: YaRN(4.0, 4096.0), "positive int"),
    (lambda: YaRN(4.0, 4096, beta_fast=1.0, beta_slow=32.0), "beta_fast .* greater than beta_slow"),
    (lambda: YaRN(4.0, 4096, beta_slow=0.0), "beta_slow must be > 0"),
    (lambda: YaRN(4.0, 4096, attention_factor=0.0), "attention_factor must be > 0"),
    (lambda: YaRN(4.0, 4096, truncate="yes"), "truncate"),
    (lambda: Llama3(8.0, 4.0, 1.0, 8192), "low_freq_factor .* less than high_freq_factor"),
    (lambda: Llama3(8.0, 2.0, 2.0, 8192), "less than"),
    (lambda: Llama3(0.0, 1.0, 4.0, 8192), "factor must be >= 1"),
    (lambda: Llama3(8.0, 1.0, 4.0, -1), "positive int"),
])
def test_out_of_range_parameters(build, match):
    with pytest.raises(RopeInputError, match=match):
        build()


def test_ntk_needs_four_rotary_dims():
    with pytest.raises(RopeInputError, match="at least 4"):
        resolve(NTK(2.0), rotary_dim=2, base=1e4)


def test_wrong_scaling_types():
    with pytest.raises(RopeInputError, match="bare name"):
        scaling.parse("yarn")
    with pytest.raises(TypeError, match="Linear"):
        scaling.parse(4.0)


@pytest.mark.parametrize("bad", [{"rope_type": "nope"}, {"rope_type": "yarn", "factor": 0.0,
                                                        "original_max_position_embeddings": 64}])
def test_rope_refuses_bad_scaling_before_launch(launches, bad):
    x = np.ones((3, 8), np.float32)
    with pytest.raises(RopeInputError):
        ropelab.rope(x, variant="freq_table", scaling=bad)
    assert launches == []


def test_seed_variants_refuse_scaling(launches):
    with pytest.raises(RopeInputError, match="frequency scaling"):
        ropelab.rope(np.ones((3, 8), np.float32), variant="flat", scaling=Linear(2.0))
    assert launches == []


def test_a_dict_reaches_the_kernel(rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    pos = np.array([0, 5, 77, 300], np.int32)
    cfg = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64}
    got = ropelab.rope(x, variant="freq_table", positions=pos, scaling=cfg)
    freqs, att = resolve(cfg, rotary_dim=16, base=1e4)
    want = reference.rope(x, pos, freqs=freqs, attention_factor=att)
    assert att > 1.2
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert np.abs(got - reference.rope(x, pos)).max() > 1e-2  # the scaling did something


@pytest.mark.parametrize("scheme", [YaRN.from_ramp(4.0, 2.0, 2.0), YaRN.from_ramp(8.0, 1.5, 6.25, 1.1),
                                    YaRN(4.0, 64), Llama3(8.0, 1.0, 4.0, 64), NTK(4.0), Linear(3.0), None])
def test_pair_sincos_in_kernel_formula_reproduces_every_scheme(scheme):
    # pair_sincos evaluates the frequencies in the kernel from a few parameters (including
    # YaRN's guarded ramp bounds); in float64 they must be the scheme's frequencies.
    params = pair_sincos.freq_params(scheme, 16, 1e4)
    np.testing.assert_allclose(params.freqs(8), resolve(scheme, rotary_dim=16, base=1e4)[0],
                               rtol=1e-12, atol=0)
