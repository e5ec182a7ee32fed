"""The backward kernels of the fused QK-RMSNorm + RoPE: ``dx`` of every head and the two
weight gradients, from the forward's *input* ``x`` and the output's gradient ``dy``; their
plans are :mod:`ropelab.kernels.fused_qknorm_rope.backward_host`.

The math, per Q or K head of one token (``H = head_dim``)::

    forward                               backward
    r = sqrt(mean(x**2) + eps)            dz = R(theta)^T dy      (the inverse rotation, same
    n = x / r                                                       attention factor)
    z = n * w                             dw += dz * n            (summed over tokens and heads)
    y = R(theta) z   (rotary dims only)   dn = dz * w
                                          dx = (dn - n * mean(dn * n)) / r

Dims past ``rotary_dim`` are not rotated (``dz = dy`` there) and carry no attention factor,
exactly as in the forward kernel.  V heads pass ``dy`` through to ``dx`` unchanged.

**Mapping.**  One warp per (token, head) "unit", in a grid-stride loop over units: a fixed grid
(``blocks``) so that the weight-gradient partial sums are ``blocks`` rows and no more.  A head
is cut into groups of four elements, two pairs: lane ``l`` takes groups ``q = l + 32 k``.  In
GPT-J, and past ``rotary_dim`` in both layouts, group ``q`` is elements ``4q .. 4q+3`` (pairs
side by side); a rotated NeoX group is elements ``2q, 2q+1`` and their partners
``rotary_dim/2`` further on.  So a lane's pairs are whole (no shuffle), and in 16-bit storage
every access is a 32-bit word of two elements: coalesced across the warp, half the
instructions of 16-bit accesses.  A group of four neighbours on aligned arrays moves with one
access (64 bits of two words, or 128 bits of four float32).  At ``head_dim`` 128 each lane
holds one group.  Every lane holds the same dims of every head it visits, so its
weight-gradient accumulators are four registers per group, kept over all its units, and its
dims of both weights are loaded once, before the loop.

**Bytes in flight.**  The backward is bound by how many bytes wait on DRAM at once (its warps
stall on loads, not on arithmetic).  A pass of the loop takes ``units_per_pass`` units in three
steps: it issues every load of all of them (``x`` and ``dy`` of a Q or K head, ``dy`` of a V
head), then computes each Q or K head, then stores.  More units a pass put more bytes in flight
per warp for more registers, so fewer blocks fit on an SM; the grid is one wave of the build
that runs (:mod:`.backward_host`).

**The weight gradient.**  At the end each block adds its warps' accumulators in shared memory
in a fixed order, then either writes one row of ``partial[blocks, 2 * H]`` (two-stage: a second
kernel, :func:`.backward_reduce.make_reduce`, sums the rows in a fixed order: bitwise the same
result on every run) or adds the row into ``dw[2 * H]`` with ``cuda.atomic.add`` (one launch fewer, but
the order in which blocks arrive changes the float32 rounding from run to run).  Columns
``[0, H)`` are ``dq_weight``, ``[H, 2H)`` are ``dk_weight``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numba import cuda, float32, int32, uint32

from .._device import WARP, warp_sum
from ..vec import load_f32x4, load_u32x2, store_f32x4, store_u32x2
from ..words16 import CODECS

# Base alignment (bytes) the vector build needs: a 64-bit access of two words, or 128 bits of
# four float32.
VECTOR_ALIGN = {"float32": 16, "float16": 8, "bfloat16": 8}
# What the kernel reads each storage as: 16-bit storage as uint32 words of two elements.
KERNEL_VIEW = {"float32": np.dtype(np.float32), "float16": np.dtype(np.uint32),
               "bfloat16": np.dtype(np.uint32)}
WARPS_PER_BLOCK = 8
UNITS_PER_PASS = 1
# What a pass's slot holds: nothing (past the last unit), a V head (copied), a Q or a K head.
SKIP, V_HEAD, Q_HEAD, K_HEAD = uint32(0), uint32(1), uint32(2), uint32(3)


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, warps_per_block: int = WARPS_PER_BLOCK,
                cos_sin_cache: bool = False, atomic: bool = False, vector: bool = False,
                units_per_pass: int = UNITS_PER_PASS):
    """The backward kernel for one head size, layout, storage and weight-gradient mode (cached).

    16-bit storage arrives as ``uint32`` words of two elements (``x``, ``dy``, ``dx`` and both
    weights: 4-byte aligned, which the public function checks); float32 as elements.
    ``cos_sin_cache``: read cos/sin from a flat float32 table of rows ``[cos half | sin half]``
    (``rotary_dim`` wide; built on the host from the frequencies, or the caller's own) instead
    of computing them; a position without a row makes the head's ``dx`` and its share of the
    weight gradients NaN and is recorded in the error word, as in the forward.
    ``atomic``: the ``sums`` argument is ``dw[2 * head_dim]`` (zeroed by the caller) and blocks
    add into it; otherwise it is ``partial[blocks * 2 * head_dim]``.
    ``units_per_pass``: the (token, head) units a warp loads before it computes any of them.
    ``vector``: a group of four neighbours moves with one access (64-bit for 16-bit storage,
    128-bit for float32); needs ``x``, ``dy``, ``dx`` and both weights on 8-byte (float32:
    16-byte) boundaries, which the caller checks.  Crossed NeoX groups stay two 32-bit words.
    """
    if head_dim % 64 or head_dim <= 0:
        raise ValueError(f"head_dim must be a positive multiple of 64, got {head_dim}")
    GROUPS = head_dim // 4  # groups of four elements (two pairs) per head
    PER_LANE = -(-GROUPS // WARP)  # groups per lane (the last may be idle: head_dim 64, 192)
    SLOTS = 4 * PER_LANE
    HD = head_dim
    NQK = 2 * head_dim  # one row of partial sums: dq_weight then dk_weight
    WPB = int(warps_per_block)
    UNITS = int(units_per_pass)
    if UNITS < 1:
        raise ValueError(f"units_per_pass must be at least 1, got {units_per_pass}")
    THREADS = WPB * WARP
    INV_HD = float32(1.0 / head_dim)  # a power of two over 64: exact
    INTERLEAVE = bool(interleave)
    CACHE = bool(cos_sin_cache)
    ATOMIC = bool(atomic)
    WORDS = storage != "float32"
    VEC = bool(vector)
    NAN = float32(math.nan)
    ZERO = float32(0.0)
    UNIT_SLOTS = UNITS * SLOTS  # a pass's slots (a local array's size must be one constant)
    RAW = uint32 if WORDS else float32  # how a V head's dy is held between its load and store
    low, high, pack = CODECS.get(storage, CODECS["bfloat16"])  # unused for float32

    # A group's four elements are e0, e0 + 1, e1, e1 + 1 of the head.  Two layouts of pairs:
    # adjacent (GPT-J, and every pass-through group): e0 = 4q, e1 = 4q + 2, pairs (e0, e0+1)
    # and (e1, e1+1); crossed (NeoX, rotated): e0 = 2q, e1 = 2q + rotary_dim/2, pairs (e0, e1)
    # and (e0+1, e1+1).  Either way the pairs are 2q and 2q + 1 (their frequencies), and in
    # 16-bit storage each of e0, e1 starts one 32-bit word.
    # Each helper branches on build constants first (WORDS, VEC: the other builds' code is not
    # even typed), then on whether the group is four neighbours.
    @cuda.jit(device=True, inline="always")
    def words2(arr, at0, at1, adjacent):  # 16-bit storage: the group's two 32-bit words
        if VEC and adjacent:  # elements at0 .. at0 + 3: one 64-bit load
            return load_u32x2(arr, at0 >> uint32(1))
        return arr[at0 >> uint32(1)], arr[at1 >> uint32(1)]

    @cuda.jit(device=True, inline="always")
    def floats4(arr, at0, at1, adjacent):  # float32 storage: the group's four elements
        if VEC and adjacent:  # one 128-bit load
            return load_f32x4(arr, at0)
        return arr[at0], arr[at0 + uint32(1)], arr[at1], arr[at1 + uint32(1)]

    @cuda.jit(device=True, inline="always")
    def put_words2(arr, at0, at1, w0, w1, adjacent):
        if VEC and adjacent:
            store_u32x2(arr, at0 >> uint32(1), w0, w1)
        else:
            arr[at0 >> uint32(1)] = w0
            arr[at1 >> uint32(1)] = w1

    @cuda.jit(device=True, inline="always")
    def put_floats4(arr, at0, at1, a, b, c, d, adjacent):
        if VEC and adjacent:
            store_f32x4(arr, at0, a, b, c, d)
        else:
            arr[at0] = a
            arr[at0 + uint32(1)] = b
            arr[at1] = c
            arr[at1 + uint32(1)] = d

    @cuda.jit(device=True, inline="always")
    def get4(arr, at0, at1, vals, o, adjacent):  # the group as float32 values
        if WORDS:
            w0, w1 = words2(arr, at0, at1, adjacent)
            vals[o] = low(w0)
            vals[o + 1] = high(w0)
            vals[o + 2] = low(w1)
            vals[o + 3] = high(w1)
        else:
            vals[o], vals[o + 1], vals[o + 2], vals[o + 3] = floats4(arr, at0, at1, adjacent)

    @cuda.jit(device=True, inline="always")
    def put4(arr, at0, at1, a, b, c, d, adjacent):
        if WORDS:
            put_words2(arr, at0, at1, pack(a, b), pack(c, d), adjacent)
        else:
            put_floats4(arr, at0, at1, a, b, c, d, adjacent)

    @cuda.jit(device=True, inline="always")
    def take4(src, at0, at1, raw, o, adjacent):  # V heads: the stored bits, kept for put_raw4
        if WORDS:
            raw[o], raw[o + 1] = words2(src, at0, at1, adjacent)
        else:
            raw[o], raw[o + 1], raw[o + 2], raw[o + 3] = floats4(src, at0, at1, adjacent)

    @cuda.jit(device=True, inline="always")
    def put_raw4(dst, at0, at1, raw, o, adjacent):
        if WORDS:
            put_words2(dst, at0, at1, raw[o], raw[o + 1], adjacent)
        else:
            put_floats4(dst, at0, at1, raw[o], raw[o + 1], raw[o + 2], raw[o + 3], adjacent)

    @cuda.jit(device=True, inline="always")
    def place(first, e0, e1, q, n_pairs):
        """Group ``q`` of the head starting at ``first``: where its two halves start in the
        rows, and whether it is four neighbours (one vector access)."""
        return uint32(first + e0), uint32(first + e1), INTERLEAVE or q + q >= n_pairs

    # ex: begin backward_kernel
    @cuda.jit(device=True, inline="always")
    def body(x, dy, dx, q_weight, k_weight, positions, sums, table, errors, heads_q, heads_qk,
             heads_total, n_pairs, eps, attention_factor):
        tid = uint32(cuda.threadIdx.x)
        lane = tid & uint32(WARP - 1)
        warp_in_block = tid >> uint32(5)
        total_warps = uint32(uint32(cuda.gridDim.x) * uint32(WPB))
        units = uint32(uint32(positions.shape[0]) * heads_total)

        # The lane's groups: the same dims in every head, so its weights and dw accumulators
        # stay in registers across all the units the warp visits.
        e0s = cuda.local.array(PER_LANE, uint32)
        e1s = cuda.local.array(PER_LANE, uint32)
        wq = cuda.local.array(SLOTS, float32)
        wk = cuda.local.array(SLOTS, float32)
        for k in range(PER_LANE):
            o = 4 * k
            q = uint32(lane + uint32(WARP * k))
            if not INTERLEAVE and q + q < n_pairs:  # crossed
                e0s[k] = uint32(q + q)
                e1s[k] = uint32(q + q + n_pairs)
            else:
                e0s[k] = uint32(uint32(4) * q)
                e1s[k] = uint32(uint32(4) * q + uint32(2))
            if q < uint32(GROUPS):
                adjacent = INTERLEAVE or q + q >= n_pairs
                get4(q_weight, e0s[k], e1s[k], wq, o, adjacent)
                get4(k_weight, e0s[k], e1s[k], wk, o, adjacent)
            else:  # an idle slot (head_dim 64 or 192): zeros add nothing below
                for j in range(4):
                    wq[o + j] = ZERO
                    wk[o + j] = ZERO
        acc_q = cuda.local.array(SLOTS, float32)
        acc_k = cuda.local.array(SLOTS, float32)
        for i in range(SLOTS):
            acc_q[i] = ZERO
            acc_k[i] = ZERO
        # UNITS units a pass: every load of all of them is issued before the first value is
        # used, so a warp keeps UNITS times the bytes in flight (the backward is bound by how
        # many bytes wait on DRAM at once, not by its arithmetic).
        n = cuda.local.array(UNIT_SLOTS, float32)  # x, then x / r
        g = cuda.local.array(UNIT_SLOTS, float32)  # dy, then dz, then dn = dz * w
        raw = cuda.local.array(UNIT_SLOTS, RAW)  # a V head's dy, as stored
        kinds = cuda.local.array(UNITS, uint32)  # SKIP, V_HEAD, Q_HEAD or K_HEAD
        firsts = cuda.local.array(UNITS, uint32)
        poss = cuda.local.array(UNITS, int32)

        base = uint32(uint32(cuda.blockIdx.x) * uint32(WPB) + warp_in_block)
        while base < units:  # warp-uniform: every lane of a warp takes the same units
            for u in range(UNITS):  # 1. issue every load of the pass
                unit = uint32(base + uint32(u) * total_warps)
                kind = SKIP
                if unit < units:
                    token = uint32(unit // heads_total)
                    head = uint32(unit - token * heads_total)
                    first = uint32(unit * uint32(HD))  # rows: heads_total * HD elements
                    firsts[u] = first
                    kind = V_HEAD if head >= heads_qk else (Q_HEAD if head < heads_q else K_HEAD)
                    if kind != V_HEAD:
                        poss[u] = positions[token]
                    for k in range(PER_LANE):
                        o = u * SLOTS + 4 * k
                        q = uint32(lane + uint32(WARP * k))
                        if q < uint32(GROUPS):
                            at0, at1, adjacent = place(first, e0s[k], e1s[k], q, n_pairs)
                            if kind == V_HEAD:
                                take4(dy, at0, at1, raw, o, adjacent)
                            else:
                                get4(x, at0, at1, n, o, adjacent)
                                get4(dy, at0, at1, g, o, adjacent)
                        else:
                            for j in range(4):
                                n[o + j] = ZERO
                                g[o + j] = ZERO
                kinds[u] = kind
            for u in range(UNITS):  # 2. each Q or K head's dx, and its share of dw
                kind = kinds[u]
                if kind == Q_HEAD or kind == K_HEAD:
                    is_q = kind == Q_HEAD
                    ss = ZERO
                    for i in range(SLOTS):
                        ss += n[u * SLOTS + i] * n[u * SLOTS + i]
                    ss = warp_sum(ss)
                    inv_r = float32(1.0) / math.sqrt(ss * INV_HD + eps)

                    pos = poss[u]
                    row = uint32(0)
                    in_range = True
                    if CACHE:  # a negative position wraps to a huge row: one compare, both ends
                        row = uint32(pos)
                        in_range = row < uint32(uint32(table.shape[0]) // uint32(n_pairs + n_pairs))
                        row = uint32((row if in_range else uint32(0)) * uint32(n_pairs + n_pairs))
                    dot = ZERO
                    for k in range(PER_LANE):
                        o = u * SLOTS + 4 * k
                        ow = 4 * k
                        q = uint32(lane + uint32(WARP * k))
                        crossed = not INTERLEAVE and q + q < n_pairs
                        # dz = R^T dy on the rotated pairs (rotate back by -theta, same attention
                        # factor); a pair's slots are (0, 2) and (1, 3) crossed, (0, 1) and (2, 3)
                        # not.
                        for h in range(2):
                            p = uint32(q + q + uint32(h))
                            if p < n_pairs:
                                if CACHE:
                                    c = table[row + p] * attention_factor
                                    s = table[row + n_pairs + p] * attention_factor
                                    if not in_range:
                                        c = NAN
                                        s = NAN
                                else:
                                    angle = float32(pos) * table[p]
                                    c = math.cos(angle) * attention_factor
                                    s = math.sin(angle) * attention_factor
                                # Constant slot indices in each branch: registers, not local
                                # memory.
                                if crossed:
                                    ga = g[o + h]
                                    gb = g[o + h + 2]
                                else:
                                    ga = g[o + 2 * h]
                                    gb = g[o + 2 * h + 1]
                                za = ga * c + gb * s
                                zb = gb * c - ga * s
                                if crossed:
                                    g[o + h] = za
                                    g[o + h + 2] = zb
                                else:
                                    g[o + 2 * h] = za
                                    g[o + 2 * h + 1] = zb
                        for j in range(4):
                            nj = n[o + j] * inv_r
                            n[o + j] = nj
                            if is_q:
                                acc_q[ow + j] += g[o + j] * nj
                                dn = g[o + j] * wq[ow + j]
                            else:
                                acc_k[ow + j] += g[o + j] * nj
                                dn = g[o + j] * wk[ow + j]
                            g[o + j] = dn
                            dot += dn * nj
                    dot = warp_sum(dot)
                    mean = dot * INV_HD
                    for i in range(SLOTS):  # dx, in place of dn
                        o = u * SLOTS + i
                        g[o] = (g[o] - n[o] * mean) * inv_r
                    if CACHE and not in_range and lane == uint32(0):
                        errors[0] = pos
            for u in range(UNITS):  # 3. the stores
                kind = kinds[u]
                if kind != SKIP:
                    first = firsts[u]
                    for k in range(PER_LANE):
                        o = u * SLOTS + 4 * k
                        q = uint32(lane + uint32(WARP * k))
                        if q < uint32(GROUPS):
                            at0, at1, adjacent = place(first, e0s[k], e1s[k], q, n_pairs)
                            if kind == V_HEAD:  # its gradient passes through
                                put_raw4(dx, at0, at1, raw, o, adjacent)
                            else:
                                put4(dx, at0, at1, g[o], g[o + 1], g[o + 2], g[o + 3], adjacent)
            base = uint32(base + uint32(UNITS) * total_warps)

        # ex: begin backward_block_sum
        # The block's warps add their accumulators in shared memory, warp 0 first: a fixed
        # order, so the block's row does not depend on which warp finished first.
        block_sums = cuda.shared.array((WPB, NQK), float32)
        for k in range(PER_LANE):
            if lane + uint32(WARP * k) < uint32(GROUPS):
                for j in range(4):
                    dim = uint32(e0s[k] + uint32(j & 1)) if j < 2 else uint32(e1s[k] + uint32(j & 1))
                    block_sums[warp_in_block, dim] = acc_q[4 * k + j]
                    block_sums[warp_in_block, HD + dim] = acc_k[4 * k + j]
        cuda.syncthreads()
        col = tid
        while col < uint32(NQK):
            total = ZERO
            for wi in range(WPB):
                total += block_sums[wi, col]
            if ATOMIC:
                cuda.atomic.add(sums, col, total)  # blocks arrive in any order
            else:
                sums[uint32(cuda.blockIdx.x) * uint32(NQK) + col] = total
            col += uint32(THREADS)
        # ex: end backward_block_sum
    # ex: end backward_kernel

    if CACHE:
        def fused_qknorm_rope_backward(x, dy, dx, q_weight, k_weight, positions, sums, cos_sin,
                                       errors, heads_q, heads_qk, heads_total, n_pairs, eps,
                                       attention_factor):
            body(x, dy, dx, q_weight, k_weight, positions, sums, cos_sin, errors, heads_q,
                 heads_qk, heads_total, n_pairs, eps, attention_factor)
    else:
        def fused_qknorm_rope_backward(x, dy, dx, q_weight, k_weight, positions, sums, inv_freq,
                                       heads_q, heads_qk, heads_total, n_pairs, eps,
                                       attention_factor):
            # No cache, no error word: positions stands in for it and is never written.
            body(x, dy, dx, q_weight, k_weight, positions, sums, inv_freq, positions, heads_q,
                 heads_qk, heads_total, n_pairs, eps, attention_factor)

    fused_qknorm_rope_backward.__qualname__ = (
        f"fused_qknorm_rope_backward_d{head_dim}_{'gptj' if interleave else 'neox'}_{storage}"
        f"_w{WPB}{f'_u{UNITS}' if UNITS > 1 else ''}{'_v' if VEC else ''}{'_cache' if CACHE else ''}{'_atomic' if ATOMIC else ''}")
    return fused_qknorm_rope_backward


KERNEL = make_kernel(128, True, "bfloat16")  # the build notebook 08 shows
