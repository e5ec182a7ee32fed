"""The fused op's gradient through PyTorch (CPU tensors: the host path on the simulator):
``ropelab.torch_ops.fused_qknorm_rope`` on tensors that require grad against torch autograd of
the float64 formula, in float32 and bfloat16, with a planted wiring error; qkv left as it was;
``torch.library.opcheck`` of both new ops; ``torch.compile(fullgraph=True)`` equal to eager
(with the ``aot_eager`` backend: dynamo and AOT autograd trace the ops, which is what this
checks, without inductor's C++ code generation, which took minutes on a GPU host).  The same
with a user ``cos_sin_cache`` (FLUX and M-RoPE tables, judged by their float64 angles, with a
planted sin-negated cache), and a cache that requires grad refused."""

import numpy as np
import pytest

import ropelab
from ropelab import scaling, tables, tolerance

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
    public = rt.fused_op._public_backward

    def swapped(**kwargs):
        dqkv, dq, dk = public(**kwargs)
        return dqkv, dk, dq

    monkeypatch.setattr(rt.fused_op, "_public_backward", swapped)
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


# ---- a user cos_sin_cache ([max_pos, rotary_dim], cos half then sin half) through the ops -------
# The cache's angles are known in float64 (FLUX's 3-axis ids, interleaved pairs; Qwen2-VL's
# M-RoPE, half-split pairs); the judge rotates by them, independently of ropelab.tables.

FLUX_AXES = (8, 28, 28)  # rotary_dim 64


