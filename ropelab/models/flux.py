"""FLUX-style attention through ropelab: QK-RMSNorm, then RoPE over 3-axis (text, row, column) ids.

FLUX's transformer (diffusers' ``FluxTransformer2DModel``) normalizes every q and k head with an
RMSNorm, then rotates it with a RoPE that has no single position: each token carries three ids
(``0`` for text tokens; for image tokens ``(0, row, column)`` of its latent patch), the head's
128 dims are split by ``axes_dim = (16, 56, 56)``, and the pairs of each part turn by that
axis's id times ``theta ** (-2 j / axes_dim[i])`` (``FluxPosEmbed``; interleaved pairs,
``apply_rotary_emb`` with ``use_real_unbind_dim=-1``).  No ``base`` and ``position`` describe
that, so the angles come from a user cos/sin table: ``ropelab.tables.flux_cache(ids)`` gives one
float32 row per token (cos half, then sin half, computed in float64), and the fused op reads row
``positions[t] = t`` for token ``t``.

The float64 check composes ``ropelab.reference``: the fused formula at position 0 (the norm
alone), then FLUX's rotation by ``reference.flux_cos_sin``.
"""

from __future__ import annotations

import numpy as np

from .. import reference, tables
from ..ops.fused import fused_qknorm_rope
from ..tolerance import fused_atol

AXES_DIM = (16, 56, 56)  # FLUX.1's split of a 128-dim head: text/time, rows, columns
THETA = 10000.0


def flux_ids(text_tokens: int, rows: int, columns: int) -> np.ndarray:
    """FLUX's ids ``[text_tokens + rows * columns, 3]``: zeros for the text tokens, then
    ``(0, row, column)`` for the image patches in row-major order (diffusers'
    ``_prepare_latent_image_ids`` and ``txt_ids``)."""
    text = np.zeros((text_tokens, 3), np.int64)
    r, c = np.meshgrid(np.arange(rows), np.arange(columns), indexing="ij")
    image = np.stack([np.zeros(rows * columns, np.int64), r.ravel(), c.ravel()], axis=1)
    return np.concatenate([text, image])


# ex: begin flux_fused_call
def fused_flux_qk(qkv: np.ndarray, *, heads: int, head_dim: int, q_weight, k_weight,
                  ids: np.ndarray, eps: float = 1e-6, axes_dim=AXES_DIM, theta: float = THETA):
    """RMSNorm + FLUX RoPE of every q and k head of ``qkv`` ``[tokens, 3 * heads * head_dim]``
    (rows ``[q | k | v]``), in place, by one fused call reading a per-token cos/sin table."""
    table = tables.flux_cache(ids, axes_dim=axes_dim, theta=theta)  # [tokens, head_dim]
    positions = np.arange(len(ids), dtype=np.int32)  # token t reads row t of the table
    return fused_qknorm_rope(qkv, num_heads_q=heads, num_heads_k=heads, num_heads_v=heads,
                             head_dim=head_dim, q_weight=q_weight, k_weight=k_weight,
                             positions=positions, eps=eps, interleave=True, cos_sin_cache=table)
# ex: end flux_fused_call


def rotate_pairs(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """FLUX's rotation of interleaved pairs: ``x * cos + rot(x) * sin`` with
    ``rot((a, b)) = (-b, a)`` per pair; ``cos``/``sin`` ``[tokens, head_dim]`` broadcast over
    the heads of ``x`` ``[tokens, heads, head_dim]``."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    rotated = np.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def reference_normed_qk(qkv, *, heads: int, head_dim: int, q_weight, k_weight,
                        eps: float = 1e-6) -> np.ndarray:
    """float64 q and k ``[tokens, 2 * heads * head_dim]`` after the RMSNorm alone (the fused
    formula at position 0, where nothing turns)."""
    tokens = qkv.shape[0]
    normed = reference.fused_qknorm_rope(
        np.asarray(qkv, np.float64), num_heads_q=heads, num_heads_k=heads, num_heads_v=heads,
        head_dim=head_dim, q_weight=np.asarray(q_weight, np.float64),
        k_weight=np.asarray(k_weight, np.float64), positions=np.zeros(tokens, np.int64), eps=eps)
    return normed[:, :2 * heads * head_dim]


def reference_flux_qk(qkv, *, heads: int, head_dim: int, q_weight, k_weight, ids,
                      eps: float = 1e-6, axes_dim=AXES_DIM, theta: float = THETA):
    """float64 q and k ``[tokens, 2 * heads * head_dim]`` after FLUX's QK-RMSNorm and RoPE."""
    qk = reference_normed_qk(qkv, heads=heads, head_dim=head_dim, q_weight=q_weight,
                             k_weight=k_weight, eps=eps)
    qk = qk.reshape(qk.shape[0], 2 * heads, head_dim)
    cos, sin = reference.flux_cos_sin(ids, axes_dim=axes_dim, theta=theta)
    return rotate_pairs(qk, cos, sin).reshape(qk.shape[0], -1)


def atol(expected_qk: np.ndarray, q_weight, k_weight, head_dim: int) -> float:
    """ropelab's float32 budget for the FLUX call: the norm's rounding plus the cache mode's
    rotation (cos/sin rounded once on the host, no angle formed on the device), from
    ``ropelab.tolerance.fused_atol``."""
    weights = np.abs(np.concatenate([np.asarray(q_weight, np.float64),
                                     np.asarray(k_weight, np.float64)]))
    normed_max = float(weights.max() * np.sqrt(head_dim))
    return fused_atol(normed_max, float(np.abs(expected_qk).max()), 0.0, "float32",
                      fastmath=True, cache=True)


def diffusers_flux_qk(normed_qk: np.ndarray, ids: np.ndarray, heads: int, head_dim: int,
                      axes_dim=AXES_DIM, theta: float = THETA):
    """diffusers' own FLUX RoPE (``FluxPosEmbed`` + ``apply_rotary_emb``) of normalized q/k
    ``[tokens, 2 * heads * head_dim]``, or None when diffusers is not installed."""
    try:
        import torch
        from diffusers.models.embeddings import apply_rotary_emb
    except ImportError:
        return None
    try:  # its home since diffusers 0.3x; the old path warns that it is deprecated
        from diffusers.models.transformers.transformer_flux import FluxPosEmbed
    except ImportError:
        from diffusers.models.embeddings import FluxPosEmbed
    tokens = normed_qk.shape[0]
    cos, sin = FluxPosEmbed(theta=int(theta), axes_dim=list(axes_dim))(torch.from_numpy(ids))
    x = torch.from_numpy(normed_qk.reshape(tokens, 2 * heads, head_dim)).transpose(0, 1)[None]
    out = apply_rotary_emb(x, (cos.double(), sin.double()))  # [1, heads, tokens, head_dim]
    return out[0].transpose(0, 1).reshape(tokens, -1).numpy()


__all__ = ["AXES_DIM", "THETA", "atol", "diffusers_flux_qk",
           "flux_ids", "fused_flux_qk", "reference_flux_qk", "reference_normed_qk",
           "rotate_pairs"]
