"""Fused QK-RMSNorm + RoPE: the float64 reference, the kernel against it, and input checking.

On the simulator (no GPU) the kernel runs one Python thread per CUDA thread with the warp
shuffles of ropelab.sim.warp, so shapes stay tiny: 3-5 tokens, 1-3 heads of each kind.  The grid is
(tokens, head groups): the partial block is the last head group, so head counts that are not a
multiple of the warps per block are what exercises the tail.  Budget: about 40 s on 2 cores.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import bf16, fused, reference, shapes
from ropelab.kernels import FUSED
from ropelab.arrays import inspect_array
from ropelab.kernels import fused_qknorm_rope as kmod

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


def test_yarn_blend_agrees_with_hugging_face_style_yarn_of_ropelab_scaling():
    scaling = pytest.importorskip("ropelab.scaling")
    for rd, base, factor, l0 in [(128, 10000.0, 4.0, 4096), (64, 1e6, 8.0, 32768)]:
        low, high = scaling.yarn_correction_range(rd, base, l0, 32.0, 1.0)
        np.testing.assert_allclose(reference.yarn_blend_inv_freq(rd, base, factor, low, high),
                                   scaling.yarn_inv_freq(rd, base, factor, l0, 32.0, 1.0), rtol=1e-14)


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
    row = fused.check_case(rng, tokens=tokens, heads=heads, head_dim=d, rotary_dim=rd,
                           storage=storage, interleave=interleave, yarn=yarn)
    assert row.v_unchanged, "V bytes changed"
    assert row.max_error <= row.tolerance, row


@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
def test_tight_tolerance_at_small_angles_without_fastmath(rng, interleave):
    # Positions below 64 keep every angle small, so the budget is a few float32 ulps: an error
    # in the norm (a wrong mean, a missing lane in the reduction) cannot hide in it.
    row = fused.check_case(rng, tokens=4, heads=(2, 1, 1), head_dim=64, rotary_dim=64,
                           storage="float32", interleave=interleave, fastmath=False, max_position=64)
    assert row.tolerance < 2e-4 and row.max_error <= row.tolerance, row


@pytest.mark.parametrize("head_dim, rotary_dim, interleave", [(192, 190, True), (512, 256, False)])
def test_other_head_dims(rng, head_dim, rotary_dim, interleave):
    row = fused.check_case(rng, tokens=2, heads=(1, 1, 1), head_dim=head_dim, rotary_dim=rotary_dim,
                           storage="float32", interleave=interleave)
    assert row.passed, row


@pytest.mark.parametrize("wpb", [1, 2, 4])
def test_head_counts_not_a_multiple_of_the_warps_per_block(rng, wpb):
    # 3 Q + 2 K heads = 5 warps per token: every block size leaves a partial last head group.
    row = fused.check_case(rng, tokens=3, heads=(3, 2, 1), head_dim=64, rotary_dim=32,
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
    row = fused.check_case(rng, tokens=3, heads=heads, head_dim=head_dim, rotary_dim=head_dim // 2,
                           storage=storage, interleave=interleave, warps_per_block=wpb,
                           heads_per_warp=hpw)
    assert row.passed, row


def test_two_heads_per_warp_halves_the_warps():
    p = fused.build_problem(inspect_array(np.zeros((7, 48 * 128 + 24 * 128), np.uint16), "qkv"),
                            num_heads_q=24, num_heads_k=24, num_heads_v=24, head_dim=128)
    assert kmod.launch_config(p, 8, heads_per_warp=1) == ((7, 6), 256)
    assert kmod.launch_config(p, 8, heads_per_warp=2) == ((7, 3), 256)


@pytest.mark.parametrize("bad", [0, 3, 8, True, 1.0])
def test_heads_per_warp_must_be_one_or_two(rng, bad):
    qkv, kw = _inputs(rng)
    before = qkv.copy()
    with pytest.raises(ropelab.RopeInputError, match="heads_per_warp"):
        ropelab.fused_qknorm_rope(qkv, heads_per_warp=bad, **kw)
    np.testing.assert_array_equal(qkv, before)


def _inputs(rng, storage="float32", tokens=3, heads=(2, 1, 2), d=64):
    qkv, wq, wk, pos = fused.random_inputs(rng, tokens, heads, d, storage)
    kw = dict(num_heads_q=heads[0], num_heads_k=heads[1], num_heads_v=heads[2], head_dim=d,
              q_weight=wq, k_weight=wk, positions=pos)
    return qkv, kw


def test_device_array_in_place_and_v_untouched(rng):
    qkv, kw = _inputs(rng, "bfloat16")
    host = qkv.copy()
    dev = cuda.to_device(qkv)
    out = ropelab.fused_qknorm_rope(dev, **kw)
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
    yield "weight dtype", dict(k_weight=w.astype(np.float64)), TypeError, "k_weight must have the dtype of qkv"
    yield "weight list", dict(q_weight=list(w)), TypeError, "q_weight must be a NumPy array"
    yield "rotary odd", dict(rotary_dim=33), ropelab.RopeInputError, "positive even"
    yield "rotary too big", dict(rotary_dim=66), ropelab.RopeInputError, r"must not exceed head_dim \(64\)"
    yield "rotary not lane-aligned for neox", dict(rotary_dim=30, interleave=False), ropelab.RopeInputError, "multiple of 2 \\* head_dim / 32 = 4"
    yield "rotary type", dict(rotary_dim=32.0), TypeError, "rotary_dim must be an int"
    yield "positions length", dict(positions=np.zeros(4, np.int32)), ropelab.RopeInputError, r"shape \(3,\)"
    yield "positions dtype", dict(positions=np.zeros(3, np.int64)), TypeError, "positions must be int32"
    yield "positions float", dict(positions=np.zeros(3, np.float32)), TypeError, "positions must be int32"
    yield "heads mismatch", dict(num_heads_v=1), ropelab.RopeInputError, r"rows have 320 elements but"
    yield "no q or k", dict(num_heads_q=0, num_heads_k=0, num_heads_v=5), ropelab.RopeInputError, "at least 1"
    yield "negative heads", dict(num_heads_k=-1, num_heads_v=3), ropelab.RopeInputError, "num_heads_k must be >= 0"
    yield "eps nan", dict(eps=float("nan")), ropelab.RopeInputError, "eps must be a finite number"
    yield "eps negative", dict(eps=-1.0), ropelab.RopeInputError, "eps must be a finite number >= 0"
    yield "base", dict(base=1.0), ropelab.RopeInputError, "base must be"
    yield "yarn keys", dict(yarn=dict(factor=2.0, low=1.0)), ropelab.RopeInputError, r"yarn needs \['high'\]"
    yield "yarn order", dict(yarn=dict(factor=2.0, low=5.0, high=1.0)), ropelab.RopeInputError, "must not be below"
    yield "yarn type", dict(yarn=(2.0, 1.0, 5.0)), TypeError, "yarn must be None"
    yield "interleave type", dict(interleave="neox"), TypeError, "interleave must be True or False"
    yield "warps per block", dict(warps_per_block=33), ropelab.RopeInputError, "at most 32"


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
    with pytest.raises(TypeError, match="float32, float16, or uint16"):
        ropelab.fused_qknorm_rope(qkv.astype(np.float64), **kw)
    with pytest.raises(TypeError, match="must be a NumPy array or a CUDA array"):
        ropelab.fused_qknorm_rope(qkv.tolist(), **kw)
    np.testing.assert_array_equal(wide, 0)


def test_weights_inside_qkv_are_refused(rng):
    qkv, kw = _inputs(rng)
    dev = cuda.to_device(qkv)
    kw["q_weight"] = dev[0, :64]  # a view into the buffer the kernel writes
    before = dev.copy_to_host()
    with pytest.raises(ropelab.RopeInputError, match="overlaps qkv"):
        ropelab.fused_qknorm_rope(dev, **kw)
    np.testing.assert_array_equal(dev.copy_to_host(), before)


# ---- module shape, registry, shapes ----------------------------------------------------------------

def test_module_follows_the_kernel_module_shape():
    assert FUSED == {"fused_qknorm_rope": kmod}
    assert "fused_qknorm_rope" not in ropelab.kernels.VARIANTS
    for name in ("NAME", "SUMMARY", "KERNEL", "PTX_SIGNATURE", "launch_config", "launch"):
        assert hasattr(kmod, name), name
    assert set(kmod.PTX_SIGNATURE) == set(STORAGES)
    p = fused.FusedProblem(7, 24, 24, 24, 128, 128, True, "bfloat16", 1e-6, 1e4)
    assert kmod.launch_config(p) == ((7, 6), 256)  # 48 heads in groups of 8 warps
    assert kmod.launch_config(p, warps_per_block=5) == ((7, 10), 160)


def test_warps_per_block_choice_minimises_idle_warps():
    assert kmod.pick_warps_per_block(48) == 8
    assert kmod.pick_warps_per_block(60) == 4
    assert kmod.pick_warps_per_block(6) == 2
    assert kmod.pick_warps_per_block(64) == 8


def test_production_shapes():
    p = shapes.PRODUCTION_SHAPES
    assert set(p) == {"flux_1024", "qwen_image_1024", "qwen_image_partial", "zimage_1024"}
    assert p["flux_1024"] == shapes.FusedShape("flux_1024", 4096, 24, 24, 24, 128, 128)
    assert p["qwen_image_partial"].rotary_dim == 64
    assert p["zimage_1024"].heads_q == 30
    assert p["flux_1024"].qk_bytes(2) == 2 * 4096 * 48 * 128 * 2  # 100.7 MB, as the notes say
    assert shapes.ROPE_SHAPES["large_32768x4096"].bytes_moved() > 1e9


def test_bf16_inputs_are_exact_bfloat16():
    qkv, wq, wk, pos = fused.random_inputs(np.random.default_rng(0), 2, (1, 1, 1), 64, "bfloat16")
    assert qkv.dtype == np.uint16 and pos.dtype == np.int32
    np.testing.assert_array_equal(bf16.from_float32(bf16.to_float32(qkv)), qkv)


_PTX_PROBE = """
import ropelab
from numba import cuda
from ropelab.kernels import fused_qknorm_rope as m
for inter, st in ((True, "bfloat16"), (False, "float32"), (True, "float16")):
    ptx = cuda.compile_ptx(m.make_kernel(128, inter, st), m.PTX_SIGNATURE[st], cc=(9, 0),
                           fastmath=True)[0]
    body = ptx[ptx.index(".entry"):]
    print(st, inter, body.count("shfl.sync.bfly.b32"), body.count("shfl.sync.idx.b32"),
          body.count(".f64"), body.count("sin.approx"), body.count("div.s"), body.count("div.u"))