def _cache_angles(kind):
    """(float32 cache [4, 64] from ropelab.tables, float64 angles [4, 32], interleave)."""
    if kind == "flux":
        ids = np.array([[0, 0, 0], [0, 1, 2], [0, 3, 1], [1, 2, 3]])
        freqs = np.concatenate([10000.0 ** (-np.arange(0, d, 2) / d) for d in FLUX_AXES])
        axis = np.repeat(np.arange(3), [d // 2 for d in FLUX_AXES])
        return tables.flux_cache(ids, axes_dim=FLUX_AXES), ids[:, axis] * freqs, True
    section = (8, 12, 12)  # M-RoPE: pairs per axis (temporal, height, width)
    mpos = np.array([[0, 1, 2, 3], [0, 2, 1, 3], [0, 3, 3, 1]])
    axis = np.repeat(np.arange(3), section)
    angles = mpos[axis].T * 10000.0 ** (-np.arange(0, 64, 2) / 64)
    return tables.mrope_cache(mpos, 64, section), angles, False


def _want_from_angles(qkv, wq, wk, ang, grad, interleave, eps=1e-6):
    """torch autograd of the fused formula in float64, rotating token t by angles ``ang[t]``."""
    x, w_q, w_k = (t.double().requires_grad_() for t in (qkv, wq, wk))
    heads = x.reshape(x.shape[0], 4, 64)
    qk = heads[:, :3]
    z = qk * torch.rsqrt((qk * qk).mean(-1, keepdim=True) + eps) * torch.cat(
        [w_q.expand(2, 64), w_k.expand(1, 64)])
    c, s = torch.cos(ang)[:, None], torch.sin(ang)[:, None]
    a, b = (z[..., 0::2], z[..., 1::2]) if interleave else (z[..., :32], z[..., 32:])
    rot = torch.stack([a * c - b * s, a * s + b * c], -1).flatten(-2) if interleave else \
        torch.cat([a * c - b * s, a * s + b * c], -1)
    y = torch.cat([rot, heads[:, 3:]], 1).reshape(x.shape)
    y.backward(grad.double())
    return y.detach(), [t.grad for t in (x, w_q, w_k)]


CACHE_POS = np.array([3, 0, 2], np.int32)  # rows of the 4-row table, not the identity


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_forward_with_a_user_cache_equals_the_public_call_bit_for_bit(rng, dtype):
    qkv, wq, wk, _, _ = _inputs(rng, dtype)
    table, _, interleave = _cache_angles("flux")
    pos, cache = torch.from_numpy(CACHE_POS), torch.from_numpy(table)
    host = [(t.view(torch.uint16) if dtype == torch.bfloat16 else t).numpy().copy()
            for t in (qkv, wq, wk)]
    want = ropelab.fused_qknorm_rope(host[0], q_weight=host[1], k_weight=host[2],
                                     positions=CACHE_POS, interleave=interleave,
                                     cos_sin_cache=table, **HEADS)
    bits = (lambda t: (t.view(torch.uint16) if dtype == torch.bfloat16 else t).detach().numpy())
    in_place = qkv.clone()
    assert rt.fused_qknorm_rope(in_place, q_weight=wq, k_weight=wk, positions=pos,
                                interleave=interleave, cos_sin_cache=cache, **HEADS) is in_place
    np.testing.assert_array_equal(bits(in_place), want)
    leaves = [t.clone().requires_grad_() for t in (qkv, wq, wk)]
    y = rt.fused_qknorm_rope(leaves[0], q_weight=leaves[1], k_weight=leaves[2], positions=pos,
                             interleave=interleave, cos_sin_cache=cache, **HEADS)
    assert y.grad_fn is not None and torch.equal(leaves[0].detach(), qkv)
    np.testing.assert_array_equal(bits(y), want)


@pytest.mark.parametrize("kind,plant", [("flux", False), ("mrope", False), ("flux", True)])
def test_gradients_with_a_user_cache_match_float64_autograd_by_its_angles(rng, kind, plant):
    """plant: the cache's sin half negated (every pair turns the wrong way) must fail the check."""
    qkv, wq, wk, _, grad = _inputs(rng, torch.float32)
    table, angles, interleave = _cache_angles(kind)
    if plant:
        table = np.concatenate([table[:, :32], -table[:, 32:]], 1)
    leaves = [t.clone().requires_grad_() for t in (qkv, wq, wk)]
    y = rt.fused_qknorm_rope(leaves[0], q_weight=leaves[1], k_weight=leaves[2],
                             positions=torch.from_numpy(CACHE_POS), interleave=interleave,
                             cos_sin_cache=torch.from_numpy(table), **HEADS)
    y.backward(grad)
    want_y, want = _want_from_angles(qkv, wq, wk, torch.from_numpy(angles[CACHE_POS]), grad,
                                     interleave)
    bad = _gradient_errors([t.grad for t in leaves], want, qkv, wq, wk, grad, "float32")
    if plant:
        assert (y.double() - want_y).abs().max() > 0.5 and "qkv" in bad
    else:
        assert (y.double() - want_y).abs().max() < 1e-4
        assert bad == []


def test_a_cache_that_requires_grad_is_refused_before_any_kernel_runs(rng, launches):
    qkv, wq, wk, pos, _ = _inputs(rng, torch.float32)
    before = qkv.clone()
    cache = torch.from_numpy(_cache_angles("flux")[0]).requires_grad_()
    kw = dict(positions=torch.from_numpy(CACHE_POS), cos_sin_cache=cache, **HEADS)
    with pytest.raises(ropelab.RopeInputError, match="cos_sin_cache requires grad"):
        rt.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, **kw)  # would run in place
    with pytest.raises(ropelab.RopeInputError, match="cos_sin_cache requires grad"):
        rt.fused_qknorm_rope(qkv.clone().requires_grad_(), q_weight=wq, k_weight=wk, **kw)
    config = rt.encode(**HEADS)
    with pytest.raises(ropelab.RopeInputError, match="cos_sin_cache requires grad"):
        torch.ops.ropelab.fused_qknorm_rope(qkv, wq, wk, kw["positions"], config, cache)
    assert launches == [] and torch.equal(qkv, before)
    # The functional op called directly is refused when autograd sets it up (after its forward:
    # it writes nothing of the caller's, and no gradient is lost).
    with pytest.raises(ropelab.RopeInputError, match="cos_sin_cache requires grad"):
        torch.ops.ropelab.fused_qknorm_rope_functional(qkv, wq, wk, kw["positions"], config,
                                                       cache)
    assert torch.equal(qkv, before)


def test_opcheck_of_the_fused_ops_with_a_cache(rng):
    qkv, wq, wk, _, grad = _inputs(rng, torch.float32)
    pos, cache = torch.from_numpy(CACHE_POS), torch.from_numpy(_cache_angles("flux")[0])
    config = rt.encode(**HEADS)
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope.default,
                          (qkv, wq, wk, pos, config, cache))
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope_functional.default,
                          (qkv, wq, wk, pos, config, cache),
                          test_utils=("test_schema", "test_faketensor",
                                      "test_aot_dispatch_dynamic"))
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope_backward.default,
                          (qkv, grad, wq, wk, pos, config, cache),
                          test_utils=("test_schema", "test_faketensor"))


