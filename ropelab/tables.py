"""cos/sin caches for multi-axis RoPE: FLUX's 3-axis ids and Qwen2-VL's M-RoPE.

Both produce the ``cos_sin_cache`` layout that ``ropelab.rope``, ``ropelab.rope_qk`` take:
float32 ``[rows, rotary_dim]``, row ``r`` = the cos of each of the ``rotary_dim / 2`` pairs,
then their sin, computed in float64 and rounded once.

Convention: these tables are **per token**.  With several position axes there is no single
position to index a shared table by, so row ``t`` is token ``t``'s rotation, and the model
passes ``positions = arange(tokens)`` (or any int32 map from token to row, e.g. to reuse the rows
of an image's tokens across a batch).  Layouts: FLUX rotates interleaved pairs
(``interleave=True``); Qwen2-VL half-split ones (``interleave=False``).
"""

from __future__ import annotations

import numpy as np


def _cache(angles: np.ndarray) -> np.ndarray:
    table = np.concatenate([np.cos(angles), np.sin(angles)], axis=1)
    return np.ascontiguousarray(table, np.float32)


def flux_cache(ids, axes_dim=(16, 56, 56), theta: float = 10000.0) -> np.ndarray:
    """FLUX: ids ``[tokens, len(axes_dim)]`` -> ``[tokens, sum(axes_dim)]`` (use
    ``interleave=True``).  Pairs of axis ``i`` follow those of axes ``0 .. i-1``; pair ``j`` of
    axis ``i`` turns by ``ids[:, i] * theta ** (-2 j / axes_dim[i])``."""
    ids = np.asarray(ids)
    if ids.ndim != 2 or ids.shape[1] != len(axes_dim):
        raise ValueError(f"ids must be [tokens, {len(axes_dim)}], got shape {ids.shape}")
    if any(d % 2 for d in axes_dim):
        raise ValueError(f"every axis dim must be even, got {tuple(axes_dim)}")
    freqs = [theta ** (-np.arange(0, d, 2, dtype=np.float64) / d) for d in axes_dim]
    axis = np.concatenate([np.full(d // 2, i) for i, d in enumerate(axes_dim)])
    angles = ids.astype(np.float64)[:, axis] * np.concatenate(freqs)[None, :]
    return _cache(angles)


def mrope_cache(positions, head_dim: int, mrope_section, base: float = 10000.0) -> np.ndarray:
    """Qwen2-VL M-RoPE: positions ``[3, tokens]`` -> ``[tokens, head_dim]`` (use
    ``interleave=False``).  Pair ``j`` takes its position from the axis whose section of
    ``mrope_section`` (pairs per axis, summing to ``head_dim / 2``) holds ``j``."""
    positions = np.asarray(positions)
    if positions.ndim != 2 or positions.shape[0] != 3:
        raise ValueError(f"positions must be [3, tokens], got shape {positions.shape}")
    if sum(mrope_section) != head_dim // 2:
        raise ValueError(f"mrope_section {tuple(mrope_section)} must sum to head_dim / 2 = "
                         f"{head_dim // 2}")
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    axis = np.concatenate([np.full(n, i) for i, n in enumerate(mrope_section)])
    angles = positions.astype(np.float64)[axis, :].T * inv[None, :]
    return _cache(angles)
