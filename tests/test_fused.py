"""Fused QK-RMSNorm + RoPE: the float64 reference, the kernel against it, and input checking.

On the simulator (no GPU) the kernel runs one Python thread per CUDA thread with the warp
shuffles of ropelab.sim.warp, so shapes stay tiny: 3-5 tokens, 1-3 heads of each kind.  The grid is
(tokens, head groups): the partial block is the last head group, so head counts that are not a
multiple of the warps per block are what exercises the tail.  Budget: about 40 s on 2 cores.
"""


import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import check as ropelab_check
from ropelab import bf16, reference, shapes
from ropelab.ops import fused
from ropelab.kernels import FUSED
from ropelab.ops.arrays import inspect_array
from ropelab.kernels import fused_qknorm_rope as kmod
from test_freqs import yarn_by_hand

STORAGES = ["float32", "float16", "bfloat16"]


# ---- reference -------------------------------------------------------------------------------

@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("rotary_dim", [64, 32])
@pytest.mark.parametrize("yarn", [None, dict(factor=8.0, low=3.0, high=11.0, attention_factor=1.3)])
def test_reference_is_rmsnorm_then_rope(rng, interleave, rotary_dim, yarn):
    tokens, hq, hk, hv, d = 5, 3, 2, 1, 64
    qkv = rng.standard_normal((tokens, (hq + hk + hv) * d)) * 3
    wq, wk = rng.uniform(0.5, 1.5, d), rng.uniform(0.5, 1.5, d)
    pos = rng.integers(-50, 5000, tokens)
    got = reference.fused_qknorm_rope(qkv, num_heads_q=hq, num_heads_k=hk, num_heads_v=hv,
                                      head_dim=d, q_weight=wq, k_weight=wk, positions=pos, eps=1e-5,
                                      rotary_dim=rotary_dim, interleave=interleave, yarn=yarn)
    heads = qkv.reshape(tokens, hq + hk + hv, d)
    normed = np.concatenate([reference.rms_norm(heads[:, :hq], wq, 1e-5),
                             reference.rms_norm(heads[:, hq:hq + hk], wk, 1e-5)], axis=1)
    freqs, att = None, 1.0
    if yarn:
        freqs = reference.yarn_blend_inv_freq(rotary_dim, 1e4, yarn["factor"], yarn["low"], yarn["high"])
        att = yarn["attention_factor"]
    rotated = reference.rope(normed, pos, rotary_dim=rotary_dim, interleave=interleave, freqs=freqs,
                             attention_factor=att)
    want = np.concatenate([rotated, heads[:, hq + hk:]], axis=1).reshape(qkv.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_rms_norm_gives_unit_rms_before_the_weight(rng):
    x = rng.standard_normal((4, 128)) * 7
    y = reference.rms_norm(x, np.ones(128), eps=0.0)
    np.testing.assert_allclose(np.sqrt((y**2).mean(axis=-1)), 1.0, rtol=1e-12)


def test_yarn_blend_ramps_between_low_and_high():
    rd, base, factor = 64, 10000.0, 4.0
    f = reference.inv_freq(rd, base)
    got = reference.yarn_blend_inv_freq(rd, base, factor, low=4.0, high=12.0)
    np.testing.assert_allclose(got[:5], f[:5], rtol=1e-15)  # pairs 0..4 <= low keep f
    np.testing.assert_allclose(got[12:], f[12:] / factor, rtol=1e-15)  # pairs >= high: f / factor
    ramp = (np.arange(5, 12) - 4.0) / 8.0
    np.testing.assert_allclose(got[5:12], f[5:12] * (1 - ramp) + f[5:12] / factor * ramp, rtol=1e-15)
    np.testing.assert_array_equal(reference.yarn_blend_inv_freq(rd, base, 1.0, 4.0, 12.0), f)
    # low == high: SGLang nudges high by 0.001, a step at the pair index
    step = reference.yarn_blend_inv_freq(rd, base, factor, 6.0, 6.0)
    np.testing.assert_allclose(step[:7], f[:7], rtol=1e-15)
    np.testing.assert_allclose(step[7:], f[7:] / factor, rtol=1e-15)


def test_yarn_blend_agrees_with_hugging_face_style_yarn():
    # ropelab's Hugging Face YaRN is the blend itself now (freqs.yarn_inv_freq calls it), so the
    # other side is a plain-Python version of Hugging Face's definition (tests/test_freqs.py).
    scaling = pytest.importorskip("ropelab.scaling")
    for rd, base, factor, l0 in [(128, 10000.0, 4.0, 4096), (64, 1e6, 8.0, 32768)]:
        low, high = scaling.yarn_correction_range(rd, base, l0, 32.0, 1.0)
        np.testing.assert_allclose(reference.yarn_blend_inv_freq(rd, base, factor, low, high),
                                   yarn_by_hand(rd, base, factor, l0), rtol=1e-13)


# ---- kernel vs reference ------------------------------------------------------------------------

CASES = [
    # tokens, (heads q, k, v), head_dim, rotary_dim, yarn
    (3, (1, 1, 1), 64, 64, None),
    (5, (2, 1, 2), 128, 64, dict(factor=4.0, low=2.0, high=9.0, attention_factor=1.2)),
    (3, (1, 2, 0), 256, 256, None),
]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}t-{c[1]}-d{c[2]}-r{c[3]}{'-yarn' if c[4] else ''}")
def test_kernel_matches_reference(rng, storage, interleave, case):
    tokens, heads, d, rd, yarn = case
    row = ropelab_check.check_case(rng, tokens=tokens, heads=heads, head_dim=d, rotary_dim=rd,
                           storage=storage, interleave=interleave, yarn=yarn)
    assert row.v_unchanged, "V bytes changed"
    assert row.max_error <= row.tolerance, row


