"""``ropelab.fused_qknorm_rope(..., out=out)``: the out-of-place fused forward in one pass.

The kernel reads ``qkv`` and writes ``out``: Q and K heads normalized and rotated by the
in-place kernel's own code, V heads copied by warps of their own.  So ``out`` must be the
in-place result bit for bit on Q and K, ``qkv``'s bits on V, and ``qkv`` must come back as it
went in.  On the simulator; shapes tiny (2-3 tokens, a few heads).  The device route's fast path
is driven without a GPU through tests/fake_device.py.
"""

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab.kernels import fused_qknorm_rope as kmod
from ropelab.kernels.fused_qknorm_rope import host as khost
from ropelab.kernels.fused_qknorm_rope import kernel as kkernel
from ropelab.ops import call
from ropelab.problem import FusedProblem

import fake_device
from fake_device import CAI
from test_fused import _inputs as fused_inputs, launched_plans  # noqa: F401

SENTINEL = 0x7FC1  # a NaN pattern in every storage's bits: any element the kernel misses shows


def _inputs(rng, storage, heads, d, tokens=3, rotary_dim=None, interleave=True, **extra):
    qkv, kw = fused_inputs(rng, storage, tokens, heads, d)
    kw.update(rotary_dim=rotary_dim, interleave=interleave, **extra)
    return qkv, kw


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


def _blank(qkv):
    out = np.empty_like(qkv)
    _bits(out)[...] = SENTINEL if qkv.dtype.itemsize == 2 else (0x7FC00000 | SENTINEL)
    return out


def mismatches(before, after, in_place, out, qk_columns) -> list[str]:
    """What an out-of-place call got wrong: ``before`` / ``after`` are qkv around the call,
    ``in_place`` the in-place result of the same inputs, ``out`` the call's result."""
    found = []
    if not np.array_equal(_bits(after), _bits(before)):
        found.append("qkv changed")
    if not np.array_equal(_bits(out)[:, :qk_columns], _bits(in_place)[:, :qk_columns]):
        found.append("Q/K differ from the in-place result")
    if not np.array_equal(_bits(out)[:, qk_columns:], _bits(before)[:, qk_columns:]):
        found.append("V differs from qkv's V")
    return found


def _one_pass_vs_in_place(qkv, kw):
    before = qkv.copy()
    in_place = ropelab.fused_qknorm_rope(qkv.copy(), **kw)
    out = _blank(qkv)
    assert ropelab.fused_qknorm_rope(qkv, out=out, **kw) is out
    qk = (kw["num_heads_q"] + kw["num_heads_k"]) * kw["head_dim"]
    assert np.array_equal(_bits(in_place)[:, qk:], _bits(before)[:, qk:])  # in place: V untouched
    return mismatches(before, qkv, in_place, out, qk)


CASES = [
    # storage, interleave, heads (q, k, v), head_dim, rotary_dim, extra options
    *[(s, i, (2, 1, 2), 64, None, {}) for s in ("float32", "float16", "bfloat16")
      for i in (True, False)],
    ("bfloat16", True, (4, 2, 2), 128, None, {}),                  # GQA, 128-bit words
    ("bfloat16", False, (4, 2, 2), 128, None, {}),                 # split NeoX
    ("float32", False, (4, 2, 2), 128, None, {}),                  # float4, a warp a head
    ("float16", True, (2, 1, 3), 128, 64, {}),                     # partial; 3 V: a half V warp
    ("float16", False, (2, 1, 3), 128, 64, {}),                    # NeoX partners by shuffle
    ("bfloat16", True, (3, 3, 3), 64, None, {"heads_per_warp": 4}),  # V warps of 4, one partial
    ("bfloat16", False, (1, 1, 1), 128, None, {"heads_per_warp": 1}),
    ("float32", True, (2, 1, 1), 64, 32, {"cache": True, "max_positions": 4096}),
    ("float32", False, (2, 1, 1), 64, 32, {"cache": True, "max_positions": 4096}),
    ("bfloat16", True, (2, 2, 1), 64, None, {"warps_per_block": 1}),
    ("float32", True, (1, 1, 0), 64, None, {}),                    # no V heads: no V warps
]


@pytest.mark.parametrize("storage, interleave, heads, d, rotary_dim, extra", CASES,
                         ids=lambda c: str(c).replace(" ", ""))
def test_out_is_the_in_place_result_and_qkv_is_left_alone(rng, storage, interleave, heads, d,
                                                         rotary_dim, extra):
    qkv, kw = _inputs(rng, storage, heads, d, rotary_dim=rotary_dim, interleave=interleave,
                      **extra)
    assert _one_pass_vs_in_place(qkv, kw) == []