def _cache_step(qkv, wq, wk, pos, cache):
    y = rt.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, cos_sin_cache=cache,
                             **HEADS)
    return (y * y).sum()


def _public_cache_step(qkv, wq, wk, pos, cache):
    ropelab.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, cos_sin_cache=cache,
                              **HEADS)  # dynamo substitutes the op (in place)
    return qkv * 1.0


def test_compiled_forward_and_backward_with_a_cache_equal_eager(rng):
    qkv, wq, wk, _, _ = _inputs(rng, torch.float32)
    pos, cache = torch.from_numpy(CACHE_POS), torch.from_numpy(_cache_angles("flux")[0])
    grads = []
    for fn in (_cache_step, torch.compile(_cache_step, fullgraph=True, backend="aot_eager")):
        leaves = [t.clone().requires_grad_() for t in (qkv, wq, wk)]
        fn(*leaves, pos, cache).backward()
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    assert grads[0][1].abs().max() > 0
    if not hasattr(torch.compiler, "substitute_in_graph"):
        return  # torch < 2.5: the public function is not substituted
    eager = rt.fused_qknorm_rope(qkv.clone(), q_weight=wq, k_weight=wk, positions=pos,
                                 cos_sin_cache=cache, **HEADS)
    compiled = torch.compile(_public_cache_step, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(qkv.clone(), wq, wk, pos, cache), eager, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
def test_the_functional_forward_is_one_out_of_place_launch(rng, dtype, interleave, monkeypatch):
    # Under autograd the op returns a new tensor written by the out-of-place kernel in one
    # launch (no copy of qkv first): the in-place result bit for bit, V copied, qkv unchanged;
    # a strided qkv is made contiguous first and gives the same bits.
    from ropelab.ops import host_route

    kernels = []
    real = host_route.launch
    monkeypatch.setattr(host_route, "launch", lambda plan, arrays: (
        kernels.append(plan.kernel.__qualname__), real(plan, arrays)))
    qkv, wq, wk, pos, _ = _inputs(rng, dtype)
    kw = dict(positions=pos, interleave=interleave, **HEADS)
    want = qkv.clone()
    rt.fused_qknorm_rope(want, q_weight=wq, k_weight=wk, **kw)
    assert len(kernels) == 1 and not kernels[0].endswith("_out128")
    bits = (lambda t: (t.view(torch.uint16) if dtype == torch.bfloat16 else t).detach().numpy())
    for source in (qkv, qkv.t().contiguous().t()):  # C-contiguous, then column-major
        leaf = source.clone().requires_grad_() if source.is_contiguous() else \
            source.detach().requires_grad_()
        kernels.clear()
        y = rt.fused_qknorm_rope(leaf, q_weight=wq.clone().requires_grad_(), k_weight=wk, **kw)
        assert kernels == [kernels[0]] and kernels[0].endswith("_out128"), kernels
        assert y.grad_fn is not None and y.is_contiguous()
        np.testing.assert_array_equal(bits(y), bits(want))
        np.testing.assert_array_equal(bits(leaf), bits(qkv))


def test_the_traced_public_call_takes_out_qkv_and_refuses_a_separate_out(rng):
    # What torch.compile runs for ropelab.fused_qknorm_rope: out=qkv is the in-place call; a
    # separate out is refused with a clear error (the traced form has no out-of-place op).
    from ropelab.torch_ops.fused_op import _fused_in_place

    qkv, wq, wk, pos, _ = _inputs(rng, torch.float32)
    want = qkv.clone()
    rt.fused_qknorm_rope(want, q_weight=wq, k_weight=wk, positions=pos, **HEADS)
    got = qkv.clone()
    assert _fused_in_place(got, q_weight=wq, k_weight=wk, positions=pos, out=got, **HEADS) is got
    assert torch.equal(got, want)
    with pytest.raises(ropelab.RopeInputError, match="out=\\) is not supported"):
        _fused_in_place(qkv, q_weight=wq, k_weight=wk, positions=pos,
                        out=torch.empty_like(qkv), **HEADS)