@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
def test_tight_tolerance_at_small_angles_without_fastmath(rng, interleave):
    # Positions below 64 keep every angle small, so the budget is a few float32 ulps: an error
    # in the norm (a wrong mean, a missing lane in the reduction) cannot hide in it.
    row = ropelab_check.check_case(rng, tokens=4, heads=(2, 1, 1), head_dim=64, rotary_dim=64,
                           storage="float32", interleave=interleave, fastmath=False, max_position=64)
    assert row.tolerance < 2e-4 and row.max_error <= row.tolerance, row


@pytest.mark.parametrize("head_dim, rotary_dim, interleave", [(192, 190, True), (512, 256, False)])
def test_other_head_dims(rng, head_dim, rotary_dim, interleave):
    row = ropelab_check.check_case(rng, tokens=2, heads=(1, 1, 1), head_dim=head_dim, rotary_dim=rotary_dim,
                           storage="float32", interleave=interleave)
    assert row.passed, row


@pytest.mark.parametrize("wpb", [1, 2, 4])
def test_head_counts_not_a_multiple_of_the_warps_per_block(rng, wpb):
    # 3 Q + 2 K heads = 5 warps per token: every block size leaves a partial last head group.
    row = ropelab_check.check_case(rng, tokens=3, heads=(3, 2, 1), head_dim=64, rotary_dim=32,
                           storage="bfloat16", interleave=wpb != 2, warps_per_block=wpb)
    assert row.passed, row


@pytest.mark.parametrize("storage, interleave, heads, wpb, hpw", [
    ("bfloat16", True, (3, 2, 1), 2, 2),   # 5 heads: the last warp's second head is past the end
    ("bfloat16", False, (2, 2, 1), 1, 2),
    ("float16", True, (1, 2, 2), None, 2),
    ("float32", False, (2, 1, 1), None, 2),  # 128-bit path with two heads per warp
    ("bfloat16", True, (3, 3, 1), 1, 4),   # 6 heads: the second warp has two real heads of four
    ("bfloat16", False, (1, 1, 1), None, 4),
])
def test_several_heads_per_warp_match_reference(rng, storage, interleave, heads, wpb, hpw):
    head_dim = 128 if storage == "float32" else 64
    row = ropelab_check.check_case(rng, tokens=3, heads=heads, head_dim=head_dim, rotary_dim=head_dim // 2,
                           storage=storage, interleave=interleave, warps_per_block=wpb,
                           heads_per_warp=hpw)
    assert row.passed, row


# ---- the 16-bit fast path: half a warp per head, 64/128-bit accesses ------------------------------

def _problem(storage, head_dim=128, rotary_dim=None, interleave=True, heads=(1, 1, 1)):
    hq, hk, hv = heads
    qkv = np.zeros((2, (hq + hk + hv) * head_dim), kmod.STORAGES[storage])
    return fused.build_problem(inspect_array(qkv, "qkv"), num_heads_q=hq, num_heads_k=hk,
                               num_heads_v=hv, head_dim=head_dim, rotary_dim=rotary_dim,
                               interleave=interleave)


@pytest.mark.parametrize("storage, head_dim, rotary_dim, interleave, options, suffix", [
    # The public call's defaults: 16-bit storage on half warps with the widest access that fits.
    ("bfloat16", 128, None, True, {}, "_v128_h2_g16_full"),
    # NeoX with every dim rotated: a lane holds 4 elements of each half, 64-bit accesses.
    ("float16", 128, None, False, {}, "_v64_h2_g16_split_full"),
    ("float16", 128, None, False, {"neox_split": False}, "_v128_h2_g16_full"),  # partner shuffles
    ("bfloat16", 128, 64, False, {}, "_v128_h2_g16"),  # partial rotary: the shuffle mapping
    ("bfloat16", 64, None, True, {}, "_v64_h2_g16_full"),  # 4 elements a lane: 64-bit
    ("bfloat16", 192, None, True, {}, "_v64_h2_g16_full"),  # 12 elements: 24 bytes, 64-bit steps
    ("bfloat16", 128, 96, True, {}, "_v128_h2_g16"),  # partial rotary: a test per pair
    ("float32", 128, None, True, {}, "_v128_full"),  # float32 keeps a warp per head
    ("float32", 128, None, False, {}, "_v128_full"),  # ... and its NeoX partner shuffles
    ("bfloat16", 128, None, True, {"heads_per_warp": 1}, "_v64_full"),
    ("bfloat16", 128, None, True, {"heads_per_warp": 4}, "_v128_h4_g16_full"),
    ("bfloat16", 128, None, True, {"lanes_per_head": 32}, "_v64_h2_full"),  # whole warp, two rounds
    ("float32", 128, None, True, {"heads_per_warp": 2, "lanes_per_head": 16}, "_v128_h2_g16_full"),
    # NeoX: 24 rotated dims do not fill whole 8-element lanes, so the plan keeps 32 lanes.
    ("bfloat16", 128, 24, False, {}, "_v64_h2"),
])
def test_plan_picks_lanes_and_access_width(storage, head_dim, rotary_dim, interleave, options,
                                           suffix):
    p = _problem(storage, head_dim, rotary_dim, interleave)
    name = kmod.VARIANT.plan(p, options).kernel.__qualname__
    layout = "gptj" if interleave else "neox"
    assert name == f"fused_qknorm_rope_d{head_dim}_{layout}_{storage}{suffix}"


def test_unaligned_buffers_take_the_word_path():
    p = _problem("bfloat16")
    assert kmod.VARIANT.plan(p, {}, aligned=False).kernel.__qualname__ == \
        "fused_qknorm_rope_d128_gptj_bfloat16_h2_g16_full"


@pytest.mark.parametrize("options, match", [
    ({"lanes_per_head": 8}, "lanes_per_head must be one of"),
    ({"lanes_per_head": 16, "heads_per_warp": 1}, "needs heads_per_warp >= 2"),
    ({"lanes_per_head": 16.0}, "lanes_per_head"),
])
def test_lanes_per_head_option_is_checked(options, match):
    with pytest.raises((ropelab.RopeInputError, TypeError), match=match):
        kmod.VARIANT.plan(_problem("bfloat16"), options)


