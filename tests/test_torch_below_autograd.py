"""The Autograd kernels of the non-mutating ops hand a call that records no gradient straight to
the op's kernel function on plain tensors (one boxed call into Python instead of two), and
through the dispatcher whenever something below Autograd could see the difference: a
``TorchDispatchMode``, fake tensors.  Both routes give the same result."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import ropelab.torch_ops as rt  # noqa: E402
from ropelab.torch_ops import fused_op, rope_op  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

HEADS = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64)


class _Passing(TorchDispatchMode):
    """A mode that only watches: every call runs as it would."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _fused_inputs():
    rng = np.random.default_rng(3)
    qkv = torch.from_numpy(rng.standard_normal((2, 3 * 64)).astype(np.float32))
    grad = torch.from_numpy(rng.standard_normal((2, 3 * 64)).astype(np.float32))
    w = torch.ones(64)
    pos = torch.tensor([0, 5], dtype=torch.int32)
    return qkv, grad, w, pos


def _counting(monkeypatch, module, name):
    """Replace ``module.name`` (the kernel function an Autograd kernel may call at once) by a
    wrapper that counts its calls; the op's registered kernel, reached through the dispatcher,
    stays the original."""
    original, calls = getattr(module, name), []

    def counted(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


def _three_ops(qkv, grad, w, pos):
    config = rt.encode(**HEADS)
    ops = torch.ops.ropelab
    backward = ops.fused_qknorm_rope_backward.default(qkv, grad, w, w, pos, config)
    functional = ops.fused_qknorm_rope_functional.default(qkv, w, w, pos, config)
    rotated = ops.rope.default(qkv[:, :64].contiguous(), pos, rt.encode())
    return backward, functional, rotated


def test_plain_tensors_skip_the_redispatch_and_a_dispatch_mode_does_not(monkeypatch):
    qkv, grad, w, pos = _fused_inputs()
    counts = [_counting(monkeypatch, fused_op, "_fused_backward_kernel"),
              _counting(monkeypatch, fused_op, "_fused_functional_kernel"),
              _counting(monkeypatch, rope_op, "_rope_kernel")]
    direct = _three_ops(qkv, grad, w, pos)
    assert [len(c) for c in counts] == [1, 1, 1]  # each op ran its kernel function at once
    with _Passing():
        watched = _three_ops(qkv, grad, w, pos)
    assert [len(c) for c in counts] == [1, 1, 1]  # the mode saw the calls: the dispatcher ran them
    for a, b in zip(torch.utils._pytree.tree_leaves(direct),
                    torch.utils._pytree.tree_leaves(watched)):
        assert torch.equal(a, b)


def test_fake_tensors_still_reach_the_fake_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        qkv, grad, w, pos = (mode.from_tensor(t) for t in _fused_inputs())
        dqkv, dq, dk = torch.ops.ropelab.fused_qknorm_rope_backward.default(
            qkv, grad, w, w, pos, rt.encode(**HEADS))
    assert dqkv.shape == qkv.shape and dq.shape == dk.shape == (64,)
