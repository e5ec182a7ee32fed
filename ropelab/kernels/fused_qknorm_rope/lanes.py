"""The device functions each lane of a fused kernel calls, shared by the fused forward kernel
(:mod:`.kernel`) and the serving kernel (:mod:`ropelab.kernels.fused_qknorm_rope_kv`): the
lane's cos and sin, the head's RMSNorm scale by a butterfly over its lanes, the row of a
position in a cos/sin cache, and the V warps' copy.  Each factory is cached: one device function
per build constant set, which Numba inlines into every kernel that calls it."""

from __future__ import annotations

import math
from functools import cache

from numba import cuda, float32, uint32, uint64

from .._device import FULL_MASK, WARP
from ..vec import load_f32x4, load_u32x4, store_u32x4


@cache
def make_lane_cos_sin(pairs: int, freq4: bool, full_rotary: bool, cos_sin_cache: bool):
    """The device function ``lane_cos_sin(cs, sn, table, sub, pos, prow, n_pairs)`` that fills
    ``cs[j]`` and ``sn[j]`` with cos and sin of the lane's ``pairs`` pairs ``sub * pairs + j``
    (cached; the fused kernel and the serving kernel share it, for lanes that hold whole pairs).

    ``table``: ``inv_freq`` (the angle is ``pos * inv_freq[pair]``), or with ``cos_sin_cache``
    the flat float32 cos/sin cache, whose row for the token's position starts at ``prow``.
    ``freq4``: the lane's frequencies are read with 128-bit loads (every pair rotated, no cache,
    ``pairs`` a multiple of 4).  Without ``full_rotary`` a pair at or past ``n_pairs`` is not
    rotated: cos 1, sin 0.
    """
    PAIRS = int(pairs)
    FREQ4 = bool(freq4)
    FULL = bool(full_rotary)
    CACHE = bool(cos_sin_cache)

    # ex: begin fused_cos_sin
    @cuda.jit(device=True, inline="always")
    def lane_cos_sin(cs, sn, table, sub, pos, prow, n_pairs):
        if FREQ4:
            for k in range(PAIRS // 4):
                f0, f1, f2, f3 = load_f32x4(table, uint32(sub * uint32(PAIRS) + uint32(4 * k)))
                freqs = (f0, f1, f2, f3)
                for m in range(4):
                    angle = pos * freqs[m]
                    cs[4 * k + m] = math.cos(angle)
                    sn[4 * k + m] = math.sin(angle)
        else:
            for j in range(PAIRS):
                # The compare in 32 bits; the index left as numba widens it (a sum that cannot
                # wrap), so the compiler folds j into the load's address offset.
                pair = sub * uint32(PAIRS) + uint32(j)
                cs[j] = float32(1.0)
                sn[j] = float32(0.0)
                if FULL or uint32(pair) < n_pairs:  # partial rotary: later pairs only normalized
                    if CACHE:
                        cs[j] = table[prow + pair]  # widened sums: no wrap, offsets fold
                        sn[j] = table[prow + n_pairs + pair]
                    else:
                        angle = pos * table[pair]
                        cs[j] = math.cos(angle)
                        sn[j] = math.sin(angle)
    # ex: end fused_cos_sin

    return lane_cos_sin


@cache
def make_copy_values(head_items: int, heads_per_warp: int, copy_bytes: int, item_bytes: int):
    """The device function ``copy_values(src, dst, first, count, lane)`` of the out-of-place
    kernel's V warps: items ``[first, first + count)`` of ``src`` copied bit for bit into the
    same items of ``dst`` (cached).

    A warp copies at most ``heads_per_warp`` heads of ``head_items`` items each (``count``, a
    whole number of heads, says how many it has).  Lane ``l`` makes accesses ``l, l + 32, ...``
    of ``copy_bytes`` bytes (16: ``ld/st.global.v4.u32``, the caller guarantees 16-byte
    alignment of both arrays; 0: one item of ``item_bytes`` at a time), so each access of the
    warp moves consecutive bytes.
    """
    SPAN = head_items * heads_per_warp  # items of a warp's heads
    WIDE = copy_bytes == 16
    PER = 16 // item_bytes if WIDE else 1  # items per access
    ACCESSES = SPAN // PER
    TURNS = -(-ACCESSES // WARP)

    # ex: begin fused_copy_values
    @cuda.jit(device=True, inline="always")
    def copy_values(src, dst, first, count, lane):
        for k in range(TURNS):
            at = uint32(uint32(lane + uint32(k * WARP)) * uint32(PER))
            if at < count:
                i = uint32(first + at)
                if WIDE:
                    w0, w1, w2, w3 = load_u32x4(src, i)
                    store_u32x4(dst, i, w0, w1, w2, w3)
                else:
                    dst[i] = src[i]
    # ex: end fused_copy_values

    return copy_values


@cache
def make_head_scale(half_warp: bool, head_dim: int):
    """The device function ``head_scale(ss, eps)``: the RMSNorm scale ``1 / sqrt(mean(x**2) +
    eps)`` of a head whose lanes each hold ``ss``, the sum of squares of their own elements
    (cached).  A head's lanes are a whole warp, or (``half_warp``) one half of it: an xor
    below 16 never leaves its half, so four steps (8, 4, 2, 1) sum 16 lanes and five sum 32."""
    HALF_WARP = bool(half_warp)
    INV_HEAD_DIM = float32(1.0 / head_dim)  # a power of two: exact

    # ex: begin fused_butterfly
    @cuda.jit(device=True, inline="always")
    def head_scale(ss, eps):
        # Butterfly: after the steps every lane holds the sum over its group's lanes.
        if not HALF_WARP:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        return float32(1.0) / math.sqrt(ss * INV_HEAD_DIM + eps)
    # ex: end fused_butterfly

    return head_scale


@cuda.jit(device=True, inline="always")
def cache_row(p, entries, n_pairs):
    """``(prow, in_range)`` for position ``p`` in the flat float32 cos/sin cache of ``entries``
    entries, rows ``[cos half | sin half]`` of ``2 n_pairs`` entries (the vLLM / SGLang /
    FlashInfer layout, built by ropelab or passed by the user): the row's first entry, and
    whether the row exists.  A negative position wraps to a huge unsigned row, so one compare
    checks both ends; the row count is compared as a product (no division), which 64 bits
    cannot wrap.  Out of range, ``prow`` is row 0 (a valid read; the caller poisons the head)."""
    prow = uint32(p)
    in_range = uint64(prow) * uint64(n_pairs + n_pairs) < uint64(entries)
    if not in_range:
        prow = uint32(0)
    return uint32(prow * uint32(n_pairs + n_pairs)), in_range


@cache
def make_neox_partner(elements: int):
    """The device function ``neox_partner(lane, sub, half_lanes)`` of a NeoX head whose pairs are
    split across lanes (cached): lanes ``[0, n)`` of a head's group hold the first halves of
    ``elements`` pairs each, lanes ``[n, 2n)`` the second halves, ``n = half_lanes`` lanes away.
    Returns ``(partner, pair0, sign, rotated)``: the lane to shuffle with, the lane's first pair,
    the sign of the partner's term (first half ``x c - partner s``, second ``partner s + x c``),
    and whether the lane holds rotated dims at all (past them, partial rotary: itself, 0, 0)."""
    E = int(elements)

    @cuda.jit(device=True, inline="always")
    def neox_partner(lane, sub, half_lanes):
        rotated = sub < uint32(half_lanes + half_lanes)
        if sub < half_lanes:
            partner, pair0, sign = uint32(lane + half_lanes), uint32(sub * uint32(E)), float32(-1.0)
        elif rotated:
            partner, pair0, sign = (uint32(lane - half_lanes),
                                    uint32((sub - half_lanes) * uint32(E)), float32(1.0))
        else:
            partner, pair0, sign = lane, uint32(0), float32(0.0)
        return partner, pair0, sign, rotated

    return neox_partner