def test_lanes_per_head_16_refuses_a_neox_split_it_cannot_hold():
    with pytest.raises(ropelab.RopeInputError, match="multiple of 16; got 24"):
        kmod.VARIANT.plan(_problem("bfloat16", rotary_dim=24, interleave=False),
                          {"lanes_per_head": 16})


@pytest.mark.parametrize("storage, interleave, heads, head_dim, rotary_dim, yarn, hpw, lanes", [
    ("bfloat16", True, (3, 2, 1), 128, 128, None, None, None),   # 5 heads: a half warp idles
    ("float16", False, (2, 1, 2), 128, 64, None, None, None),    # NeoX partners inside a half
    ("bfloat16", False, (1, 1, 0), 64, 32, dict(factor=4.0, low=2.0, high=9.0,
                                                 attention_factor=1.2), None, None),
    ("float16", True, (1, 2, 1), 192, 150, None, None, None),    # partial rotary, 64-bit steps
    ("bfloat16", True, (3, 3, 1), 64, 64, None, 4, None),        # two heads per half warp
    ("float16", False, (2, 3, 1), 64, 64, None, 4, None),        # 5 of 8 slots real
    ("bfloat16", True, (2, 1, 1), 128, 96, None, 1, None),       # a warp per head, 64-bit
    ("float32", False, (2, 1, 1), 128, 64, None, 2, 16),         # float32 on half warps
    ("bfloat16", False, (2, 1, 1), 128, 128, None, 1, None),     # split NeoX, a warp a head:
    ("float16", False, (2, 1, 1), 128, 128, None, 1, None),      # 2-element runs, no vectors
    ("bfloat16", False, (3, 2, 1), 256, 256, dict(factor=4.0, low=2.0, high=9.0,
                                                   attention_factor=1.2), None, None),  # 128-bit runs
])
def test_half_warp_and_vector_paths_match_reference(rng, storage, interleave, heads, head_dim,
                                                    rotary_dim, yarn, hpw, lanes, monkeypatch):
    if lanes is not None:  # not a public option: change the storage's default for this test
        monkeypatch.setitem(kmod.LANES_PER_HEAD, storage, lanes)
    row = ropelab_check.check_case(rng, tokens=2, heads=heads, head_dim=head_dim, rotary_dim=rotary_dim,
                           storage=storage, interleave=interleave, yarn=yarn, heads_per_warp=hpw)
    assert row.passed, row


@pytest.mark.parametrize("storage", ["bfloat16", "float16"])
@pytest.mark.parametrize("interleave, rotary_dim", [(True, 64), (False, 64), (True, 128),
                                                    (False, 128)],
                         ids=["gptj-partial", "neox-shuffle", "gptj-full", "neox-split"])
def test_vector_and_word_paths_write_the_same_bits(rng, storage, interleave, rotary_dim,
                                                   launched_plans):
    # A weight 2 bytes past a 16-byte boundary sends the call down the word (or element) path;
    # the same inputs on aligned buffers take the 128-bit path.  Same arithmetic, same bits.
    qkv, kw = _inputs(rng, storage, tokens=2, heads=(2, 1, 1), d=128)
    kw["rotary_dim"] = rotary_dim
    kw["interleave"] = interleave
    wq = kw.pop("q_weight")
    kw = _on_device(kw)
    fast = cuda.to_device(qkv)
    slow = cuda.to_device(qkv)
    spare = cuda.to_device(np.zeros(wq.size + 1, wq.dtype))
    spare[1:] = wq
    ropelab.fused_qknorm_rope(fast, **{**kw, "q_weight": cuda.to_device(wq)})
    ropelab.fused_qknorm_rope(slow, **{**kw, "q_weight": spare[1:]})
    # (the split NeoX lane moves two runs of 4 elements: 64-bit accesses)
    kernels_run = [p.kernel.__qualname__ for p in launched_plans]
    assert ["_v128_" in k or "_v64_" in k for k in kernels_run] == [True, False], kernels_run
    got_fast = fast.copy_to_host()
    np.testing.assert_array_equal(got_fast.view(np.uint16), slow.copy_to_host().view(np.uint16))
    assert not np.array_equal(got_fast.view(np.uint16), qkv.view(np.uint16))


def test_two_heads_per_warp_halves_the_warps():
    p = fused.build_problem(inspect_array(np.zeros((7, 48 * 128 + 24 * 128), np.uint16), "qkv"),
                            num_heads_q=24, num_heads_k=24, num_heads_v=24, head_dim=128)
    assert kmod.launch_config(p, 8, heads_per_warp=1) == ((7, 6), (256, 1))
    assert kmod.launch_config(p, 8, heads_per_warp=2) == ((7, 3), (256, 1))


@pytest.mark.parametrize("bad", [0, 3, 8, True, 1.0])
def test_heads_per_warp_must_be_one_two_or_four(rng, launches, bad):
    assert kmod.HEADS_PER_WARP_CHOICES == (1, 2, 4)  # what the test's name promises
    qkv, kw = _inputs(rng)
    before = qkv.copy()
    # A value of the wrong type is a TypeError, an int outside the choices a RopeInputError.
    exc = TypeError if isinstance(bad, (bool, float)) else ropelab.RopeInputError
    with pytest.raises(exc, match="heads_per_warp"):
        ropelab.fused_qknorm_rope(qkv, heads_per_warp=bad, **kw)
    np.testing.assert_array_equal(qkv, before)
    assert launches == []


@pytest.mark.parametrize("field, value, exc, match", [
    ("eps", "1e-6", TypeError, "eps must be a number"),
    ("base", "10000", TypeError, "base must be a number"),
    ("interleave", "False", TypeError, "interleave must be True or False"),
    ("fastmath", None, TypeError, "fastmath must be True or False"),
    ("num_heads_q", 2.0, TypeError, "num_heads_q must be an int"),
    ("stream", "default", TypeError, "stream must be"),
])
def test_fused_wrong_types_are_refused_before_launch(rng, launches, field, value, exc, match):
    qkv, kw = _inputs(rng)
    before = qkv.copy()
    kw[field] = value
    with pytest.raises(exc, match=match):
        ropelab.fused_qknorm_rope(qkv, **kw)
    np.testing.assert_array_equal(qkv, before)
    assert launches == []


