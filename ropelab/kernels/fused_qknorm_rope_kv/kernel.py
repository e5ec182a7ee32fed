"""The serving kernel's device code: :func:`make_kernel` builds one kernel per head size, pair
layout, storage, mapping, cos/sin source, cache dtype and norm (the package docstring explains
the design)."""

from __future__ import annotations

import math
from functools import cache

from numba import cuda, float32, int32, int64, uint32, uint64

from .._device import FULL_MASK, WARP
from ..fused_qknorm_rope.lanes import (cache_row, make_head_scale, make_lane_cos_sin,
                                       make_neox_partner)
from ..fused_qknorm_rope.mapping import HEAD_DIMS, LANES_PER_HEAD_CHOICES, _LOG2
from .runs import runs

INT32_MAX = 2**31 - 1


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, lanes_per_head: int = 16,
                cos_sin_cache: bool = False, split: bool = False, full_rotary: bool = False,
                fp8: bool = False, gemma: bool = False):
    """The kernel function for one configuration (cached).

    ``lanes_per_head`` (16 or 32): the lanes of one head's group; a warp holds ``32 /
    lanes_per_head`` heads side by side.  ``cos_sin_cache``: cos/sin read from a float32 table
    of rows ``[cos half | sin half]`` (built on the host or the caller's) instead of computed
    from ``inv_freq``.  ``split``, ``full_rotary``: as for the fused kernel
    (:func:`ropelab.kernels.fused_qknorm_rope.make_kernel`).  ``fp8``: the caches hold e4m3fn
    bytes (``v * inv_scale``, K rounded to ``storage`` first); else they have qkv's dtype.
    ``gemma``: the norm's weight is applied as ``1 + w``.
    """
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if lanes_per_head not in LANES_PER_HEAD_CHOICES:
        raise ValueError(f"lanes_per_head must be one of {LANES_PER_HEAD_CHOICES}")
    if split and (interleave or not full_rotary):
        raise ValueError("split=True is the NeoX layout with every dim rotated")
    G = int(lanes_per_head)
    E = head_dim // G  # elements per lane, even
    SPLIT = bool(split)
    IN_LANE = bool(interleave) or SPLIT  # both elements of each pair in the same lane
    RUNS = 2 if SPLIT else 1
    RUN = E // RUNS
    HALF = head_dim // 2
    D = head_dim
    PAIRS = E // 2
    FULL = bool(full_rotary)
    INTERLEAVE = bool(interleave)
    CACHE = bool(cos_sin_cache)
    FP8 = bool(fp8)
    ROUND_K = FP8 and storage != "float32"  # K goes through its storage dtype before e4m3
    NAN = float32(math.nan)
    LOG2G = _LOG2[G]
    SUB_MASK = G - 1
    HALF_WARP = G == 16
    HPW = WARP // G  # heads per warp, side by side
    FREQ4 = IN_LANE and FULL and not CACHE and PAIRS % 4 == 0
    lane_cos_sin = make_lane_cos_sin(PAIRS, FREQ4, FULL, CACHE)
    head_scale = make_head_scale(HALF_WARP, head_dim)
    neox_partner = make_neox_partner(E)
    # Q and K: RUNS runs of RUN elements per lane; V: one run of E elements per lane.  (numba
    # types functions, not a namespace of them: each one gets its own name.)
    qk = runs(storage, RUN, gemma)
    load_qk, weigh_qk, store_qk, rounded_qk, fp8_qk = (qk.load, qk.weigh, qk.store, qk.rounded,
                                                       qk.store_fp8)
    v = runs(storage, E)
    load_v, copy_v, fp8_v = v.load, v.copy, v.store_fp8

    # ex: begin kv_kernel
    @cuda.jit(device=True, inline="always")
    def body(qkv, q_dest, q_weight, k_weight, positions, slots, k_cache, v_cache, table, errors,
             heads_q, heads_qk, heads_total, qk_warps, heads_v, q_row, n_pairs, half_lanes, eps,
             attention_factor, capacity, inv_k_scale, inv_v_scale):
        tid = uint32(cuda.threadIdx.x)
        lane = tid & uint32(WARP - 1)
        sub = lane & uint32(SUB_MASK)  # lane within its head's group
        group = lane >> uint32(LOG2G)  # which of the warp's side-by-side heads
        warp = uint32(uint32(cuda.blockIdx.y) * (uint32(cuda.blockDim.x) >> uint32(5))
                      + (tid >> uint32(5)))
        token = uint32(uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y))
        if token >= uint32(positions.shape[0]):  # warp-uniform
            return
        # ex: begin kv_slot
        # vLLM's slot: block * block_size + offset, a row of the cache seen as [slots, heads *
        # head_dim]; negative is padding (nothing written).  A slot past the cache is recorded
        # in the error word's second entry and its token's K and V are not written.
        slot = int64(slots[token])
        write_kv = slot >= int64(0)
        if write_kv and uint64(slot) >= capacity:
            write_kv = False
            if lane == uint32(0):
                errors[1] = int32(min(slot, int64(INT32_MAX)))
        # ex: end kv_slot
        vals = cuda.local.array(E, float32)
        row = uint32(token * heads_total)

        if warp >= qk_warps:
            # ex: begin kv_values
            # A V warp (warps of V heads follow the Q and K warps, so the branch is
            # warp-uniform): V is copied, or scaled and rounded to e4m3; never normalized.
            head = uint32(uint32(warp - qk_warps) * uint32(HPW) + group)
            if head < heads_v and write_kv:
                src = uint32(uint32(row + heads_qk + head) * uint32(D) + sub * uint32(E))
                dst = uint64(uint64(slot) * uint64(heads_v * uint32(D))
                             + uint64(head * uint32(D) + sub * uint32(E)))
                if FP8:
                    load_v(qkv, src, vals, 0, float32(0.0))
                    fp8_v(v_cache, dst >> uint64(1), vals, 0, inv_v_scale)
                else:
                    copy_v(qkv, src, v_cache, dst)
            # ex: end kv_values
            return

        # Q and K: every load first.  A head past the end (an odd head count) reads the last
        # head, works with its warp-mates (the shuffles stay warp-uniform) and stores nothing.
        head = uint32(warp * uint32(HPW) + group)
        src_head = head if head < heads_qk else uint32(heads_qk - uint32(1))
        base = uint32(uint32(row + src_head) * uint32(D))
        ss = float32(0.0)
        for q in range(RUNS):
            ss = load_qk(qkv, uint32(base + uint32(q * HALF) + sub * uint32(RUN)), vals,
                             q * RUN, ss)

        p = positions[token]
        prow = uint32(0)
        in_range = True
        if CACHE:  # the fused kernel's device function: row 0 when out of range
            prow, in_range = cache_row(p, table.shape[0], n_pairs)
        pos = float32(p)

        cs = cuda.local.array(PAIRS, float32)
        sn = cuda.local.array(PAIRS, float32)
        if IN_LANE:  # the fused kernel's device function
            lane_cos_sin(cs, sn, table, sub, pos, prow, n_pairs)

        # RMSNorm: a butterfly over the group's lanes leaves the head's sum in every lane.
        scale = head_scale(ss, eps)
        is_q = head < heads_q
        for q in range(RUNS):
            w_first = uint32(sub * uint32(RUN) + uint32(q * HALF))
            if is_q:  # two calls, not one through a selected array (keeps the address space)
                weigh_qk(q_weight, w_first, vals, q * RUN)
            else:
                weigh_qk(k_weight, w_first, vals, q * RUN)

        if IN_LANE:
            rot = scale * attention_factor  # the norm's scale rides on cos and sin
            for j in range(PAIRS):
                if INTERLEAVE:
                    a = 2 * j
                    b = a + 1
                else:
                    a = j
                    b = a + RUN
                x0 = vals[a]
                x1 = vals[b]
                if FULL or uint32(sub * uint32(PAIRS) + uint32(j)) < n_pairs:
                    c = cs[j] * rot
                    s = sn[j] * rot
                    vals[a] = x0 * c - x1 * s
                    vals[b] = x0 * s + x1 * c
                else:
                    vals[a] = x0 * scale
                    vals[b] = x1 * scale
        else:
            # NeoX with partner shuffles: lanes [0, n) of a group hold first halves of pairs,
            # [n, 2n) their partners, n = half_lanes lanes away; every lane shuffles.
            for i in range(E):
                vals[i] = vals[i] * scale
            partner, pair0, sign, rotated = neox_partner(lane, sub, half_lanes)
            for i in range(E):
                other = cuda.shfl_sync(FULL_MASK, vals[i], partner)
                if rotated:
                    if CACHE:
                        c = table[prow + pair0 + uint32(i)] * attention_factor
                        s = table[prow + n_pairs + pair0 + uint32(i)] * attention_factor
                    else:
                        angle = pos * table[pair0 + uint32(i)]
                        c = math.cos(angle) * attention_factor
                        s = math.sin(angle) * attention_factor
                    vals[i] = vals[i] * c + sign * other * s

        if head >= heads_qk:
            return
        if CACHE and not in_range:  # no cos/sin row for the position: NaN, and the word says so
            for i in range(E):
                vals[i] = NAN
            if sub == uint32(0):
                errors[0] = p
        # ex: begin kv_store
        if is_q:  # Q into q_out, or back into qkv (q_row is then qkv's row)
            q_first = uint32(token * q_row + head * uint32(D))
            for q in range(RUNS):
                store_qk(q_dest, uint32(q_first + uint32(q * HALF) + sub * uint32(RUN)),
                             vals, q * RUN)
        elif write_kv:  # K into its cache row (64-bit: a cache may pass 2**32 elements)
            k_first = uint64(uint64(slot) * uint64((heads_qk - heads_q) * uint32(D))
                             + uint64((head - heads_q) * uint32(D)))
            for q in range(RUNS):
                at = uint64(k_first + uint64(q * HALF) + uint64(sub * uint32(RUN)))
                if FP8:
                    if ROUND_K:  # what fused_qknorm_rope would have stored, then e4m3
                        rounded_qk(vals, q * RUN)
                    fp8_qk(k_cache, at >> uint64(1), vals, q * RUN, inv_k_scale)
                else:
                    store_qk(k_cache, at, vals, q * RUN)
        # ex: end kv_store
    # ex: end kv_kernel

    def fused_qknorm_rope_kv(qkv, q_dest, q_weight, k_weight, positions, slots, k_cache,
                             v_cache, table, errors, heads_q, heads_qk, heads_total, qk_warps,
                             heads_v, q_row, n_pairs, half_lanes, eps, attention_factor,
                             capacity, inv_k_scale, inv_v_scale):
        body(qkv, q_dest, q_weight, k_weight, positions, slots, k_cache, v_cache, table, errors,
             heads_q, heads_qk, heads_total, qk_warps, heads_v, q_row, n_pairs, half_lanes, eps,
             attention_factor, capacity, inv_k_scale, inv_v_scale)

    fused_qknorm_rope_kv.__qualname__ = (
        f"fused_qknorm_rope_kv_d{head_dim}_{'gptj' if interleave else 'neox'}_{storage}"
        f"{'_g16' if G == 16 else ''}{'_split' if SPLIT else ''}{'_full' if FULL else ''}"
        f"{'_cache' if CACHE else ''}{'_fp8' if FP8 else ''}{'_gemma' if gemma else ''}")
    return fused_qknorm_rope_kv


# The kernel the course shows: bfloat16, head_dim 128, interleaved pairs, half a warp per head,
# an FP8 cache.
KERNEL = make_kernel(128, True, "bfloat16", 16, full_rotary=True, fp8=True)
