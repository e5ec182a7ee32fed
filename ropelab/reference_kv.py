"""The serving op's float64 reference: QK-RMSNorm + RoPE, then K and V scattered into a paged
cache at each token's slot (``ropelab.fused_qknorm_rope_kv``).

Written on top of :func:`ropelab.reference.fused_qknorm_rope` (itself checked against
``rms_norm`` then ``rope``), with the cache semantics spelled out in NumPy: vLLM's slot
``block * block_size + offset`` is a row of the cache seen as ``[slots, heads, head_dim]``, a
negative slot writes nothing, every other row keeps what it held.
"""

from __future__ import annotations

import numpy as np

from . import reference


def fused_qknorm_rope_kv(qkv, *, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight,
                         k_weight, positions, slot_mapping, k_cache, v_cache, norm="rms",
                         **rope_options):
    """``(q, k_cache, v_cache)`` in float64: ``q`` is ``[tokens, num_heads_q * head_dim]``, the
    caches are new float64 arrays of ``k_cache`` / ``v_cache``'s shape (their old values
    wherever no token writes; decode FP8 caches before passing them).

    ``norm="gemma"`` applies the weights as ``1 + w`` (Gemma, Qwen3-Next).  ``rope_options``:
    ``eps``, ``base``, ``rotary_dim``, ``interleave``, ``yarn``, ``freqs``,
    ``attention_factor`` of :func:`ropelab.reference.fused_qknorm_rope`.
    """
    if norm not in ("rms", "gemma"):
        raise ValueError(f"norm must be 'rms' or 'gemma', got {norm!r}")
    qw = np.asarray(q_weight, np.float64)
    kw = np.asarray(k_weight, np.float64)
    if norm == "gemma":
        qw, kw = 1.0 + qw, 1.0 + kw
    out = reference.fused_qknorm_rope(qkv, num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                                      num_heads_v=num_heads_v, head_dim=head_dim, q_weight=qw,
                                      k_weight=kw, positions=positions, **rope_options)
    tokens = out.shape[0]
    heads = out.reshape(tokens, num_heads_q + num_heads_k + num_heads_v, head_dim)
    q = heads[:, :num_heads_q].reshape(tokens, num_heads_q * head_dim)
    k_new = np.array(k_cache, dtype=np.float64)
    v_new = np.array(v_cache, dtype=np.float64)
    slots = np.asarray(slot_mapping, dtype=np.int64)
    if slots.shape != (tokens,):
        raise ValueError(f"slot_mapping must have shape ({tokens},), got {slots.shape}")
    k_rows = k_new.reshape(-1, num_heads_k, head_dim)  # one row per slot (views: writes land)
    v_rows = v_new.reshape(-1, num_heads_v, head_dim)
    for t in np.nonzero(slots >= 0)[0]:
        k_rows[slots[t]] = heads[t, num_heads_q:num_heads_q + num_heads_k]
        v_rows[slots[t]] = heads[t, num_heads_q + num_heads_k:]
    return q, k_new, v_new


def slots_for(lengths, block_size: int, block_tables) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, slot_mapping)`` of a ragged prefill: request ``r`` has ``lengths[r]``
    tokens at positions ``0 .. lengths[r] - 1``, token ``p`` of it in block
    ``block_tables[r][p // block_size]`` at offset ``p % block_size``."""
    positions, slots = [], []
    for r, n in enumerate(lengths):
        p = np.arange(int(n))
        positions.append(p)
        table = np.asarray(block_tables[r], dtype=np.int64)
        slots.append(table[p // block_size] * block_size + p % block_size)
    return (np.concatenate(positions).astype(np.int32) if positions else np.zeros(0, np.int32),
            np.concatenate(slots).astype(np.int64) if slots else np.zeros(0, np.int64))