def test_read_only_qkv_is_refused_before_launch(rng, launches):
    qkv, kw = _inputs(rng)
    qkv.flags.writeable = False
    with pytest.raises(ropelab.RopeInputError, match="read-only"):
        ropelab.fused_qknorm_rope(qkv, **kw)
    assert launches == []


def _inputs(rng, storage="float32", tokens=3, heads=(2, 1, 2), d=64):
    qkv, wq, wk, pos = ropelab_check.random_inputs(rng, tokens, heads, d, storage)
    kw = dict(num_heads_q=heads[0], num_heads_k=heads[1], num_heads_v=heads[2], head_dim=d,
              q_weight=wq, k_weight=wk, positions=pos)
    return qkv, kw


@pytest.fixture
def launched_plans(monkeypatch):
    """The plans the public fused call launches (on the simulator), in order."""
    from ropelab.ops import host_route

    plans = []
    real_launch = host_route.launch
    monkeypatch.setattr(host_route, "launch", lambda plan, arrays: (plans.append(plan),
                                                                    real_launch(plan, arrays)))
    return plans


def _on_device(kw):
    """The keyword arguments with weights and positions copied to the device."""
    return {k: cuda.to_device(v) if k in ("q_weight", "k_weight", "positions") else v
            for k, v in kw.items()}


def test_device_array_in_place_and_v_untouched(rng):
    qkv, kw = _inputs(rng, "bfloat16")
    host = qkv.copy()
    dev = cuda.to_device(qkv)
    out = ropelab.fused_qknorm_rope(dev, **_on_device(kw))
    assert out is dev
    got = dev.copy_to_host()
    want = ropelab.fused_qknorm_rope(host, **kw)  # the host path, for comparison
    np.testing.assert_array_equal(got, want)
    qk = 3 * 64
    np.testing.assert_array_equal(got[:, qk:], qkv[:, qk:])
    assert not np.array_equal(got[:, :qk], qkv[:, :qk])


def test_host_array_is_modified_in_place_and_returned(rng):
    qkv, kw = _inputs(rng)
    before = qkv.copy()
    assert ropelab.fused_qknorm_rope(qkv, **kw) is qkv
    assert not np.array_equal(qkv[:, :192], before[:, :192])
    np.testing.assert_array_equal(qkv[:, 192:].view(np.uint32), before[:, 192:].view(np.uint32))


def test_negative_positions_rotate_backwards(rng):
    qkv, kw = _inputs(rng)
    kw["positions"] = np.array([-7, 0, -3000], np.int32)
    want = reference.fused_qknorm_rope(qkv, **kw)
    got = ropelab.fused_qknorm_rope(qkv.copy(), **kw)
    assert np.abs(got - want).max() < 0.05  # fastmath sin/cos at 3000 rad


def test_zero_tokens_is_a_no_op():
    qkv = np.zeros((0, 3 * 64), np.float32)
    w = np.ones(64, np.float32)
    out = ropelab.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
                                    q_weight=w, k_weight=w, positions=np.zeros(0, np.int32))
    assert out is qkv


# ---- bad input: a clear exception, qkv unchanged -------------------------------------------------

def _bad_cases(rng):
    qkv, kw = _inputs(rng)
    w = kw["q_weight"]
    yield "head_dim 96", dict(head_dim=96), ropelab.RopeInputError, "head_dim 96 is not supported"
    yield "head_dim 32", dict(head_dim=32), ropelab.RopeInputError, "not supported"
    yield "weight shape", dict(q_weight=np.ones(32, np.float32)), ropelab.RopeInputError, r"q_weight must have shape \(64,\)"
    yield "weight 2-D", dict(k_weight=np.ones((1, 64), np.float32)), ropelab.RopeInputError, "k_weight must have shape"
    yield "weight dtype", dict(k_weight=w.astype(np.float64)), ropelab.RopeInputError, "k_weight must have the dtype of qkv"
    yield "weight list", dict(q_weight=list(w)), TypeError, "q_weight must be a NumPy array"
    yield "rotary odd", dict(rotary_dim=33), ropelab.RopeInputError, "positive even"
    yield "rotary too big", dict(rotary_dim=66), ropelab.RopeInputError, r"must not exceed head_dim \(64\)"
    yield "rotary not lane-aligned for neox", dict(rotary_dim=30, interleave=False), ropelab.RopeInputError, "multiple of 2 \\* head_dim / 32 = 4"
    yield "rotary type", dict(rotary_dim=32.0), TypeError, "rotary_dim must be an int"
    yield "positions length", dict(positions=np.zeros(4, np.int32)), ropelab.RopeInputError, r"shape \(3,\)"
    yield "positions past int32", dict(positions=np.full(3, 2**31, np.int64)), ropelab.RopeInputError, "fit in int32"
    yield "positions float", dict(positions=np.zeros(3, np.float32)), ropelab.RopeInputError, "positions must be integers"
    yield "heads mismatch", dict(num_heads_v=1), ropelab.RopeInputError, r"rows have 320 elements but"
    yield "no q or k", dict(num_heads_q=0, num_heads_k=0, num_heads_v=5), ropelab.RopeInputError, "at least 1"
    yield "negative heads", dict(num_heads_k=-1, num_heads_v=3), ropelab.RopeInputError, "num_heads_k must be >= 0"
    yield "eps nan", dict(eps=float("nan")), ropelab.RopeInputError, "eps must be finite"
    yield "eps negative", dict(eps=-1.0), ropelab.RopeInputError, "eps must be >= 0"
    yield "base", dict(base=1.0), ropelab.RopeInputError, "base must be"
    yield "yarn keys", dict(yarn=dict(factor=2.0, low=1.0)), ropelab.RopeInputError, r"yarn needs \['high'\]"
    yield "yarn order", dict(yarn=dict(factor=2.0, low=5.0, high=1.0)), ropelab.RopeInputError, "must not be below"
    yield "yarn type", dict(yarn=(2.0, 1.0, 5.0)), TypeError, "yarn must be None"
    yield "interleave type", dict(interleave="neox"), TypeError, "interleave must be True or False"
    yield "warps per block", dict(warps_per_block=33), ropelab.RopeInputError, "warps_per_block must be <= 32"


