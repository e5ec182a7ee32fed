"""The judge: RoPE in float64 NumPy, written for clarity rather than speed.

Every kernel in ropelab is tested against these functions.  Shapes and names:

* ``x`` is ``[tokens, hidden]`` (one head whose ``head_dim`` is ``hidden``, as in the seed
  kernel) or ``[tokens, heads, head_dim]``.
* ``positions`` is ``[tokens]`` integers, default ``0 .. tokens-1``.
* Only the first ``rotary_dim`` dims of each head rotate (default: all of them); the rest pass
  through unchanged ("partial rotary", as in GPT-NeoX and Phi).
* Pair ``i`` (``0 <= i < rotary_dim/2``) rotates by ``angle = position * inv_freq[i]`` with
  ``inv_freq[i] = base ** (-2 i / rotary_dim)``.
* ``interleave=True`` pairs ``(x[2i], x[2i+1])`` (GPT-J, the seed kernels);
  ``interleave=False`` pairs ``(x[i], x[i + rotary_dim/2])`` (GPT-NeoX, Llama in HF).
* ``inverse=True`` rotates by ``-angle``: the backward pass of RoPE, and its inverse.
* ``attention_factor`` multiplies cos and sin (YaRN's "mscale"); 1.0 means a pure rotation.
"""

from __future__ import annotations

import numpy as np

# The frequency formulas live in ropelab.freqs (pure NumPy, no ropelab imports); the judge
# re-exports them so that tests and notebooks find every float64 formula here.
from .freqs import (  # noqa: F401  (re-exports)
    DEFAULT_BASE,
    inv_freq,
    linear_inv_freq,
    llama3_inv_freq,
    ntk_inv_freq,
    yarn_blend_inv_freq,
    yarn_inv_freq,
    yarn_mscale,
)


def default_positions(tokens: int) -> np.ndarray:
    return np.arange(tokens, dtype=np.int64)


