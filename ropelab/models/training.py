"""A few optimizer steps of a model: the loss curve that the patched and the original Qwen3
must share, now that the fused op has a backward (issue 20).

:func:`fused_op_has_backward` tells whether this ropelab lets a gradient through the fused op;
where it does not, a training step of a patched model raises the op's RuntimeError, and the
tests and notebook 09 show that refusal instead of comparing curves.
"""

from __future__ import annotations

import torch

import ropelab.torch_ops as rt

# Loss curves of the two models may differ by this much relative to the loss: the logits agree
# to a few float32 roundings of the original (ropelab.models.compare), and three small SGD
# steps amplify that by little.
CURVE_RTOL = 1e-4


def fused_op_has_backward() -> bool:
    """Whether ``ropelab.torch_ops.fused_qknorm_rope`` lets a gradient through (one token,
    one q and one k head of 64 dims; on the simulator this runs one warp, if anything)."""
    weight = torch.ones(64, requires_grad=True)
    qkv = torch.ones(1, 2 * 64) * 1.0
    try:
        with torch.enable_grad():
            rt.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=0, head_dim=64,
                                 q_weight=weight, k_weight=weight,
                                 positions=torch.zeros(1, dtype=torch.int32))
    except RuntimeError as exc:
        if "no backward kernel yet" in str(exc) or "no gradient" in str(exc):
            return False
        raise
    return True


def loss_curve(model, input_ids: torch.Tensor, *, steps: int = 3, lr: float = 0.05) -> list[float]:
    """The language-model loss before each of ``steps`` plain SGD steps on ``input_ids``
    (labels = the inputs, as transformers shifts them): deterministic given the weights."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def curves_agree(patched: list[float], original: list[float], rtol: float = CURVE_RTOL) -> bool:
    return len(patched) == len(original) and all(
        abs(p - o) <= rtol * abs(o) for p, o in zip(patched, original))


__all__ = ["CURVE_RTOL", "curves_agree", "fused_op_has_backward", "loss_curve"]