@pytest.mark.parametrize("i", range(24))
def test_bad_input_raises_and_leaves_qkv_alone(rng, i):
    cases = list(_bad_cases(rng))
    assert len(cases) == 24
    name, change, exc, match = cases[i]
    qkv, kw = _inputs(rng)
    kw.update(change)
    before = qkv.copy()
    with pytest.raises(exc, match=match):
        ropelab.fused_qknorm_rope(qkv, **kw)
    np.testing.assert_array_equal(qkv.view(np.uint32), before.view(np.uint32))


def test_bad_qkv_layouts(rng):
    qkv, kw = _inputs(rng)
    wide = np.zeros((3, 2 * qkv.shape[1]), np.float32)
    with pytest.raises(ropelab.RopeInputError, match="C-contiguous"):
        ropelab.fused_qknorm_rope(wide[:, ::2], **kw)
    with pytest.raises(ropelab.RopeInputError, match="2-D"):
        ropelab.fused_qknorm_rope(qkv.reshape(3, 5, 64), **kw)
    with pytest.raises(ropelab.RopeInputError, match="float32, float16, or uint16"):
        ropelab.fused_qknorm_rope(qkv.astype(np.float64), **kw)  # a bad value: the README's rule
    with pytest.raises(TypeError, match="must be a NumPy array or a CUDA array"):
        ropelab.fused_qknorm_rope(qkv.tolist(), **kw)
    np.testing.assert_array_equal(wide, 0)


def test_weights_inside_qkv_are_refused(rng):
    qkv, kw = _inputs(rng)
    dev = cuda.to_device(qkv)
    kw["q_weight"] = dev[0, :64]  # a view into the buffer the kernel writes
    before = dev.copy_to_host()
    with pytest.raises(ropelab.RopeInputError, match="qkv overlaps q_weight"):
        ropelab.fused_qknorm_rope(dev, **kw)
    np.testing.assert_array_equal(dev.copy_to_host(), before)


# ---- module shape, registry, shapes ----------------------------------------------------------------

def test_module_follows_the_kernel_module_shape():
    assert FUSED == {"fused_qknorm_rope": kmod.VARIANT}
    assert "fused_qknorm_rope" not in ropelab.kernels.VARIANTS
    for name in ("NAME", "SUMMARY", "KERNEL", "VARIANT", "make_kernel", "launch_config", "plan"):
        assert hasattr(kmod, name), name
    assert set(kmod.CALLER) == set(kmod.STORAGES) == set(STORAGES)
    p = fused.FusedProblem(7, 24, 24, 24, 128, 128, True, "bfloat16", 1e-6, 1e4)
    assert kmod.launch_config(p) == ((7, 6), (256, 1))  # 48 heads in groups of 8 warps
    assert kmod.launch_config(p, warps_per_block=5) == ((7, 10), (160, 1))


def test_warps_per_block_choice_minimises_idle_warps():
    assert kmod.pick_warps_per_block(48) == 8
    assert kmod.pick_warps_per_block(60) == 4
    assert kmod.pick_warps_per_block(6) == 2
    assert kmod.pick_warps_per_block(64) == 8
    assert kmod.pick_warps_per_block(5) == 1  # odd: one warp per token, eight tokens a block


def test_small_head_counts_fill_the_block_with_tokens():
    # zimage: 60 Q+K heads, two a warp: 30 warps a token, blocks of 2 warps and 4 tokens (the
    # 64-thread blocks of one token each were launch-bound); tokens left over fill a last block.
    z = shapes.PRODUCTION_SHAPES["zimage_1024"]
    assert kmod.launch_config(z, heads_per_warp=2) == ((1024, 15), (64, 4))
    p = fused.FusedProblem(10, 1, 1, 0, 64, 64, True, "bfloat16", 1e-6, 1e4)
    assert kmod.launch_config(p, heads_per_warp=2) == ((2, 1), (32, 8))  # 10 tokens: 8 + 2
    assert kmod.launch_config(p, heads_per_warp=2, tokens_per_block=2) == ((5, 1), (32, 2))
    tiny = fused.FusedProblem(3, 1, 1, 0, 64, 64, True, "bfloat16", 1e-6, 1e4)
    assert kmod.launch_config(tiny, heads_per_warp=2) == ((1, 1), (32, 3))  # no empty rows


@pytest.mark.parametrize("tpb", [1, 3])
@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
def test_token_rows_match_reference(rng, monkeypatch, launched_plans, tpb, interleave):
    # 3 heads, two a warp: 2 warps a token, so blocks of 2 * tpb warps.  7 tokens in rows of 3:
    # the last block has one real row of three.
    monkeypatch.setattr(kmod.mapping, "BLOCK_WARPS", 2 * tpb)
    row = ropelab_check.check_case(rng, tokens=7, heads=(2, 1, 1), head_dim=64, rotary_dim=64,
                                   storage="bfloat16", interleave=interleave)
    assert launched_plans and launched_plans[-1].block[:2] == (64, tpb), launched_plans
    assert row.passed, row


@pytest.mark.parametrize("options, match", [
    ({"tokens_per_block": 0}, "tokens_per_block"),
    ({"tokens_per_block": 2.0}, "tokens_per_block"),
    ({"warps_per_block": 32, "tokens_per_block": 2}, "exceeds CUDA's 1024"),
    ({"neox_split": True}, "neox_split=True needs"),  # GPT-J has no halves to split
    ({"neox_split": "yes"}, "neox_split"),
])
def test_mapping_options_are_checked(options, match):
    with pytest.raises((ropelab.RopeInputError, TypeError), match=match):
        kmod.VARIANT.plan(_problem("bfloat16"), options)