ptx = cuda.compile_ptx(m.make_kernel(128, False, "float32", True), m.PTX_SIGNATURE["float32"],
                       cc=(9, 0), fastmath=True)[0]
print("vector4", ptx.count("ld.global.v4.f32"), ptx.count("st.global.v4.f32"), ptx.count(".f64"))
"""


@pytest.mark.skipif(not ropelab.SIMULATED, reason="the GPU census covers this with a driver")
def test_ptx_has_butterfly_shuffles_and_no_float64():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="gpu", ROPELAB_QUIET="1")
    res = subprocess.run([sys.executable, "-c", _PTX_PROBE], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line.split() for line in res.stdout.strip().splitlines()]
    assert len(rows) == 4
    assert rows.pop() == ["vector4", "1", "1", "0"]  # one 128-bit load and store per lane
    for st, inter, bfly, idx, f64, sin, divs, divu in rows:
        assert int(bfly) == 5  # the reduction: 16, 8, 4, 2, 1
        assert int(idx) == (0 if inter == "True" else 4)  # NeoX: one partner shuffle per slot
        assert int(f64) == 0, f"{st}: float64 in a fast-math build"
        assert int(sin) == (2 if inter == "True" else 4)  # one per pair (gptj), per slot (neox)
        assert int(divs) == 0 and int(divu) == 0  # no integer division anywhere


def test_misaligned_bfloat16_device_buffer_is_refused(rng):
    qkv, kw = _inputs(rng, "bfloat16")
    flat = cuda.to_device(np.zeros(qkv.size + 1, np.uint16))
    shifted = flat[1:].reshape(qkv.shape)  # 2 bytes past a 4-byte boundary
    with pytest.raises(ropelab.RopeInputError, match="4-byte aligned"):
        ropelab.fused_qknorm_rope(shifted, **kw)


def test_float32_vector_and_scalar_paths_agree(rng):
    qkv, kw = _inputs(rng, "float32", tokens=2, heads=(1, 1, 1), d=128)
    aligned = cuda.to_device(qkv)
    flat = cuda.to_device(np.zeros(qkv.size + 1, np.float32))
    flat[1:] = qkv.reshape(-1)
    shifted = flat[1:].reshape(qkv.shape)  # 4 bytes past a 16-byte boundary: scalar path
    problem = fused.build_problem(fused.inspect_array(qkv, "qkv"), num_heads_q=1, num_heads_k=1,
                                  num_heads_v=1, head_dim=128)
    assert kmod.uses_vector4(problem, aligned.reshape(-1))
    assert not kmod.uses_vector4(problem, shifted.reshape(-1))
    ropelab.fused_qknorm_rope(aligned, **kw)
    ropelab.fused_qknorm_rope(shifted, **kw)
    np.testing.assert_array_equal(aligned.copy_to_host(), shifted.copy_to_host())


def test_device_case_launches_without_validation_like_the_public_api(rng):
    tiny = shapes.FusedShape("tiny", 2, 1, 1, 1, 64, 32)
    case = fused.device_case(tiny, "bfloat16", interleave=False, seed=3)
    # bfloat16 qkv is kept as uint32 words (two elements each), the form the kernel takes.
    start = case.qkv.copy_to_host().view(np.uint16).reshape(2, 192)
    case.launch()
    # The same seed gives device_case's weights and positions back on the host.
    _, wq, wk, pos = fused.random_inputs(np.random.default_rng(3), 2, (1, 1, 1), 64, "bfloat16")
    kw = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64, rotary_dim=32,
              interleave=False, q_weight=wq, k_weight=wk, positions=pos)
    want = ropelab.fused_qknorm_rope(start.copy(), **kw)
    np.testing.assert_array_equal(case.qkv.copy_to_host().view(np.uint16).reshape(2, 192), want)
    assert case.qk_bytes == 2 * 2 * 2 * 64 * 2
