"""How close a patched Qwen3 must stay to the original, and the checks that say whether it did.

Two levels, because only one of them has an error model:

* **One attention layer's q and k** (:func:`check_layer_qk`).  Given the same packed qkv, the
  fused op's output is compared with the float64 formula (``ropelab.reference``) under
  ``ropelab.tolerance.fused_atol``: the norm's float32 rounding, the rotation's budget at the
  largest angle (largest position times the largest frequency, 1), fast-math included.
  transformers' own float32 path (``q_norm`` then ``apply_rotary_pos_emb``) is measured against
  the same float64 truth, so the two float32 implementations can be compared fairly.
* **The logits** (:func:`logits_tolerance`).  Twenty-odd matrix products, softmaxes and norms lie
  between q/k and the logits, and ropelab has no error model for those.  The bar is the
  original model's own float32 rounding: the float64 run of the unmodified model is the truth,
  ``floor = max|original32 - original64|``, and the patched model's logits must lie within
  ``LOGITS_FACTOR * floor`` of the original's.  A float32 model that computes the same function
  lands within about ``2 * floor`` (each side's rounding, at most one floor each); a wrong
  layout or a skipped norm moves the logits by orders of magnitude more (the tests plant both).

torch is imported here; nothing in ``import ropelab`` imports this module.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .. import reference
from ..tolerance import fused_atol, max_angle

# The patched logits may differ from the original's by this many times the original model's
# own float32 error (two independent float32 roundings of one function, and slack for the
# error's spread between runs of different code).
LOGITS_FACTOR = 4.0


@dataclasses.dataclass(frozen=True)
class QKCheck:
    """One layer's q/k after the fused op (``ropelab``) and after transformers' code, each
    against the float64 formula; ``atol`` is ropelab's budget from its error model."""

    ropelab_error: float
    transformers_error: float
    atol: float

    @property
    def passed(self) -> bool:
        return self.ropelab_error <= self.atol

    @property
    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"{verdict}: q/k of the fused op within the float32 error model's bound of float64"


@dataclasses.dataclass(frozen=True)
class LogitsCheck:
    difference: float  # max |patched - original|, both float32
    floor: float  # max |original float32 - original float64|
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.difference <= self.tolerance

    @property
    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (f"{verdict}: patched logits within {LOGITS_FACTOR:g}x the original model's own "
                f"float32 error of the original's")


def logits_tolerance(original32: torch.Tensor, original64: torch.Tensor) -> tuple[float, float]:
    """(floor, tolerance): the original's float32 error and the bar for the patched model."""
    floor = (original32.double() - original64).abs().max().item()
    return floor, LOGITS_FACTOR * floor


def check_logits(patched: torch.Tensor, original32: torch.Tensor,
                 original64: torch.Tensor) -> LogitsCheck:
    floor, tol = logits_tolerance(original32, original64)
    diff = (patched.double() - original32.double()).abs().max().item()
    return LogitsCheck(diff, floor, tol)


def _transformers_qk(attn_original, qkv: torch.Tensor, positions: torch.Tensor, rotary_emb):
    """q, k of transformers' code (q_norm/k_norm, apply_rotary_pos_emb) from a packed qkv
    ``[tokens, width]``, as ``[tokens, heads * head_dim]``."""
    from transformers.models.qwen3 import modeling_qwen3

    d = attn_original.head_dim
    hq, hk = attn_original.config.num_attention_heads, attn_original.config.num_key_value_heads
    tokens = qkv.shape[0]
    q = attn_original.q_norm(qkv[:, :hq * d].reshape(1, tokens, hq, d)).transpose(1, 2)
    k = attn_original.k_norm(qkv[:, hq * d:(hq + hk) * d].reshape(1, tokens, hk, d)).transpose(1, 2)
    cos, sin = rotary_emb(qkv, positions.long()[None, :])
    q, k = modeling_qwen3.apply_rotary_pos_emb(q, k, cos, sin)
    return (q.transpose(1, 2).reshape(tokens, -1), k.transpose(1, 2).reshape(tokens, -1))


@torch.no_grad()
def check_layer_qk(attn_patched, attn_original, rotary_emb, hidden_states: torch.Tensor,
                   positions: torch.Tensor) -> QKCheck:
    """q/k of one layer, patched and original, from ``hidden_states`` ``[tokens, hidden]`` at
    ``positions`` ``[tokens]``; both start from the same float32 packed qkv."""
    import ropelab.torch_ops as rt

    d = attn_patched.head_dim
    hq, hk = attn_patched.config.num_attention_heads, attn_patched.config.num_key_value_heads
    nqk = (hq + hk) * d
    qkv = attn_patched.qkv_proj(hidden_states)
    wq, wk = attn_patched.q_norm.weight, attn_patched.k_norm.weight
    eps = attn_patched.q_norm.variance_epsilon
    options = dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hk, head_dim=d, eps=eps,
                   base=attn_patched.ropelab_theta)
    # The truth is Qwen3's formula (half-split pairs), whatever layout the patch was given.
    want = reference.fused_qknorm_rope(qkv.double().numpy(), q_weight=wq.double().numpy(),
                                       k_weight=wk.double().numpy(), positions=positions.numpy(),
                                       interleave=False, **options)[:, :nqk]
    got = qkv.clone()
    rt.fused_qknorm_rope(got, q_weight=wq, k_weight=wk, positions=positions.to(torch.int32),
                         interleave=attn_patched.ropelab_interleave, **options)
    theirs = torch.cat(_transformers_qk(attn_original, qkv, positions, rotary_emb), dim=1)
    # The budget's inputs, from the float64 truth: the largest normalized value (the norm output
    # before rotation is bounded by the weight times sqrt(head_dim)) and the largest angle.
    normed_max = float(np.abs(np.concatenate([wq.double().numpy(), wk.double().numpy()])).max()
                       * np.sqrt(d))
    out_max = float(np.abs(want).max())
    angle = max_angle(positions.numpy(), np.ones(1))
    atol = fused_atol(normed_max, out_max, angle, "float32", fastmath=True)
    return QKCheck(float(np.abs(got[:, :nqk].double().numpy() - want).max()),
                   float(np.abs(theirs.double().numpy() - want).max()), atol)


__all__ = ["LOGITS_FACTOR", "LogitsCheck", "QKCheck", "check_layer_qk", "check_logits",
           "logits_tolerance"]