def test_production_shapes():
    p = shapes.PRODUCTION_SHAPES
    assert set(p) == {"flux_1024", "qwen_image_1024", "qwen_image_partial", "zimage_1024"}
    assert p["flux_1024"] == shapes.FusedShape("flux_1024", 4096, 24, 24, 24, 128, 128)
    assert p["qwen_image_partial"].rotary_dim == 64
    assert p["zimage_1024"].heads_q == 30
    assert p["flux_1024"].qk_bytes(2) == 2 * 4096 * 48 * 128 * 2  # 100.7 MB, as the notes say
    assert shapes.ROPE_SHAPES["large_32768x4096"].bytes_moved() > 1e9


def test_bf16_inputs_are_exact_bfloat16():
    qkv, wq, wk, pos = ropelab_check.random_inputs(np.random.default_rng(0), 2, (1, 1, 1), 64, "bfloat16")
    assert qkv.dtype == np.uint16 and pos.dtype == np.int32
    np.testing.assert_array_equal(bf16.from_float32(bf16.to_float32(qkv)), qkv)


@pytest.fixture(scope="module")
def fused_census(census_doc):
    """PTX counts of the fused census kernels (cc 9.0, shipped fast-math builds) from the census
    engine (the committed census when current), with SASS instruction counts where nvdisasm is
    installed (the test and sass extras)."""
    from ropelab.measure import census as ptx

    rows = {r["kernel"]: dict(r) for r in census_doc["rows"]
            if r["registry"] == "FUSED" and r["fastmath"]}
    sass = ptx.census(sass=True) if ptx.find_nvdisasm() else None
    for row in rows.values():
        row["sass"] = None if sass is None else ptx.row(sass, row["variant"], True,
                                                        row["kernel"])["sass_instructions"]
        row["bfly"] = row["shfl_ops"].get("bfly", 0)
        row["idx"] = row["shfl_ops"].get("idx", 0)
        row["cvt_bf16x2"] = row["cvt_packed"].get("bf16x2", 0)
    return rows


def test_census_compiles_every_mapping(fused_census):
    assert sorted(fused_census) == sorted([
        "fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full",
        "fused_qknorm_rope_d128_neox_bfloat16_v64_h2_g16_split_full",
        "fused_qknorm_rope_d128_neox_bfloat16_v128_h2_g16_full",  # neox_split=False: shuffles
        "fused_qknorm_rope_d128_gptj_float16_v128_h2_g16_full",
        "fused_qknorm_rope_d128_neox_float16_v64_h2_g16_split_full",
        "fused_qknorm_rope_d128_gptj_float32_v128_full",
        "fused_qknorm_rope_d128_neox_float32_v128_full",
        "fused_qknorm_rope_d128_gptj_bfloat16_v64_full",
        "fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full_cache",
        "fused_qknorm_rope_d128_neox_bfloat16_v64_h2_g16_split_full_cache",  # a user cache
        "fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full_out128",  # out of place
        "fused_qknorm_rope_d128_neox_bfloat16_v64_h2_g16_split_full_out128",
        "fused_qknorm_rope_d128_gptj_float32_v128_full_out128",
    ])
    for name, row in fused_census.items():
        assert row["f64"] == 0, f"{name}: float64 in a fast-math build"
        assert row["int_divrem"] == 0, f"{name}: an integer division"
        assert row["local_bytes"] == 0, f"{name}: registers spilled to local memory"


@pytest.mark.parametrize("storage", ["bfloat16", "float16"])
def test_16_bit_gptj_moves_heads_with_128_bit_accesses(fused_census, storage):
    row = fused_census[f"fused_qknorm_rope_d128_gptj_{storage}_v128_h2_g16_full"]
    # 128-bit loads of qkv, of the weight and of the lane's four frequencies; the position is
    # the only narrower load; one 128-bit store per lane, nothing narrower.
    assert row["ld_global"] == {"128": 3, "32": 1}, row["ld_global"]
    assert row["st_global"] == {"128": 1}
    assert row["bfly"] == 4  # the half-warp reduction: 8, 4, 2, 1
    assert row["idx"] == 0
    assert row["sfu"].get("sin") == row["sfu"].get("cos") == 4  # one sin/cos per pair


@pytest.mark.parametrize("storage", ["bfloat16", "float16"])
def test_16_bit_neox_holds_whole_pairs_in_a_lane(fused_census, storage):
    split = fused_census[f"fused_qknorm_rope_d128_neox_{storage}_v64_h2_g16_split_full"]
    # Two 64-bit runs a lane (4 elements of each half) for qkv and for the weight, no partner
    # shuffle, and one sin/cos per pair as in GPT-J.
    assert split["ld_global"] == {"64": 4, "128": 1, "32": 1}, split["ld_global"]
    assert split["st_global"] == {"64": 2}
    assert split["idx"] == 0 and split["bfly"] == 4
    assert split["sfu"].get("sin") == 4
    if storage == "bfloat16":  # the controlled mapping: partners by shuffle, sin/cos per slot
        shuffled = fused_census["fused_qknorm_rope_d128_neox_bfloat16_v128_h2_g16_full"]
        assert shuffled["idx"] == 8 and shuffled["sfu"].get("sin") == 8
        assert split["instructions"] < shuffled["instructions"]


def test_one_head_per_warp_moves_16_bit_heads_with_64_bit_accesses(fused_census):
    row = fused_census["fused_qknorm_rope_d128_gptj_bfloat16_v64_full"]
    assert row["ld_global"]["64"] == 2 and row["st_global"] == {"64": 1}
    assert row["bfly"] == 5  # a whole warp: 16, 8, 4, 2, 1


def test_float32_keeps_its_128_bit_warp_per_head(fused_census):
    for layout in ("gptj", "neox"):
        row = fused_census[f"fused_qknorm_rope_d128_{layout}_float32_v128_full"]
        assert row["ld_global"]["128"] == 1 and row["st_global"] == {"128": 1}
        assert row["bfly"] == 5


