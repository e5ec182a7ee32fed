"""The fused op's gradient through PyTorch (CPU tensors: the host path on the simulator):
``ropelab.torch_ops.fused_qknorm_rope`` on tensors that require grad against torch autograd of
the float64 formula, in float32 and bfloat16, with a planted wiring error; qkv left as it was;
``torch.library.opcheck`` of both new ops; ``torch.compile(fullgraph=True)`` equal to eager
(with the ``aot_eager`` backend: dynamo and AOT autograd trace the ops, which is what this
checks, without inductor's C++ code generation, which took minutes on a GPU host)."""

import numpy as np
import pytest

from ropelab import scaling, tolerance

torch = pytest.importorskip("torch")
import ropelab.torch_ops as rt  # noqa: E402

from test_fused_backward import YARN, torch_forward  # noqa: E402

HEADS = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=64)


def _inputs(rng, dtype, tokens=3):
    width = 4 * 64
    qkv = torch.from_numpy(rng.standard_normal((tokens, width)).astype(np.float32) * 2).to(dtype)
    wq = torch.from_numpy(rng.uniform(-1.5, 1.5, 64).astype(np.float32)).to(dtype)
    wk = torch.from_numpy(rng.uniform(-1.5, 1.5, 64).astype(np.float32)).to(dtype)
    pos = torch.from_numpy(rng.integers(0, 40, tokens).astype(np.int32))
    grad = torch.from_numpy(rng.standard_normal((tokens, width)).astype(np.float32)).to(dtype)
    return qkv, wq, wk, pos, grad


def _want(qkv, wq, wk, pos, grad, *, rotary_dim=64, interleave=True, yarn=None):
    """Gradients by torch autograd of the float64 formula, on the stored (rounded) inputs."""
    freqs, att = scaling.resolve(scaling.as_fused_yarn(yarn), rotary_dim=rotary_dim, base=1e4)
    leaves = [t.double().requires_grad_() for t in (qkv, wq, wk)]
    y = torch_forward(*leaves, pos.double(), 2, 1, 1, 64, rotary_dim, interleave,
                      torch.tensor(freqs), att, 1e-6)
    y.backward(grad.double())
    return y.detach(), [t.grad for t in leaves]


def _gradient_errors(got, want, qkv, wq, wk, grad, storage):
    """Names of the gradients outside ropelab.tolerance.backward_atol (empty: all pass)."""
    x = qkv.double().reshape(3, 4, 64)[:, :3]
    r = (x.pow(2).mean(-1) + 1e-6).sqrt()
    dx_atol, dw_atol = tolerance.backward_atol(
        head_dim=64, dy_max=grad.double().abs().max().item(),
        n_max=(x / r[..., None]).abs().max().item(),
        w_max=max(wq.double().abs().max().item(), wk.double().abs().max().item()),
        inv_r_max=(1 / r).max().item(), dx_max=want[0].abs().max().item(), units=6,
        angle=40.0, storage=storage, fastmath=True, attention_factor=1.3)
    # weight gradients come back in the weights' dtype: their rounding is part of the budget
    unit = tolerance.STORAGE_UNIT[storage]
    bad = []
    for name, g, w, atol in zip(("qkv", "q_weight", "k_weight"), got, want,
                                (dx_atol, dw_atol, dw_atol)):
        budget = atol + (unit * w.abs().max().item() if name != "qkv" else 0.0)
        if g is None or not bool(((g.double() - w).abs() <= budget).all()):
            bad.append(name)
    return bad


@pytest.mark.parametrize("dtype,storage", [(torch.float32, "float32"),
                                           (torch.bfloat16, "bfloat16")])
@pytest.mark.parametrize("interleave,rotary_dim,yarn", [(True, 64, None), (False, 32, YARN)])
def test_gradients_match_torch_autograd_of_the_float64_formula(rng, dtype, storage, interleave,
                                                               rotary_dim, yarn):
    qkv, wq, wk, pos, grad = _inputs(rng, dtype)
    before = qkv.clone()
    leaves = [t.clone().requires_grad_() for t in (qkv, wq, wk)]
    y = rt.fused_qknorm_rope(leaves[0], q_weight=leaves[1], k_weight=leaves[2], positions=pos,
                             rotary_dim=rotary_dim, interleave=interleave, yarn=yarn, **HEADS)
    assert y.grad_fn is not None and y.dtype == dtype
    assert torch.equal(leaves[0].detach(), before)  # out of place: qkv is the saved input
    y.backward(grad)
    want_y, want = _want(qkv, wq, wk, pos, grad, rotary_dim=rotary_dim, interleave=interleave,
                         yarn=yarn)
    assert (y.double() - want_y).abs().max() < 0.05  # the forward is the fused kernel's
    got = [t.grad for t in leaves]
    assert all(g.dtype == dtype for g in got)
    assert _gradient_errors(got, want, qkv, wq, wk, grad, storage) == []


def test_a_planted_wiring_error_is_caught(rng, monkeypatch):
    """q and k weight gradients swapped in the backward op: the comparison names both."""
    public = rt._public_backward

    def swapped(**kwargs):
        dqkv, dq, dk = public(**kwargs)
        return dqkv, dk, dq

    monkeypatch.setattr(rt, "_public_backward", swapped)
    qkv, wq, wk, pos, grad = _inputs(rng, torch.float32)
    leaves = [t.clone().requires_grad_() for t in (qkv, wq, wk)]
    rt.fused_qknorm_rope(leaves[0], q_weight=leaves[1], k_weight=leaves[2], positions=pos,
                         **HEADS).backward(grad)
    _, want = _want(qkv, wq, wk, pos, grad)
    got = [t.grad for t in leaves]
    assert _gradient_errors(got, want, qkv, wq, wk, grad, "float32") == ["q_weight", "k_weight"]


def test_only_the_weights_may_require_grad(rng):
    qkv, wq, wk, pos, grad = _inputs(rng, torch.float32)
    w = wq.clone().requires_grad_()
    y = rt.fused_qknorm_rope(qkv, q_weight=w, k_weight=wk, positions=pos, **HEADS)
    y.backward(grad)
    _, want = _want(qkv, wq, wk, pos, grad)
    assert torch.allclose(w.grad.double(), want[1], atol=1e-3)
    assert qkv.grad is None


def test_opcheck_of_the_functional_and_backward_ops(rng):
    qkv, wq, wk, pos, grad = _inputs(rng, torch.float32)
    config = rt.encode(**HEADS)
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope_functional.default,
                          (qkv, wq, wk, pos, config),
                          test_utils=("test_schema", "test_faketensor",
                                      "test_aot_dispatch_dynamic"))
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope_backward.default,
                          (qkv, grad, wq, wk, pos, config),
                          test_utils=("test_schema", "test_faketensor"))


def _step(qkv, wq, wk, pos):
    y = rt.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, **HEADS)
    return (y * y).sum()


def test_compiled_forward_and_backward_equal_eager(rng):
    qkv, wq, wk, pos, _ = _inputs(rng, torch.float32)
    grads = []
    for fn in (_step, torch.compile(_step, fullgraph=True, backend="aot_eager")):
        leaves = [t.clone().requires_grad_() for t in (qkv, wq, wk)]
        fn(*leaves, pos).backward()
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert grads[0][1].abs().max() > 0
