"""``fused_qknorm_rope_backward(..., weight_grad_dtype="storage")``: the reduction writes the
weight gradients in the weights' own dtype, each float32 sum rounded once to nearest even, so
autograd (which wants that dtype) needs no cast launch after the backward.

Truth: the same call with the default float32 gradients, rounded by NumPy (float16) or by
ropelab's host bfloat16 rounding (round to nearest even, checked against torch elsewhere); a
truncating store would fail it (the data is checked to tell the two apart).  Also: dx is the
same, the torch op takes this route and returns the weights' dtype, and the refusals."""

import numpy as np
import pytest

from ropelab import RopeInputError, bf16
from ropelab.ops.fused_backward import fused_qknorm_rope_backward as backward

HEADS = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=64)


def _case(rng, storage, tokens=3):
    d = HEADS["head_dim"]
    x = (rng.standard_normal((tokens, 4 * d)) * 2).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w = rng.uniform(-1.5, 1.5, (2, d)).astype(np.float32)
    arrays = [x, g, w[0], w[1]]
    if storage == "float16":
        arrays = [a.astype(np.float16) for a in arrays]
    elif storage == "bfloat16":
        arrays = [bf16.from_float32(a) for a in arrays]
    return arrays, rng.integers(0, 3000, tokens).astype(np.int32)


def _rounded(sums: np.ndarray, storage: str) -> np.ndarray:
    """float32 sums as the weights' storage holds them, rounded to nearest even."""
    return bf16.from_float32(sums) if storage == "bfloat16" else sums.astype(np.float16)


def _truncated(sums: np.ndarray, storage: str) -> np.ndarray:
    """The wrong store: the high bits kept, no rounding (bfloat16), or toward zero (float16)."""
    if storage == "bfloat16":
        return (sums.view(np.uint32) >> 16).astype(np.uint16)
    return np.where(np.abs(sums.astype(np.float16).astype(np.float32)) > np.abs(sums),
                    np.nextafter(sums.astype(np.float16), np.float16(0)),
                    sums.astype(np.float16))


@pytest.mark.parametrize("storage", ["bfloat16", "float16"])
def test_weight_gradients_are_the_float32_sums_rounded_once(rng, storage):
    (x, g, wq, wk), pos = _case(rng, storage)
    kw = dict(q_weight=wq, k_weight=wk, positions=pos, **HEADS)
    dx32, dq32, dk32 = backward(x, g, **kw)
    dx, dq, dk = backward(x, g, weight_grad_dtype="storage", **kw)
    assert dq.dtype == wq.dtype and dk.dtype == wk.dtype and dq.shape == dq32.shape
    np.testing.assert_array_equal(dx, dx32)  # the main kernel is the same build
    want = _rounded(np.concatenate([dq32, dk32]), storage)
    got = np.concatenate([dq, dk])
    assert got.tobytes() == want.tobytes()
    # the check can fail: on this data a store that does not round gives other bits
    assert _truncated(np.concatenate([dq32, dk32]), storage).tobytes() != want.tobytes()


def test_float32_storage_is_unchanged_by_the_option(rng):
    (x, g, wq, wk), pos = _case(rng, "float32")
    kw = dict(q_weight=wq, k_weight=wk, positions=pos, **HEADS)
    for a, b in zip(backward(x, g, **kw), backward(x, g, weight_grad_dtype="storage", **kw)):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_no_tokens_gives_zero_gradients_in_the_weights_dtype():
    w = bf16.from_float32(np.ones(64, np.float32))
    x = np.zeros((0, 4 * 64), np.uint16)
    dx, dq, dk = backward(x, x.copy(), q_weight=w, k_weight=w, positions=np.zeros(0, np.int32),
                          weight_grad_dtype="storage", **HEADS)
    assert dx.shape == x.shape and dq.dtype == np.uint16 and not dq.any() and not dk.any()


@pytest.mark.parametrize("options, match", [
    (dict(weight_grad_dtype="bfloat16"), "weight_grad_dtype must be one of"),
    (dict(weight_grad_dtype="storage", dw="atomic"), "needs dw='two_stage'"),
])
def test_bad_options_are_refused_before_anything_runs(rng, options, match):
    (x, g, wq, wk), pos = _case(rng, "bfloat16")
    before = [a.copy() for a in (x, g, wq, wk)]
    with pytest.raises(RopeInputError, match=match):
        backward(x, g, q_weight=wq, k_weight=wk, positions=pos, **options, **HEADS)
    for a, b in zip((x, g, wq, wk), before):
        np.testing.assert_array_equal(a, b)


def test_the_torch_backward_op_returns_the_weights_dtype_without_casts(rng, monkeypatch):
    torch = pytest.importorskip("torch")
    import ropelab.torch_ops as rt

    (x, g, wq, wk), pos = _case(rng, "bfloat16")
    qkv = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).requires_grad_()
    wqt = torch.from_numpy(wq.view(np.int16)).view(torch.bfloat16).requires_grad_()
    wkt = torch.from_numpy(wk.view(np.int16)).view(torch.bfloat16).requires_grad_()
    casts = []
    real = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: casts.append(a) or real(
        self, *a, **k))
    y = rt.fused_qknorm_rope(qkv, q_weight=wqt, k_weight=wkt,
                             positions=torch.from_numpy(pos), **HEADS)
    y.backward(torch.from_numpy(g.view(np.int16)).view(torch.bfloat16))
    assert wqt.grad.dtype == torch.bfloat16 and wkt.grad.dtype == torch.bfloat16
    assert casts == []
    _, dq32, _ = backward(x, g, q_weight=wq, k_weight=wk, positions=pos, **HEADS)
    assert wqt.grad.view(torch.int16).numpy().view(np.uint16).tobytes() == \
        bf16.from_float32(dq32).tobytes()