def test_bfloat16_kernels_pack_with_the_hardware_conversion(fused_census):
    # One cvt.rn.bf16x2.f32 per pair of stored elements (8 or 4 elements a lane), none of
    # ropelab.bf16's integer rounding, and no float64 anywhere; other storages never use it.
    for name, row in fused_census.items():
        pairs = 2 if name.endswith("_v64_full") else 4
        assert row["cvt_bf16x2"] == (pairs if "bfloat16" in name else 0), name
        assert row["f64"] == 0, name


def test_cache_kernel_reads_cos_sin_and_computes_none(fused_census):
    row = fused_census["fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full_cache"]
    assert "sin" not in row["sfu"] and "cos" not in row["sfu"]
    # 4 pairs a lane: 4 cos and 4 sin loads, plus the position; the error word is one store.
    assert row["ld_global"] == {"128": 2, "32": 9}
    assert row["st_global"] == {"128": 1, "32": 1}


@pytest.mark.parametrize("build", ["gptj_bfloat16_v128_h2_g16_full", "neox_bfloat16_v64_h2_g16_split_full",
                                   "gptj_float32_v128_full"])
def test_the_out_of_place_build_adds_one_128_bit_copy_a_lane(fused_census, build):
    # Q and K as in place; a V warp's lane moves its 16 bytes of V with one 128-bit load and
    # one 128-bit store (two heads of 256 bytes, or one float32 head of 512, is 32 lanes x 16).
    inp = fused_census[f"fused_qknorm_rope_d128_{build}"]
    out = fused_census[f"fused_qknorm_rope_d128_{build}_out128"]
    for field in ("ld_global", "st_global"):
        want = dict(inp[field])
        want["128"] = want.get("128", 0) + 1
        assert out[field] == want, (field, out[field], inp[field])
    for field in ("bfly", "idx", "sfu", "cvt_bf16x2", "f64", "int_divrem", "local_bytes"):
        assert out[field] == inp[field], field
    assert inp["instructions"] < out["instructions"] <= inp["instructions"] + 40


def test_misaligned_bfloat16_device_buffer_is_refused(rng):
    qkv, kw = _inputs(rng, "bfloat16")
    flat = cuda.to_device(np.zeros(qkv.size + 1, np.uint16))
    shifted = flat[1:].reshape(qkv.shape)  # 2 bytes past a 4-byte boundary
    with pytest.raises(ropelab.RopeInputError, match="4-byte aligned"):
        ropelab.fused_qknorm_rope(shifted, **kw)


def test_float32_vector_and_scalar_paths_agree(rng, launched_plans):
    qkv, kw = _inputs(rng, "float32", tokens=2, heads=(1, 1, 1), d=128)
    aligned = cuda.to_device(qkv)
    flat = cuda.to_device(np.zeros(qkv.size + 1, np.float32))
    flat[1:] = qkv.reshape(-1)
    shifted = flat[1:].reshape(qkv.shape)  # 4 bytes past a 16-byte boundary: scalar path
    kw = _on_device(kw)
    ropelab.fused_qknorm_rope(aligned, **kw)
    ropelab.fused_qknorm_rope(shifted, **kw)
    assert [p.kernel.__qualname__ for p in launched_plans] == ["fused_qknorm_rope_d128_gptj_float32_v128_full",
                           "fused_qknorm_rope_d128_gptj_float32_full"]
    np.testing.assert_array_equal(aligned.copy_to_host(), shifted.copy_to_host())


# ---- the cos/sin cache: the long-context path -------------------------------------------------------

LONG = 2**17  # positions up to 131072, where float32 angles are off by ~1e-2 rad


@pytest.mark.parametrize("storage, interleave, yarn", [
    ("float32", True, None),
    ("float32", False, dict(factor=8.0, low=3.0, high=11.0, attention_factor=1.3)),
    ("bfloat16", True, dict(factor=4.0, low=2.0, high=9.0)),
    ("float16", False, None),
])
def test_cache_matches_reference_at_long_positions(rng, storage, interleave, yarn):
    row = ropelab_check.check_case(rng, tokens=3, heads=(1, 2, 1), head_dim=64, rotary_dim=32,
                           storage=storage, interleave=interleave, yarn=yarn, max_position=LONG,
                           cache=True)
    assert row.passed, row
    if storage == "float32":
        # The budget does not grow with the position: a few 1e-6 of the normalized values.
        assert row.tolerance < 5e-5, row


def test_cache_tolerance_is_tight_enough_to_tell_the_sincos_path_apart(rng):
    # At the same long positions the float32 angle of the sin/cos path is off by ~1e-3 rad:
    # far outside the cache's budget, which is what the budget must be able to see.
    kw = dict(tokens=3, heads=(1, 1, 1), head_dim=64, rotary_dim=64, storage="float32",
              max_position=LONG)
    sincos = ropelab_check.check_case(np.random.default_rng(1), **kw)
    cached = ropelab_check.check_case(np.random.default_rng(1), cache=True, **kw)
    assert cached.passed, cached
    assert sincos.max_error > 10 * cached.tolerance, (sincos, cached)


def _float32_tables(freq_bytes, max_positions):
    """The planted error: cos/sin of float32 angles computed in float32, not in float64."""
    freqs = np.frombuffer(freq_bytes, dtype=np.float64).astype(np.float32)
    theta = np.outer(np.arange(max_positions, dtype=np.float32), freqs)  # rounded angles
    return (np.concatenate([np.cos(theta), np.sin(theta)], axis=1).reshape(-1),)


def test_cache_built_in_float32_fails_the_check(rng, monkeypatch):
    real = kmod.host.tables
    monkeypatch.setattr(kmod.host, "tables", lambda kind, freq_bytes, n=None: (
        _float32_tables(freq_bytes, n) if kind == "cos_sin_rows" else real(kind, freq_bytes, n)))
    row = ropelab_check.check_case(rng, tokens=3, heads=(1, 1, 1), head_dim=64, rotary_dim=64,
                           storage="float32", max_position=LONG, cache=True)
    assert row.max_error > 10 * row.tolerance, row


