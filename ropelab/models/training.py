"""A few optimizer steps of a model: the loss curve that the patched and the original Qwen3
must share.  The patched model's gradient goes through the fused op's backward kernel (issue
20; ``ropelab.torch_ops.fused_qknorm_rope`` works out of place when autograd needs its input).
"""

from __future__ import annotations

import torch

# Loss curves of the two models may differ by this much relative to the loss: the logits agree
# to a few float32 roundings of the original (ropelab.models.compare), and three small SGD
# steps amplify that by little.
CURVE_RTOL = 1e-4


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


__all__ = ["CURVE_RTOL", "curves_agree", "loss_curve"]