@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
def test_a_user_cos_sin_cache(rng, interleave):
    qkv, kw = _inputs(rng, "bfloat16", (2, 1, 2), 64, interleave=interleave)
    freqs = 1.0 / 10000.0 ** (np.arange(0, 64, 2) / 64)
    angles = np.arange(64)[:, None] * freqs[None, :]
    kw["cos_sin_cache"] = np.concatenate([np.cos(angles), np.sin(angles)], 1).astype(np.float32)
    kw["positions"] = np.array([3, 0, 63], np.int32)
    assert _one_pass_vs_in_place(qkv, kw) == []


@pytest.mark.parametrize("storage", ["bfloat16", "float16", "float32"])
def test_device_arrays_aligned_and_not(rng, storage, launched_plans):
    # A weight 2 bytes past a 16-byte boundary sends the call down the word path (V copied an
    # item at a time); aligned arrays take the 128-bit accesses and the 128-bit V copy.
    qkv, kw = _inputs(rng, storage, (2, 1, 2), 128, tokens=2)
    want = ropelab.fused_qknorm_rope(qkv.copy(), **kw)
    dev = {k: cuda.to_device(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    wq = kw["q_weight"]
    spare = cuda.to_device(np.zeros(wq.size + 1, wq.dtype))
    spare[1:] = wq
    d_qkv = cuda.to_device(qkv)
    for weight in (dev["q_weight"], spare[1:]):
        out = cuda.to_device(_blank(qkv))
        assert ropelab.fused_qknorm_rope(d_qkv, out=out, **{**dev, "q_weight": weight}) is out
        assert mismatches(qkv, d_qkv.copy_to_host(), want, out.copy_to_host(), 3 * 128) == []
    names = [p.kernel.__qualname__ for p in launched_plans if "_out" in p.kernel.__qualname__]
    assert len(names) == 2 and names[0].endswith("_out128") and names[1].endswith("_out"), names


def test_out_is_qkv_is_the_in_place_call(rng, launched_plans):
    qkv, kw = _inputs(rng, "bfloat16", (2, 1, 2), 64)
    want = ropelab.fused_qknorm_rope(qkv.copy(), **kw)
    assert ropelab.fused_qknorm_rope(qkv, out=qkv, **kw) is qkv
    np.testing.assert_array_equal(_bits(qkv), _bits(want))
    assert not any("_out" in p.kernel.__qualname__ for p in launched_plans)


def test_zero_tokens_returns_out(rng, launches):
    qkv = np.zeros((0, 3 * 64), np.float32)
    out = np.zeros_like(qkv)
    w = np.ones(64, np.float32)
    got = ropelab.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1,
                                    head_dim=64, q_weight=w, k_weight=w,
                                    positions=np.zeros(0, np.int32), out=out)
    assert got is out and launches == []


def test_the_grid_has_the_value_warps():
    p = FusedProblem(7, 24, 8, 8, 128, 128, True, "bfloat16", 1e-6, 1e4, inv_freq=np.ones(64))
    assert kmod.launch_config(p, None, 2) == ((7, 2), (256, 1))  # 16 Q/K warps, 8 a block
    # + 4 V warps: 20 a token, in blocks of 4 warps and 2 tokens
    assert kmod.launch_config(p, None, 2, values=True) == ((4, 5), (128, 2))
    plan = kmod.VARIANT.plan(p, {"out_of_place": True})
    assert plan.kernel.__qualname__ == \
        "fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full_out128"
    assert plan.caller[:2] == (np.dtype(np.uint32),) * 2  # qkv, then out: 32-bit words
    assert kmod.VARIANT.plan(p, {"out_of_place": True}, aligned=False).kernel.__qualname__ == \
        "fused_qknorm_rope_d128_gptj_bfloat16_h2_g16_full_out"
    with pytest.raises(TypeError, match="out_of_place"):
        kmod.VARIANT.plan(p, {"out_of_place": 1})


# ---- planted mistakes: the checks above must see them ------------------------------------------

@pytest.fixture(autouse=True)
def forget_calls():
    # A planted mistake reaches the kernel only through validation: a call shape an earlier
    # test of this worker remembered would fire its own bound launch, the mistake unseen.
    call.clear()
    yield
    call.clear()


@pytest.fixture
def fresh_kernels():
    kkernel.make_kernel.cache_clear()
    yield
    kkernel.make_kernel.cache_clear()


def _one_pass_on_device(qkv, kw):
    """As :func:`_one_pass_vs_in_place`, on device arrays: ``out`` starts as the sentinel there,
    so whatever the kernel leaves unwritten shows.  (A NumPy ``out`` goes through a device
    buffer of the host route's own, whose unwritten part holds what that memory last held,
    possibly the in-place call's copy of qkv, V included: a planted mistake could hide.)"""
    before = qkv.copy()
    in_place = ropelab.fused_qknorm_rope(qkv.copy(), **kw)
    d_qkv, d_out = cuda.to_device(qkv), cuda.to_device(_blank(qkv))
    d_kw = {k: cuda.to_device(v) if k in ("q_weight", "k_weight", "positions") else v
            for k, v in kw.items()}
    ropelab.fused_qknorm_rope(d_qkv, out=d_out, **d_kw)
    qk = (kw["num_heads_q"] + kw["num_heads_k"]) * kw["head_dim"]
    return mismatches(before, d_qkv.copy_to_host(), in_place, d_out.copy_to_host(), qk)


def test_a_grid_without_the_value_warps_is_caught(rng, monkeypatch):
    real = khost.launch_config
    monkeypatch.setattr(khost, "launch_config",
                        lambda problem, wpb, hpw, tpb, values=False: real(problem, wpb, hpw, tpb))
    qkv, kw = _inputs(rng, "bfloat16", (2, 1, 2), 64)
    assert _one_pass_on_device(qkv, kw) == ["V differs from qkv's V"]


def test_a_copy_of_half_the_turns_is_caught(rng, monkeypatch, fresh_kernels):
    # Two float16 heads of 256 a warp are 64 accesses of 16 bytes: two turns of the warp.  A
    # copier built for half the items makes one turn and leaves half of each warp's V.
    real = kkernel.make_copy_values
    built = []
    monkeypatch.setattr(kkernel, "make_copy_values", lambda items, hpw, nbytes, item: (
        built.append(items), real(items // 2, hpw, nbytes, item))[1])
    qkv, kw = _inputs(rng, "float16", (1, 1, 2), 256, tokens=2)
    assert _one_pass_on_device(qkv, kw) == ["V differs from qkv's V"]
    assert built  # the kernel was built with the planted copier


def test_the_check_sees_a_changed_qkv_and_a_wrong_q():
    before = np.arange(12, dtype=np.float32).reshape(2, 6)
    after, out = before.copy(), before.copy()
    after[0, 5] = 99
    out[1, 0] = -1
    assert mismatches(before, after, before, out, 3) == ["qkv changed",
                                                         "Q/K differ from the in-place result"]


# ---- a bad out: a clear error before anything runs, qkv and out unchanged --------------------

def _bad_outs(qkv, kw):
    wide = np.zeros((qkv.shape[0], 2 * qkv.shape[1]), qkv.dtype)
    frozen = np.zeros_like(qkv)
    frozen.flags.writeable = False
    buf = np.zeros(qkv.size + qkv.shape[1], qkv.dtype)
    shifted_qkv = buf[:qkv.size].reshape(qkv.shape)
    shifted_qkv[...] = qkv
    holder = np.zeros_like(qkv)
    yield "shape", {"out": np.zeros((qkv.shape[0] + 1, qkv.shape[1]), qkv.dtype)}, \
        ropelab.RopeInputError, "out must have the shape of qkv"
    yield "dtype", {"out": np.zeros(qkv.shape, np.float16)}, ropelab.RopeInputError, \
        r"out must have the dtype of qkv \(float32\)"
    yield "strided", {"out": wide[:, ::2]}, ropelab.RopeInputError, "out must be C-contiguous"
    yield "read-only", {"out": frozen}, ropelab.RopeInputError, "out is read-only"
    yield "a list", {"out": qkv.tolist()}, TypeError, "out must be a NumPy array or a CUDA array"
    yield "device out, host qkv", {"out": cuda.to_device(np.zeros_like(qkv))}, \
        ropelab.RopeInputError, "both be host"
    yield "overlaps qkv", {"qkv": shifted_qkv, "out": buf[qkv.shape[1]:].reshape(qkv.shape)}, \
        ropelab.RopeInputError, "out overlaps qkv: .* pass out=qkv for in place"
    yield "overlaps positions", {"out": holder, "positions":
                                 holder.view(np.int32)[0, :qkv.shape[0]]}, \
        ropelab.RopeInputError, "out overlaps positions"


@pytest.mark.parametrize("i", range(8))
def test_a_bad_out_is_refused_before_launch(rng, launches, i):
    qkv, kw = _inputs(rng, "float32", (2, 1, 2), 64)
    name, change, exc, match = list(_bad_outs(qkv, kw))[i]
    args = {"qkv": qkv, **kw, **change}
    target = args["qkv"]
    before = target.copy()
    out = args["out"]
    out_before = np.array(out.copy_to_host() if hasattr(out, "copy_to_host") else out)
    with pytest.raises(exc, match=match):
        ropelab.fused_qknorm_rope(**args)
    np.testing.assert_array_equal(_bits(target), _bits(before))
    after = np.array(out.copy_to_host() if hasattr(out, "copy_to_host") else out)
    np.testing.assert_array_equal(after, out_before)
    assert launches == []


# ---- the device route's fast path (no GPU: recorded launches) ------------------------------------

@pytest.fixture
def device_route(monkeypatch):
    yield from fake_device.route(monkeypatch)


def _device_kw(head_dim=64, typestr="<u2"):
    return dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=head_dim,
                q_weight=CAI(1 << 20, (head_dim,), typestr),
                k_weight=CAI(2 << 20, (head_dim,), typestr),
                positions=CAI(3 << 20, (2,), "<i4"))


def test_the_fast_path_replays_on_new_pointers_and_rechecks_overlaps(device_route):
    kw = _device_kw()
    shape = (2, 4 * 64)
    out = CAI(5 << 20, shape, "<u2")
    assert ropelab.fused_qknorm_rope(CAI(4 << 20, shape, "<u2"), out=out, **kw) is out
    assert len(device_route) == 1
    bound = device_route[0]
    assert bound.plan.kernel.__qualname__.endswith("_out128")
    assert bound.fired[0][0][:2] == (4 << 20, 5 << 20)  # qkv, then out
    out2 = CAI(7 << 20, shape, "<u2")
    assert ropelab.fused_qknorm_rope(CAI(6 << 20, shape, "<u2"), out=out2, **kw) is out2
    assert len(device_route) == 1 and bound.fired[-1][0][:2] == (6 << 20, 7 << 20)  # cached
    same = CAI(6 << 20, shape, "<u2")  # qkv's memory, another object: in place, allowed
    ropelab.fused_qknorm_rope(CAI(6 << 20, shape, "<u2"), out=same, **kw)
    assert len(bound.fired) == 3
    with pytest.raises(ropelab.RopeInputError, match="out overlaps qkv"):
        ropelab.fused_qknorm_rope(CAI(6 << 20, shape, "<u2"), out=CAI((6 << 20) + 512, shape,
                                                                      "<u2"), **kw)
    with pytest.raises(ropelab.RopeInputError, match="out overlaps q_weight"):
        ropelab.fused_qknorm_rope(CAI(6 << 20, shape, "<u2"), out=CAI((1 << 20) - 64, shape,
                                                                      "<u2"), **kw)
    assert len(device_route) == 1 and len(bound.fired) == 3


def test_a_misaligned_out_is_refused_and_a_half_aligned_one_is_planned_anew(device_route):
    kw = _device_kw()
    shape = (2, 4 * 64)
    ropelab.fused_qknorm_rope(CAI(4 << 20, shape, "<u2"), out=CAI(5 << 20, shape, "<u2"), **kw)
    with pytest.raises(ropelab.RopeInputError, match="bfloat16 out must start at a 4-byte"):
        ropelab.fused_qknorm_rope(CAI(4 << 20, shape, "<u2"), out=CAI((5 << 20) + 2, shape,
                                                                      "<u2"), **kw)
    ropelab.fused_qknorm_rope(CAI(4 << 20, shape, "<u2"), out=CAI((5 << 20) + 8, shape, "<u2"),
                              **kw)
    names = [b.plan.kernel.__qualname__ for b in device_route]
    assert len(names) == 2 and names[0].endswith("_v64_h2_g16_full_out128")
    assert names[1].endswith("_h2_g16_full_out")  # 8 bytes off: the word path, V a word a time


def test_out_and_a_cos_sin_cache_of_the_same_shape_never_share_an_entry(device_route):
    # One Q head of 64 float32 and a 64-wide table: (qkv, out, ...) and (qkv, ..., cache) are
    # both five arrays of the same metadata; the op name in the key tells them apart.
    kw = dict(num_heads_q=1, num_heads_k=0, num_heads_v=0, head_dim=64,
              q_weight=CAI(1 << 20, (64,), "<f4"), k_weight=CAI(2 << 20, (64,), "<f4"),
              positions=CAI(3 << 20, (2,), "<i4"))
    qkv, table = CAI(4 << 20, (2, 64), "<f4"), CAI(5 << 20, (2, 64), "<f4")
    ropelab.fused_qknorm_rope(qkv, out=table, **kw)
    ropelab.fused_qknorm_rope(qkv, cos_sin_cache=table, **kw)
    names = [b.plan.kernel.__qualname__ for b in device_route]
    assert len(names) == 2 and names[0].endswith("_out128") and names[1].endswith("_cache")


def test_in_place_keys_are_unchanged_by_out(device_route):
    kw = _device_kw()
    qkv = CAI(4 << 20, (2, 4 * 64), "<u2")
    ropelab.fused_qknorm_rope(qkv, **kw)
    ropelab.fused_qknorm_rope(qkv, out=qkv, **kw)  # the same call: replayed
    assert len(device_route) == 1 and len(device_route[0].fired) == 2
    (key, _), = call.remembered()
    assert key[0][0] == "fused_qknorm_rope" and len(key) == 5  # scalars, then four arrays