def test_cache_tables_hold_the_blended_frequencies_and_are_made_once():
    p = _problem("bfloat16", head_dim=64, rotary_dim=32)
    yarn = fused.build_problem(inspect_array(np.zeros((2, 192), np.uint16), "qkv"), num_heads_q=1,
                               num_heads_k=1, num_heads_v=1, head_dim=64, rotary_dim=32,
                               yarn=dict(factor=4.0, low=2.0, high=9.0))
    opts = {"cache": True, "max_positions": 100}
    a, b = kmod.VARIANT.plan(p, opts), kmod.VARIANT.plan(p, dict(opts))
    assert a.tables[0] is b.tables[0]  # one device upload
    y = kmod.VARIANT.plan(yarn, opts)
    assert y.tables[0] is not a.tables[0]
    theta = np.outer(np.arange(100, dtype=np.float64), yarn.inv_freq)
    rows = y.tables[0].reshape(100, 32)  # [cos half | sin half] per position, flat
    np.testing.assert_array_equal(rows[:, :16], np.cos(theta).astype(np.float32))
    np.testing.assert_array_equal(rows[:, 16:], np.sin(theta).astype(np.float32))
    assert len(y.tables) == 1 and y.errors and y.position_limit == 100


@pytest.mark.parametrize("positions, match", [
    ([0, 100, 3], "position 100 is out of range: the cos/sin cache holds positions 0 .. 99"),
    ([0, -1, 3], "position -1 is out of range: the cos/sin cache holds positions 0 .. 99"),
])
def test_cache_refuses_host_positions_outside_the_table(rng, launches, positions, match):
    qkv, kw = _inputs(rng)
    kw["positions"] = np.array(positions, np.int32)
    before = qkv.copy()
    with pytest.raises(ropelab.RopeInputError, match=match):
        ropelab.fused_qknorm_rope(qkv, cache=True, max_positions=100, **kw)
    assert launches == []
    np.testing.assert_array_equal(qkv, before)


def test_cache_marks_device_positions_outside_the_table(rng):
    ropelab.check_errors()  # clear anything an earlier test left
    qkv, kw = _inputs(rng, "bfloat16", tokens=3, heads=(2, 1, 1))
    kw["positions"] = np.array([7, 100, -5], np.int32)
    dev = cuda.to_device(qkv)
    ropelab.fused_qknorm_rope(dev, cache=True, max_positions=100, **_on_device(kw))
    got = bf16.to_float32(dev.copy_to_host())
    qk = 3 * 64
    assert np.isfinite(got[0]).all()  # position 7 is in the table
    assert np.isnan(got[1:, :qk]).all()  # 100 and -5 are not: their Q and K heads are NaN
    np.testing.assert_array_equal(dev.copy_to_host()[:, qk:], qkv[:, qk:])  # V untouched
    with pytest.raises(ropelab.RopeDeviceError, match="100|-5"):
        ropelab.check_errors()
    ropelab.check_errors()  # read and cleared
    want = ropelab.fused_qknorm_rope(qkv[:1].copy(), cache=True, max_positions=100,
                                     **{**kw, "positions": kw["positions"][:1]})
    np.testing.assert_array_equal(dev.copy_to_host()[:1], want)


def _cache_bad_cases():
    yield dict(cache="yes", max_positions=10), TypeError, "cache must be True or False"
    yield dict(max_positions=10), ropelab.RopeInputError, "pass cache=True with it"
    yield dict(cache=True), ropelab.RopeInputError, "cache=True needs max_positions"
    yield dict(cache=True, max_positions=0), ropelab.RopeInputError, "max_positions must be >= 1"
    yield dict(cache=True, max_positions=10.0), TypeError, "max_positions must be an int"
    yield dict(cache=True, max_positions=2**24), ropelab.RopeInputError, "exceeds 268435456"


@pytest.mark.parametrize("i", range(6))
@pytest.mark.parametrize("tokens", [3, 0])  # checked even when there is nothing to do
def test_cache_options_are_checked_before_anything_runs(rng, launches, i, tokens):
    change, exc, match = list(_cache_bad_cases())[i]
    qkv, kw = _inputs(rng, tokens=tokens)
    before = qkv.copy()
    with pytest.raises(exc, match=match):
        ropelab.fused_qknorm_rope(qkv, **change, **kw)
    assert launches == []
    np.testing.assert_array_equal(qkv, before)


@pytest.mark.parametrize("kernel, storage, interleave", [
    ("fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full", "bfloat16", True),
    ("fused_qknorm_rope_d128_gptj_float16_v128_h2_g16_full", "float16", True),
    ("fused_qknorm_rope_d128_neox_bfloat16_v64_h2_g16_split_full", "bfloat16", False),
    ("fused_qknorm_rope_d128_gptj_float32_v128_full", "float32", True),
])
def test_sass_stays_within_6_percent_of_the_cuda_twin(fused_census, kernel, storage, interleave):
    # The 16-bit kernels were issue-bound near the copy roof: on the H200 their time followed
    # their instruction count (data/bench_fused/).  The CUDA C++ twin of the same algorithm is
    # the yardstick; a change that adds instructions to ropelab's build fails here, on a laptop.
    # The timed builds (2026-12-01 11:46) sit at +2% (GPT-J) and +5.4% (split NeoX: its two
    # runs' addresses) of the twin's count, and 0-3% of its time.
    pytest.importorskip("cuda.bindings.nvrtc")
    from ropelab.measure import baselines

    ours = fused_census[kernel]["sass"]
    if ours is None:
        pytest.skip("nvdisasm is not installed (the sass extra)")
    twin = baselines.twin_sass_counts([baselines.fused_twin_name(storage, 128, interleave)])
    theirs = next(iter(twin.values()))["sass_instructions"]
    assert ours <= 1.06 * theirs, (kernel, ours, theirs)

