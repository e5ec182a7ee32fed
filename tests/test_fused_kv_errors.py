"""The serving op's refusals (before any kernel runs, every buffer unchanged), its device-side
errors (the error word: slots past the cache, positions past the cos/sin cache), zero tokens,
and the engine's device route (a cached call shape, overlaps on new pointers, alignment)."""

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import RopeDeviceError, RopeInputError, check_kv
from ropelab.ops import call

import fake_device
from fake_device import CAI

HEADS, D = (2, 1, 1), 64


def _inputs(rng, storage="bfloat16", fp8_cache=False, tokens=3):
    return check_kv.kv_inputs(rng, tokens=tokens, heads=HEADS, head_dim=D, storage=storage,
                              fp8_cache=fp8_cache)


def _call(inputs, **options):
    args = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=D,
                q_weight=inputs["q_weight"], k_weight=inputs["k_weight"],
                positions=inputs["positions"], slot_mapping=inputs["slot_mapping"],
                k_cache=inputs["k_cache"], v_cache=inputs["v_cache"])
    args.update(options)
    return ropelab.fused_qknorm_rope_kv(inputs["qkv"], **args)


def _refused(launches, inputs, match, error=RopeInputError, **options):
    before = {k: np.array(v).copy() for k, v in inputs.items()}
    with pytest.raises(error, match=match):
        _call(inputs, **options)
    assert launches == []
    for k, v in inputs.items():
        np.testing.assert_array_equal(np.asarray(v), before[k])


# ---- refusals ------------------------------------------------------------------------------------

def test_slots_past_the_cache_and_shared_slots_are_refused(rng, launches):
    inputs = _inputs(rng)
    capacity = inputs["k_cache"].shape[0] * inputs["k_cache"].shape[1]
    _refused(launches, inputs, "slot 16 is past the cache",
             slot_mapping=np.array([0, capacity, 1]))
    _refused(launches, inputs, r"slot 5 is given to more than one token \(tokens \[0, 2\]\)",
             slot_mapping=np.array([5, -1, 5]))
    _refused(launches, inputs, "slot_mapping must have shape", slot_mapping=np.array([0, 1]))
    _refused(launches, inputs, "must be integers", slot_mapping=np.array([0.0, 1.0, 2.0]))
    # Padding may repeat: -1 is no slot.
    _call(inputs, slot_mapping=np.array([-1, 3, -1]))
    assert len(launches) == 1


def test_caches_that_do_not_match_the_heads_are_refused(rng, launches):
    inputs = _inputs(rng)
    kc = inputs["k_cache"]
    _refused(launches, inputs, r"k_cache must be \[num_blocks, block_size, 1, 64\]",
             k_cache=np.zeros((4, 4, 2, D), kc.dtype))
    _refused(launches, inputs, r"v_cache must be \[num_blocks, block_size, 1, 64\]",
             v_cache=np.zeros((4, 4, 1, 128), kc.dtype))
    _refused(launches, inputs, "k_cache must be", k_cache=np.zeros((16, 1, D), kc.dtype))
    _refused(launches, inputs, "k_cache must have qkv's dtype",
             k_cache=np.zeros(kc.shape, np.float16))
    _refused(launches, inputs, "same \\[num_blocks, block_size\\]",
             v_cache=np.zeros((8, 2, 1, D), kc.dtype))
    _refused(launches, inputs, "both be FP8", v_cache=np.zeros(kc.shape, np.uint8))
    _refused(launches, inputs, "C-contiguous",
             k_cache=np.zeros((4, 4, 1, 2 * D), kc.dtype)[..., ::2])
    for empty in ((0, 4, 1, D), (4, 0, 1, D)):  # NumPy gives an empty array zero strides
        _refused(launches, inputs, "the caches hold no slot", k_cache=np.zeros(empty, kc.dtype),
                 v_cache=np.zeros(empty, kc.dtype))
    _refused(launches, inputs, "num_heads_v must be at least 1", num_heads_v=0,
             num_heads_q=3)


def test_a_cache_inside_qkv_or_shared_by_k_and_v_is_refused(rng, launches):
    inputs = _inputs(rng, storage="float32", tokens=16)
    inside = inputs["qkv"].reshape(16 * 4, D)[:16].reshape(4, 4, 1, D)  # qkv's own bytes
    _refused(launches, inputs, "qkv overlaps k_cache", k_cache=inside)
    _refused(launches, inputs, "k_cache overlaps v_cache", v_cache=inputs["k_cache"])
    over_qkv = inputs["qkv"].reshape(-1)[:16 * 2 * D].reshape(16, 2 * D)  # contiguous, inside
    _refused(launches, inputs, "q_out overlaps qkv", q_out=over_qkv)


def test_scales_must_be_positive_finite_and_for_an_fp8_cache(rng, launches):
    inputs = _inputs(rng, fp8_cache=True)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        _refused(launches, inputs, "k_scale must be positive and finite", k_scale=bad)
    _refused(launches, inputs, "no finite, nonzero float32 reciprocal", v_scale=1e-45)
    _refused(launches, inputs, "must be a number", TypeError, k_scale="0.5")
    _refused(launches, _inputs(rng), "k_scale scales an FP8 cache", k_scale=0.5)