def angles(positions: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """Rotation angle of every (token, pair): ``positions[:, None] * inv_freq[None, :]``."""
    return np.outer(np.asarray(positions, dtype=np.float64), np.asarray(freqs, dtype=np.float64))


def _as_heads(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 2:
        return x[:, None, :]
    if x.ndim == 3:
        return x
    raise ValueError(f"x must be [tokens, hidden] or [tokens, heads, head_dim], got shape {x.shape}")


def pair_indices(rotary_dim: int, interleave: bool) -> tuple[np.ndarray, np.ndarray]:
    """Indices (within one head) of the first and second element of every rotated pair."""
    half = rotary_dim // 2
    i = np.arange(half)
    if interleave:
        return 2 * i, 2 * i + 1
    return i, i + half


def rope(
    x: np.ndarray,
    positions: np.ndarray | None = None,
    *,
    base: float = DEFAULT_BASE,
    rotary_dim: int | None = None,
    interleave: bool = True,
    inverse: bool = False,
    freqs: np.ndarray | None = None,
    attention_factor: float = 1.0,
) -> np.ndarray:
    """Rotate ``x`` in float64 and return a new float64 array of the same shape.

    ``freqs`` overrides the inverse frequencies (``[rotary_dim / 2]``), which is how the
    scaling schemes (linear, NTK, YaRN, Llama 3.1) plug in.
    """
    xh = _as_heads(x).astype(np.float64)
    tokens, _, head_dim = xh.shape
    rotary_dim = head_dim if rotary_dim is None else int(rotary_dim)
    if rotary_dim % 2 or not 0 < rotary_dim <= head_dim:
        raise ValueError(f"rotary_dim must be even and in (0, {head_dim}], got {rotary_dim}")
    positions = default_positions(tokens) if positions is None else np.asarray(positions)
    if positions.shape != (tokens,):
        raise ValueError(f"positions must have shape ({tokens},), got {positions.shape}")
    freqs = inv_freq(rotary_dim, base) if freqs is None else np.asarray(freqs, np.float64)
    if freqs.shape != (rotary_dim // 2,):
        raise ValueError(f"freqs must have shape ({rotary_dim // 2},), got {freqs.shape}")

    theta = angles(positions, freqs)[:, None, :]  # [tokens, 1, pairs]
    cos = np.cos(theta) * attention_factor
    sin = np.sin(theta) * attention_factor
    if inverse:
        sin = -sin
    a, b = pair_indices(rotary_dim, interleave)
    out = xh.copy()
    x0, x1 = xh[..., a], xh[..., b]
    out[..., a] = x0 * cos - x1 * sin
    out[..., b] = x0 * sin + x1 * cos
    return out.reshape(np.shape(x))


def rope_complex(
    x: np.ndarray,
    positions: np.ndarray | None = None,
    *,
    base: float = DEFAULT_BASE,
    interleave: bool = True,
) -> np.ndarray:
    """The same rotation written the way the seed's PyTorch reference writes it.

    Each pair becomes one complex number and is multiplied by ``exp(1j * angle)``.  It shares no
    code with :func:`rope` on purpose: the tests use it to cross-check the real formulation.
    Full rotation only (``rotary_dim == head_dim``).
    """
    xh = _as_heads(x).astype(np.float64)
    tokens, heads, head_dim = xh.shape
    half = head_dim // 2
    if interleave:
        z = xh.reshape(tokens, heads, half, 2) @ np.array([1.0, 1.0j])
    else:
        z = xh[..., :half] + 1j * xh[..., half:]
    pos = np.arange(tokens) if positions is None else np.asarray(positions)
    exponents = np.arange(0, head_dim, 2)[:half] / head_dim
    phase = np.exp(1j * np.outer(pos, 1.0 / base**exponents))
    w = z * phase[:, None, :]
    if interleave:
        out = np.stack([w.real, w.imag], axis=-1).reshape(tokens, heads, head_dim)
    else:
        out = np.concatenate([w.real, w.imag], axis=-1)
    return out.reshape(np.shape(x))


# --------------------------------------------------------------------------------------------
# Fused QK-RMSNorm + RoPE (SGLang's fused_qknorm_rope), float64
# --------------------------------------------------------------------------------------------

def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """RMSNorm over the last axis in float64: ``x / sqrt(mean(x**2) + eps) * weight``.

    ``x`` is ``[..., head_dim]`` and ``weight`` is ``[head_dim]``; returns a new float64 array.
    """
    x = np.asarray(x, dtype=np.float64)
    weight = np.asarray(weight, dtype=np.float64)
    if weight.shape != x.shape[-1:]:
        raise ValueError(f"weight must have shape ({x.shape[-1]},), got {weight.shape}")
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(eps))
    return x / rms * weight


def _yarn_fields(yarn) -> tuple[float, float, float, float]:
    """(factor, low, high, attention_factor) from a mapping or an object with those names."""
    get = yarn.get if isinstance(yarn, dict) else (lambda k, d=None: getattr(yarn, k, d))
    if get("low") is None or get("high") is None:
        raise ValueError(f"yarn must give the ramp's pair bounds low and high, got {yarn!r}; for "
                         "other forms pass their frequencies as freqs= and attention_factor=")
    att = get("attention_factor", 1.0)
    return (float(get("factor")), float(get("low")), float(get("high")),
            1.0 if att is None else float(att))


def fused_qknorm_rope(
    qkv: np.ndarray,
    *,
    num_heads_q: int,
    num_heads_k: int,
    num_heads_v: int,
    head_dim: int,
    q_weight: np.ndarray,
    k_weight: np.ndarray,
    positions: np.ndarray,
    eps: float = 1e-6,
    base: float = DEFAULT_BASE,
    rotary_dim: int | None = None,
    interleave: bool = True,
    yarn=None,
    freqs: np.ndarray | None = None,
    attention_factor: float = 1.0,
) -> np.ndarray:
    """QK-RMSNorm then RoPE on a packed ``qkv`` buffer, in float64; returns a new array.

    ``qkv`` is ``[tokens, (num_heads_q + num_heads_k + num_heads_v) * head_dim]``, each row laid
    out ``[Q heads | K heads | V heads]`` (bfloat16 bits must be decoded first, e.g. with
    :func:`ropelab.bf16.to_float32`).  Every Q head is RMS-normalized with ``q_weight`` and every K
    head with ``k_weight`` (both ``[head_dim]``), then its first ``rotary_dim`` dims rotate by
    ``positions[token] * freq`` (interleaved or half-split pairs); the rotated dims are also
    multiplied by the YaRN ``attention_factor``.  V heads are copied unchanged.

    ``yarn`` is None or a mapping/object with ``factor``, ``low``, ``high`` and optionally
    ``attention_factor`` (see :func:`yarn_blend_inv_freq`).  Alternatively ``freqs``
    (``[rotary_dim / 2]``) and ``attention_factor`` give the frequencies and the factor directly,
    as in :func:`rope` (e.g. from ``ropelab.scaling.resolve``); not both.

    The rotation is written with complex numbers, independently of :func:`rope`, so that a test
    can check this function against ``rms_norm`` followed by ``rope``.
    """
    x = np.asarray(qkv, dtype=np.float64)
    tokens = x.shape[0]
    heads = num_heads_q + num_heads_k + num_heads_v
    if x.ndim != 2 or x.shape[1] != heads * head_dim:
        raise ValueError(f"qkv must be [tokens, {heads * head_dim}], got shape {x.shape}")
    rotary_dim = head_dim if rotary_dim is None else int(rotary_dim)
    if rotary_dim % 2 or not 0 < rotary_dim <= head_dim:
        raise ValueError(f"rotary_dim must be even and in (0, {head_dim}], got {rotary_dim}")
    positions = np.asarray(positions, dtype=np.float64)
    if positions.shape != (tokens,):
        raise ValueError(f"positions must have shape ({tokens},), got {positions.shape}")
    if yarn is not None and (freqs is not None or attention_factor != 1.0):
        raise ValueError("give yarn, or freqs and attention_factor, not both")
    if yarn is not None:
        factor, low, high, att = _yarn_fields(yarn)
        freqs = yarn_blend_inv_freq(rotary_dim, base, factor, low, high)
    else:
        att = float(attention_factor)
        freqs = inv_freq(rotary_dim, base) if freqs is None else np.asarray(freqs, np.float64)
        if freqs.shape != (rotary_dim // 2,):
            raise ValueError(f"freqs must have shape ({rotary_dim // 2},), got {freqs.shape}")

    out = x.copy().reshape(tokens, heads, head_dim)
    nqk = num_heads_q + num_heads_k
    weights = np.concatenate([np.broadcast_to(np.asarray(q_weight, np.float64), (num_heads_q, head_dim)),
                              np.broadcast_to(np.asarray(k_weight, np.float64), (num_heads_k, head_dim))])
    qk = out[:, :nqk, :]
    qk = qk / np.sqrt((qk**2).mean(axis=-1, keepdims=True) + float(eps)) * weights[None]

    half = rotary_dim // 2
    if interleave:
        z = qk[..., 0:rotary_dim:2] + 1j * qk[..., 1:rotary_dim:2]
    else:
        z = qk[..., :half] + 1j * qk[..., half:rotary_dim]
    z = z * (att * np.exp(1j * positions[:, None, None] * freqs[None, None, :]))
    if interleave:
        qk[..., 0:rotary_dim:2], qk[..., 1:rotary_dim:2] = z.real, z.imag
    else:
        qk[..., :half], qk[..., half:rotary_dim] = z.real, z.imag
    out[:, :nqk, :] = qk
    return out.reshape(x.shape)


def fused_qknorm_rope_backward(
    qkv: np.ndarray,
    grad: np.ndarray,
    *,
    # The forward's own parameters, each by name: the gradients are those of that exact call.
    num_heads_q: int,
    num_heads_k: int,
    num_heads_v: int,
    head_dim: int,
    q_weight: np.ndarray,
    k_weight: np.ndarray,
    positions: np.ndarray,
    eps: float = 1e-6,
    base: float = DEFAULT_BASE,
    rotary_dim: int | None = None,
    interleave: bool = True,
    freqs: np.ndarray | None = None,
    attention_factor: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradients of :func:`fused_qknorm_rope` in float64: ``(dqkv, dq_weight, dk_weight)``.

    ``qkv`` is the forward's *input* and ``grad`` the gradient of its output (same shape).  Per
    Q or K head, with ``r = sqrt(mean(x**2) + eps)`` and ``n = x / r``: ``dz`` is ``grad``
    rotated back by ``-angle`` and scaled by ``attention_factor`` on the rotary dims (``grad``
    itself on the others), ``dq_weight`` / ``dk_weight`` sum ``dz * n`` over tokens and heads,
    and ``dx = (dn - n * mean(dn * n)) / r`` with ``dn = dz * weight``.  V columns: ``grad``.
    ``freqs`` default to ``base ** (-2i / rotary_dim)``; YaRN callers pass its frequencies and
    ``attention_factor`` (e.g. from ``ropelab.scaling.resolve``).
    """
    x = np.asarray(qkv, dtype=np.float64)
    g = np.asarray(grad, dtype=np.float64)
    tokens = x.shape[0]
    heads = num_heads_q + num_heads_k + num_heads_v
    if x.ndim != 2 or x.shape[1] != heads * head_dim or g.shape != x.shape:
        raise ValueError(f"qkv and grad must both be [tokens, {heads * head_dim}], got "
                         f"{x.shape} and {g.shape}")
    rotary_dim = head_dim if rotary_dim is None else int(rotary_dim)
    half = rotary_dim // 2
    freqs = inv_freq(rotary_dim, base) if freqs is None else np.asarray(freqs, np.float64)
    if freqs.shape != (half,):
        raise ValueError(f"freqs must have shape ({half},), got {freqs.shape}")
    nqk = num_heads_q + num_heads_k
    xs = x.reshape(tokens, heads, head_dim)[:, :nqk]
    gs = g.reshape(tokens, heads, head_dim)[:, :nqk]
    angle = np.asarray(positions, np.float64)[:, None, None] * freqs[None, None, :]
    c = attention_factor * np.cos(angle)
    s = attention_factor * np.sin(angle)
    first, second = pair_indices(rotary_dim, interleave)
    dz = gs.copy()  # the transpose of [[c, -s], [s, c]] applied to each rotated pair
    dz[..., first] = c * gs[..., first] + s * gs[..., second]
    dz[..., second] = -s * gs[..., first] + c * gs[..., second]
    r = np.sqrt((xs**2).mean(axis=-1, keepdims=True) + float(eps))
    n = xs / r
    dq_weight = (dz[:, :num_heads_q] * n[:, :num_heads_q]).sum(axis=(0, 1))
    dk_weight = (dz[:, num_heads_q:] * n[:, num_heads_q:]).sum(axis=(0, 1))
    weights = np.concatenate([
        np.broadcast_to(np.asarray(q_weight, np.float64), (num_heads_q, head_dim)),
        np.broadcast_to(np.asarray(k_weight, np.float64), (num_heads_k, head_dim))])
    dn = dz * weights[None]
    dx = (dn - n * (dn * n).mean(axis=-1, keepdims=True)) / r
    out = g.copy().reshape(tokens, heads, head_dim)
    out[:, :nqk] = dx
    return out.reshape(x.shape), dq_weight, dk_weight


# ---- multi-axis position tables, as their papers / reference code write them --------------------
# Written from the formulas of FLUX (diffusers' FluxPosEmbed: one RoPE per axis of the ids,
# concatenated) and Qwen2-VL (transformers' apply_multimodal_rotary_pos_emb: the head's
# dims split by mrope_section, each chunk taking its angle from one of the three position
# rows).  Both return float64 cos and sin in the layout the model applies them with.

def flux_cos_sin(ids: np.ndarray, axes_dim=(16, 56, 56), theta: float = 10000.0):
    """FLUX's rotary cos/sin for ids ``[tokens, len(axes_dim)]``: per axis ``i``, frequencies
    ``theta ** (-arange(0, d_i, 2) / d_i)``, angles ``ids[:, i] * freq``, each value repeated
    for the two elements of its interleaved pair (``repeat_interleave(2)``), axes concatenated.
    Returns cos, sin ``[tokens, sum(axes_dim)]``."""
    ids = np.asarray(ids, np.float64)
    cos, sin = [], []
    for i, d in enumerate(axes_dim):
        freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.outer(ids[:, i], freq)
        cos.append(np.repeat(np.cos(ang), 2, axis=1))
        sin.append(np.repeat(np.sin(ang), 2, axis=1))
    return np.concatenate(cos, axis=1), np.concatenate(sin, axis=1)


def mrope_cos_sin(positions: np.ndarray, head_dim: int, mrope_section, base: float = 10000.0):
    """Qwen2-VL's M-RoPE cos/sin for positions ``[3, tokens]`` (temporal, height, width):
    ``emb = cat(freqs, freqs)`` per position row (``[3, tokens, head_dim]``), then the head's
    dims split into chunks ``mrope_section * 2`` and chunk ``i`` taken from row ``i % 3``.
    Returns cos, sin ``[tokens, head_dim]`` in the NeoX (half-split) layout."""
    positions = np.asarray(positions, np.float64)
    inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    freqs = positions[:, :, None] * inv[None, None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb), np.sin(emb)
    bounds = np.cumsum([0] + list(mrope_section) * 2)
    pick = lambda t: np.concatenate(  # noqa: E731
        [t[i % 3, :, bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)], axis=-1)
    return pick(cos), pick(sin)
