"""The serving op as torch custom ops (ropelab.torch_ops.kv_op): the
op equals the public call bit for bit, FP8 caches as torch.float8_e4m3fn tensors, opcheck,
torch.compile(fullgraph=True) equals eager, and no gradient (refused clearly).  CPU tensors: the
kernel runs on the simulator, so shapes are small."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ropelab  # noqa: E402
import ropelab.torch_ops as rt  # noqa: E402  (registers the ops)
from ropelab import check_kv  # noqa: E402

HEADS, D, T = (2, 1, 1), 64, 3
KW = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=D)


def _tensors(rng, fp8_cache=False):
    host = check_kv.kv_inputs(rng, tokens=T, heads=HEADS, head_dim=D, storage="bfloat16",
                              fp8_cache=fp8_cache)
    t = {k: torch.from_numpy(v.copy()) for k, v in host.items()}
    for k in ("qkv", "q_weight", "k_weight"):
        t[k] = t[k].view(torch.int16).view(torch.bfloat16)
    if not fp8_cache:
        t["k_cache"], t["v_cache"] = (t[c].view(torch.int16).view(torch.bfloat16)
                                      for c in ("k_cache", "v_cache"))
    else:
        t["k_cache"] = t["k_cache"].view(torch.float8_e4m3fn)  # torch's own FP8 dtype
    return host, t


def _bytes(t):
    return t.contiguous().view(torch.uint8).numpy()


@pytest.mark.parametrize("fp8_cache", [False, True], ids=["bf16", "fp8"])
def test_the_op_equals_the_public_call(rng, fp8_cache):
    host, t = _tensors(rng, fp8_cache)
    scales = dict(k_scale=0.5, v_scale=2.0) if fp8_cache else {}
    got = rt.fused_qknorm_rope_kv(t["qkv"], q_weight=t["q_weight"], k_weight=t["k_weight"],
                                        positions=t["positions"], slot_mapping=t["slot_mapping"],
                                        k_cache=t["k_cache"], v_cache=t["v_cache"], **scales, **KW)
    assert got is t["qkv"]
    ropelab.fused_qknorm_rope_kv(host["qkv"], q_weight=host["q_weight"],
                                 k_weight=host["k_weight"], positions=host["positions"],
                                 slot_mapping=host["slot_mapping"], k_cache=host["k_cache"],
                                 v_cache=host["v_cache"], **scales, **KW)
    for k in ("qkv", "k_cache", "v_cache"):
        np.testing.assert_array_equal(_bytes(t[k]), host[k].view(np.uint8))


def test_q_out_leaves_qkv_and_returns_q_out(rng):
    _, t = _tensors(rng)
    before = t["qkv"].clone()
    q_out = torch.empty(T, 2, D, dtype=torch.bfloat16)
    got = rt.fused_qknorm_rope_kv(t["qkv"], q_weight=t["q_weight"], k_weight=t["k_weight"],
                                        positions=t["positions"], slot_mapping=t["slot_mapping"],
                                        k_cache=t["k_cache"], v_cache=t["v_cache"], q_out=q_out,
                                        **KW)
    assert got is q_out and torch.equal(t["qkv"], before)
    assert not torch.equal(q_out.reshape(T, -1), before[:, :2 * D])


def test_opcheck_both_ops(rng):
    _, t = _tensors(rng, fp8_cache=True)
    t["k_cache"] = t["k_cache"].view(torch.uint8)  # vLLM's FP8 storage (opcheck's own checks
    # compute on the tensors, which float8_e4m3fn does not support on the CPU)
    config = rt.encode(k_scale=0.5, v_scale=None, **KW)
    args = (t["qkv"], t["q_weight"], t["k_weight"], t["positions"], t["slot_mapping"],
            t["k_cache"], t["v_cache"])
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope_kv.default, (*args, config))
    q_out = torch.empty(T, 2 * D, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope_kv_out.default,
                          (*args, q_out, config))


def _step(qkv, wq, wk, pos, slots, kc, vc):
    q = rt.fused_qknorm_rope_kv(qkv, q_weight=wq, k_weight=wk, positions=pos,
                                      slot_mapping=slots, k_cache=kc, v_cache=vc, **KW)
    return q[:, :2 * D].float().sum() + kc.float().sum()


def _public_step(qkv, wq, wk, pos, slots, kc, vc):
    # Code written against the public function compiles too (substituted while tracing).
    ropelab.fused_qknorm_rope_kv(qkv, q_weight=wq, k_weight=wk, positions=pos,
                                 slot_mapping=slots, k_cache=kc, v_cache=vc, **KW)
    return kc.float().sum()


def test_compiled_fullgraph_equals_eager(rng):
    _, t = _tensors(rng)
    args = [t[k] for k in ("qkv", "q_weight", "k_weight", "positions", "slot_mapping",
                           "k_cache", "v_cache")]
    eager = [a.clone() for a in args]
    compiled = [a.clone() for a in args]
    want = _step(*eager)
    got = torch.compile(_step, fullgraph=True, backend="aot_eager")(*compiled)
    assert torch.equal(got, want)
    for a, b in zip(compiled, eager):  # the mutations happened, identically
        assert torch.equal(a, b)
    if hasattr(torch.compiler, "substitute_in_graph"):
        again = [a.clone() for a in args]
        torch.compile(_public_step, fullgraph=True, backend="aot_eager")(*again)
        assert torch.equal(again[5], eager[5])


def test_no_gradient_is_refused_clearly(rng):
    _, t = _tensors(rng)
    k_before = t["k_cache"].clone()
    wq = t["q_weight"].clone().requires_grad_()
    with pytest.raises(RuntimeError, match="for inference"):
        rt.fused_qknorm_rope_kv(t["qkv"], q_weight=wq, k_weight=t["k_weight"],
                                      positions=t["positions"], slot_mapping=t["slot_mapping"],
                                      k_cache=t["k_cache"], v_cache=t["v_cache"], **KW)
    config = rt.encode(**KW)
    with pytest.raises(RuntimeError, match="for inference"):  # the op itself, called directly
        torch.ops.ropelab.fused_qknorm_rope_kv(t["qkv"], wq, t["k_weight"], t["positions"],
                                               t["slot_mapping"], t["k_cache"], t["v_cache"],
                                               config)
    assert torch.equal(t["k_cache"], k_before)
    with torch.no_grad():  # fine without autograd
        rt.fused_qknorm_rope_kv(t["qkv"], q_weight=wq, k_weight=t["k_weight"],
                                      positions=t["positions"], slot_mapping=t["slot_mapping"],
                                      k_cache=t["k_cache"], v_cache=t["v_cache"], **KW)
    assert not torch.equal(t["k_cache"], k_before)


def _strided(t):
    """``t``'s values in every other column of a wider tensor (a slice of a wider projection),
    and that wider tensor."""
    wide = torch.full((t.shape[0], 2 * t.shape[1]), 7.0, dtype=t.dtype)
    view = wide[:, ::2]
    view.copy_(t)
    return view, wide


def _call(t, qkv, **kw):
    return rt.fused_qknorm_rope_kv(qkv, q_weight=t["q_weight"], k_weight=t["k_weight"],
                                   positions=t["positions"], slot_mapping=t["slot_mapping"],
                                   k_cache=t["k_cache"], v_cache=t["v_cache"], **KW, **kw)


def test_a_strided_qkv_is_taken_as_torch_takes_views(rng):
    # in place: the view gets the contiguous call's result, the wider tensor's other columns
    # and the caches stay as the contiguous call leaves them
    _, ref = _tensors(np.random.default_rng(0))
    _, t = _tensors(np.random.default_rng(0))
    view, wide = _strided(t["qkv"])
    assert _call(t, view) is view
    _call(ref, ref["qkv"])
    assert torch.equal(view, ref["qkv"]) and bool((wide[:, 1::2] == 7).all())
    for c in ("k_cache", "v_cache"):
        assert torch.equal(t[c], ref[c])
    # into a strided q_out, from a strided qkv that is only read
    _, t = _tensors(np.random.default_rng(0))
    view, _ = _strided(t["qkv"])
    before = view.clone()
    q_out, q_wide = _strided(torch.zeros(T, 2 * D, dtype=torch.bfloat16))
    assert _call(t, view, q_out=q_out) is q_out
    assert torch.equal(view, before) and bool((q_wide[:, 1::2] == 7).all())
    assert torch.equal(q_out, ref["qkv"][:, :2 * D])


def test_a_refused_strided_call_changes_nothing(rng):
    _, t = _tensors(rng)
    view, wide = _strided(t["qkv"])
    before = [wide.clone(), t["k_cache"].clone(), t["v_cache"].clone()]
    t["slot_mapping"] = torch.full_like(t["slot_mapping"], 10 ** 6)  # past the cache
    with pytest.raises(ropelab.RopeInputError, match="past the cache"):
        _call(t, view)
    for b, a in zip(before, (wide, t["k_cache"], t["v_cache"])):
        assert torch.equal(b, a)
    # a cache inside the strided view's memory: the contiguous copy would hide the overlap
    _, t = _tensors(rng)
    shared = torch.zeros(2 * T * 4 * D * 2 + 64, dtype=torch.bfloat16)
    view = shared[:T * 4 * D * 2].view(T, 2 * 4 * D)[:, ::2]
    t["k_cache"] = shared[-64:].view(1, 1, 1, D)
    t["slot_mapping"] = torch.tensor([0, -1, -1], dtype=t["slot_mapping"].dtype)
    snapshot = shared.clone()
    with pytest.raises(ropelab.RopeInputError, match="shares memory"):
        _call(t, view)
    assert torch.equal(shared, snapshot)


@pytest.mark.parametrize("into_q_out", [False, True], ids=["in_place", "q_out"])
def test_the_tensors_the_op_writes_have_their_versions_bumped(rng, into_q_out):
    _, t = _tensors(rng)
    q_out = torch.empty(T, 2 * D, dtype=torch.bfloat16) if into_q_out else None
    written = ([q_out] if into_q_out else [t["qkv"]]) + [t["k_cache"], t["v_cache"]]
    before = [w._version for w in written]
    _call(t, t["qkv"], **({"q_out": q_out} if into_q_out else {}))
    assert all(w._version > v for w, v in zip(written, before))
    # as after a native in-place op: a backward that saved the cache before the write fails
    # loudly instead of using the new values
    s = torch.tensor(2.0, requires_grad=True)
    y = (t["k_cache"] * s).sum()  # autograd saves k_cache for ds
    _call(t, t["qkv"], **({"q_out": q_out} if into_q_out else {}))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_a_cache_dtype_numpy_cannot_hold_is_refused_by_name(rng):
    _, t = _tensors(rng)
    t["k_cache"] = torch.zeros(t["k_cache"].shape, dtype=torch.float8_e5m2)
    with pytest.raises(ropelab.RopeInputError, match="k_cache has dtype torch.float8_e5m2"):
        _call(t, t["qkv"])