def test_q_out_norm_and_alignment_checks(rng, launches):
    inputs = _inputs(rng)
    _refused(launches, inputs, "q_out must be", q_out=np.zeros((3, 3 * D), np.uint16))
    _refused(launches, inputs, "q_out must have qkv's dtype", q_out=np.zeros((3, 2 * D),
                                                                             np.float16))
    _refused(launches, inputs, "norm must be one of", norm="layer")
    _refused(launches, inputs, "norm must be a string", TypeError, norm=None)


def test_check_slots_reads_device_slots_before_the_launch(rng, launches):
    inputs = _inputs(rng)
    dev = {k: cuda.to_device(v) for k, v in inputs.items()}
    dev["slot_mapping"] = cuda.to_device(np.array([2, 7, 2], np.int64))
    with pytest.raises(RopeInputError, match="slot 2 is given to more than one token"):
        _call(dev, check_slots=True)
    dev["slot_mapping"] = cuda.to_device(np.array([2, 7, 2], np.int16))
    with pytest.raises(RopeInputError, match="int32 or int64"):
        _call(dev)
    assert launches == []


# ---- device errors: the error word ------------------------------------------------------------

def test_a_device_slot_past_the_cache_writes_nothing_and_is_reported(rng):
    ropelab.check_errors()  # clear what an earlier test left
    inputs = _inputs(rng)
    dev = {k: cuda.to_device(v) for k, v in inputs.items()}
    dev["slot_mapping"] = cuda.to_device(np.array([3, 99, 4], np.int32))
    _call(dev)
    k = dev["k_cache"].copy_to_host().reshape(16, D)
    before = inputs["k_cache"].reshape(16, D)
    assert not np.array_equal(k[[3, 4]], before[[3, 4]])  # the other tokens are written
    np.testing.assert_array_equal(np.delete(k, [3, 4], axis=0), np.delete(before, [3, 4], 0))
    with pytest.raises(RopeDeviceError, match="slot 99 .*past the end of its KV cache"):
        ropelab.check_errors()
    ropelab.check_errors()  # read and cleared


def test_a_device_position_past_the_cos_sin_cache_writes_nan(rng):
    ropelab.check_errors()
    inputs = _inputs(rng, storage="float32", fp8_cache=True)
    dev = {k: cuda.to_device(v) for k, v in inputs.items()}
    dev["positions"] = cuda.to_device(np.array([1, 2, 500], np.int32))
    dev["slot_mapping"] = cuda.to_device(np.array([0, 1, 2], np.int64))
    _call(dev, cache=True, max_positions=64)
    q = dev["qkv"].copy_to_host()[:, :2 * D]
    assert np.isnan(q[2]).all() and np.isfinite(q[:2]).all()
    k = dev["k_cache"].copy_to_host().reshape(16, D)
    assert (k[2] & 0x7F == 0x7F).all() and (k[:2] & 0x7F != 0x7F).all()  # e4m3 NaN
    with pytest.raises(RopeDeviceError, match="position 500"):
        ropelab.check_errors()


def test_zero_tokens_run_nothing_and_are_still_checked(rng, launches):
    inputs = _inputs(rng, tokens=0)
    before = inputs["k_cache"].copy()
    got = _call(inputs)
    assert got is inputs["qkv"] and launches == []
    np.testing.assert_array_equal(inputs["k_cache"], before)
    with pytest.raises(RopeInputError, match="k_cache must be"):
        _call(inputs, k_cache=np.zeros((4, 4, 3, D), np.uint16))
    # overlaps too: two caches in one buffer are a bad call with or without tokens
    with pytest.raises(RopeInputError, match="k_cache overlaps v_cache"):
        _call(inputs, v_cache=inputs["k_cache"])


# ---- the engine's device route ------------------------------------------------------------------

@pytest.fixture
def device_route(monkeypatch):
    yield from fake_device.route(monkeypatch)


def _cai_inputs(base):
    row = 4 * D
    return dict(qkv=CAI(base, (8, row)), q_weight=CAI(base + (1 << 16), (D,)),
                k_weight=CAI(base + (2 << 16), (D,)), positions=CAI(base + (3 << 16), (8,), "<i4"),
                slot_mapping=CAI(base + (4 << 16), (8,), "<i8"),
                k_cache=CAI(base + (5 << 16), (4, 4, 1, D)),
                v_cache=CAI(base + (6 << 16), (4, 4, 1, D)))


def test_the_device_route_caches_the_call_and_checks_new_pointers(device_route):
    a, b = _cai_inputs(1 << 24), _cai_inputs(1 << 25)
    _call(a)
    _call(b)
    assert len(device_route) == 1 and len(device_route[0].fired) == 2  # one bind, two launches
    fired = device_route[0].fired[1][0]
    qkv = b["qkv"].__cuda_array_interface__["data"][0]
    assert fired[:2] == (qkv, qkv)  # Q back into qkv: the kernel's destination is qkv itself
    inside = dict(b, k_cache=CAI((1 << 25) + 64, (4, 4, 1, D)))  # k_cache within qkv's bytes
    for cached in (True, False):
        if not cached:
            call.clear()
        with pytest.raises(RopeInputError, match="qkv overlaps k_cache"):
            _call(inside)
    misaligned = dict(b, v_cache=CAI((1 << 26) + 8, (4, 4, 1, D)))
    with pytest.raises(RopeInputError, match="v_cache must start on a 16-byte boundary"):
        _call(misaligned)
    assert len(device_route[0].fired) == 2
