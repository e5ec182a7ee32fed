"""The fused kernel's device code: :func:`make_kernel` builds one kernel per head size, layout,
storage, access width and mapping (the package docstring explains the design)."""

from __future__ import annotations

import math
from functools import cache

from numba import cuda, float32, uint32

from ...bf16 import load_bf16, pack2, store_bf16, unpack_high, unpack_low
from .._device import FULL_MASK, WARP
from ..vec import load_f32x4, load_u32x2, load_u32x4, store_f32x4, store_u32x2, store_u32x4
from ..words16 import CODECS
from .lanes import (cache_row, make_copy_values, make_head_scale, make_lane_cos_sin,
                    make_neox_partner)
from .mapping import HEAD_DIMS, HEADS_PER_WARP_CHOICES, LANES_PER_HEAD_CHOICES, _LOG2, vector_bytes_for


@cuda.jit(device=True, inline="always")
def _load_plain(v):
    return float32(v)


@cuda.jit(device=True, inline="always")
def _store_plain(v):
    return v  # float16 storage rounds on assignment (cvt.rn: round to nearest even)


_LOAD = {"float32": _load_plain, "float16": _load_plain, "bfloat16": load_bf16}
_STORE = {"float32": _store_plain, "float16": _store_plain, "bfloat16": store_bf16}


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, vector_bytes: int = 0,
                heads_per_warp: int = 1, lanes_per_head: int = 32, cos_sin_cache: bool = False,
                split: bool = False, full_rotary: bool = False, out_of_place: bool = False,
                copy_bytes: int = 0):
    """The kernel function for one head size, pair layout, storage dtype and mapping (cached).

    ``vector_bytes`` (16, 8 or 0): each lane moves each of its runs of contiguous elements with
    accesses of that many bytes (:func:`vector_bytes_for`); ``qkv`` and, for 16-bit storage,
    both weights must then start on a 16-byte boundary, which the launcher checks before it
    picks a vector kernel.  0: bfloat16 as single 32-bit words, float32 and float16 one element
    at a time.

    ``heads_per_warp`` (1, 2 or 4) and ``lanes_per_head`` (32 or 16): see the module docstring.

    ``cos_sin_cache``: read cos/sin from a flat float32 cache of rows ``[cos half | sin half]``
    (``rotary_dim`` wide) instead of computing them (long contexts, or the user's own table);
    the kernel then takes the cache and the error word instead of ``inv_freq``.

    ``split`` (NeoX only, with ``full_rotary``): a lane holds ``E / 2`` elements of each half of
    the head, so both elements of every pair sit in one lane: no shuffle, and one sin/cos per
    pair as in GPT-J.  Without it NeoX partners are fetched by shuffle.

    ``full_rotary``: ``rotary_dim == head_dim``, known when the kernel is built: no per-pair
    test, and the attention factor folds into the norm's scale (one multiply per head instead
    of two per pair).

    ``out_of_place``: the kernel reads ``qkv`` and writes a second array ``out`` of the same
    layout (its second argument): Q and K normalized and rotated, V copied, so each byte is
    read once and written once.  The V heads get warps of their own after the Q and K warps
    of each token (:func:`ropelab.kernels.fused_qknorm_rope.launch_config` with ``values``);
    they copy with accesses of ``copy_bytes`` (16, where ``qkv`` and ``out`` start on 16-byte
    boundaries, or 0: one item at a time; :func:`make_copy_values`).  The Q and K arithmetic
    is the in-place kernel's, so ``out`` holds its results bit for bit; the in-place kernel
    passes ``qkv`` as both source and destination of the same code.
    """
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if heads_per_warp not in HEADS_PER_WARP_CHOICES:
        raise ValueError(f"heads_per_warp must be one of {HEADS_PER_WARP_CHOICES}, got {heads_per_warp}")
    if lanes_per_head not in LANES_PER_HEAD_CHOICES or heads_per_warp * lanes_per_head < WARP:
        raise ValueError(f"lanes_per_head must be 32, or 16 with two or more heads per warp; got "
                         f"{lanes_per_head} with {heads_per_warp}")
    if split and (interleave or not full_rotary):
        raise ValueError("split=True is the NeoX layout with every dim rotated")
    if copy_bytes not in (0, 16) or (copy_bytes and not out_of_place):
        raise ValueError(f"copy_bytes is 16 or 0, for an out-of-place kernel; got {copy_bytes}")
    G = int(lanes_per_head)
    E = head_dim // G  # elements per lane, even
    SPLIT = bool(split)
    IN_LANE = bool(interleave) or SPLIT  # both elements of each pair in the same lane
    RUNS = 2 if SPLIT else 1  # runs of contiguous elements per lane and head
    RUN = E // RUNS
    HALF = head_dim // 2  # where a split lane's second run starts
    if vector_bytes not in (0, vector_bytes_for(storage, RUN)):
        raise ValueError(f"{vector_bytes}-byte accesses do not fit runs of {RUN} {storage} elements")
    PAIRS = E // 2  # pairs per lane
    FULL = bool(full_rotary)
    INTERLEAVE = bool(interleave)
    CACHE = bool(cos_sin_cache)
    NAN = float32(math.nan)
    LOG2G = _LOG2[G]
    SUB_MASK = G - 1
    HALF_WARP = G == 16
    GROUPS = WARP // G  # heads side by side in a warp
    ROUNDS = heads_per_warp // GROUPS  # heads each group handles one after the other
    SLOTS = E * ROUNDS  # register slots per lane (local.array needs a plain constant)
    # bfloat16 qkv arrives as uint32 words of two elements: word index = element index / 2.
    PACKED = storage == "bfloat16"
    UNIT = 2 if PACKED else 1  # elements per item of qkv as the kernel sees it
    WORDS = RUN // 2
    # 16-bit storage in vector accesses: CHUNK elements (CHUNK / 2 words) per access.
    WIDE16 = storage != "float32" and vector_bytes > 0
    V4 = vector_bytes == 16
    CHUNK = vector_bytes // 2
    CHUNKS = RUN // CHUNK if WIDE16 else 0
    STEP = CHUNK // UNIT  # items of qkv per access
    VEC4 = storage == "float32" and vector_bytes == 16
    QUADS = RUN // 4
    # A lane's frequencies are PAIRS consecutive floats at a 16-byte boundary: 128-bit loads.
    FREQ4 = IN_LANE and FULL and not CACHE and PAIRS % 4 == 0
    lane_cos_sin = make_lane_cos_sin(PAIRS, FREQ4, FULL, CACHE)
    head_scale = make_head_scale(HALF_WARP, head_dim)
    neox_partner = make_neox_partner(E)
    load = _LOAD[storage]
    store = _STORE[storage]
    low, high, pack = CODECS.get(storage, CODECS["bfloat16"])  # unused for float32
    OUT = bool(out_of_place)
    HEAD_ITEMS = head_dim // UNIT  # items of qkv per head
    QK_ROUND = heads_per_warp - 1  # heads_qk rounded up to whole warps: (n + QK_ROUND) & ~QK_ROUND
    copy_values = make_copy_values(HEAD_ITEMS, heads_per_warp, copy_bytes,
                                   4 if storage != "float16" else 2)

    # Index arithmetic: numba widens uint32 (op) uint32 to 64 bits; every step is cast back to
    # uint32 so that the code stays in 32-bit integer instructions (the launcher refuses
    # buffers of 2**32 elements or more).
    # ex: begin fused_kernel
    @cuda.jit(device=True, inline="always")
    def body(qkv, dest, q_weight, k_weight, positions, table_a, table_b, errors, heads_q,
             heads_qk, heads_total, n_pairs, half_lanes, eps, attention_factor):
        # dest: where Q and K go (qkv itself in place, or out); table_a / table_b: inv_freq
        # twice, or the flat cos/sin cache twice (table_b unused); errors: the error word
        # (cache) or an unused stand-in.
        tid = uint32(cuda.threadIdx.x)
        lane = tid & uint32(WARP - 1)
        sub = lane & uint32(SUB_MASK)  # lane within its head's group
        group = lane >> uint32(LOG2G)  # which of the warp's side-by-side heads
        warp = uint32(uint32(cuda.blockIdx.y) * (uint32(cuda.blockDim.x) >> uint32(5))
                      + (tid >> uint32(5)))
        head0 = uint32(warp * uint32(heads_per_warp))  # this warp's first head
        # blockDim.y tokens per block, one per row of warps (small head counts fill a block).
        token = uint32(uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y))
        if head0 >= heads_qk or token >= uint32(positions.shape[0]):  # warp-uniform
            if OUT and token < uint32(positions.shape[0]):
                # ex: begin fused_values
                # A V warp (out of place only): the warps after a token's Q and K warps copy
                # its V heads, heads_per_warp of them each, unchanged.
                vhead0 = uint32(head0 - (uint32(heads_qk + uint32(QK_ROUND)) & ~uint32(QK_ROUND)))
                heads_v = uint32(heads_total - heads_qk)
                if vhead0 < heads_v:
                    count = uint32(min(uint32(heads_v - vhead0), uint32(heads_per_warp))
                                   * uint32(HEAD_ITEMS))
                    first = uint32(uint32(uint32(token * heads_total) + heads_qk + vhead0)
                                   * uint32(HEAD_ITEMS))
                    copy_values(qkv, dest, first, count, lane)
                # ex: end fused_values
            return
        row = uint32(token * heads_total)
        vals = cuda.local.array(SLOTS, float32)
        sums = cuda.local.array(ROUNDS, float32)
        bases = cuda.local.array(ROUNDS, uint32)  # each head's first item, for load and store

        # Phase 1: every load of every head this lane works on, before any arithmetic.  A head
        # past the end (an odd head count) reads the last head instead, works on it with the
        # others (its shuffles stay inside its own group) and stores nothing: a select, where a
        # branch around the loads would cost a divergence barrier and a second address.
        # ex: begin fused_loads
        last = uint32(heads_qk - uint32(1))
        for r in range(ROUNDS):
            ss = float32(0.0)
            head = uint32(head0 + uint32(r * GROUPS) + group)
            src = head if head < heads_qk else last
            # index of the lane's first item of qkv (a word of two, for bfloat16)
            bases[r] = uint32(uint32(row + src) * uint32(head_dim // UNIT) + sub * uint32(RUN // UNIT))
            for q in range(RUNS):
                first = uint32(bases[r] + uint32(q * HALF // UNIT))
                o = r * E + q * RUN
                if WIDE16:
                    for k in range(CHUNKS):
                        if V4:
                            w0, w1, w2, w3 = load_u32x4(qkv, uint32(first + uint32(k * STEP)))
                            words = (w0, w1, w2, w3)
                        else:
                            w0, w1 = load_u32x2(qkv, uint32(first + uint32(k * STEP)))
                            words = (w0, w1, w0, w1)  # same tuple type; only two are used
                        for m in range(CHUNK // 2):
                            lo = low(words[m])
                            hi = high(words[m])
                            vals[o + k * CHUNK + 2 * m] = lo
                            vals[o + k * CHUNK + 2 * m + 1] = hi
                            ss = ss + lo * lo  # one fused multiply-add each
                            ss = ss + hi * hi
                elif PACKED:
                    for k in range(WORDS):
                        word = qkv[uint32(first + uint32(k))]
                        lo = unpack_low(word)
                        hi = unpack_high(word)
                        vals[o + 2 * k] = lo
                        vals[o + 2 * k + 1] = hi
                        ss = ss + lo * lo
                        ss = ss + hi * hi
                elif VEC4:
                    for k in range(QUADS):
                        a, b, c, d = load_f32x4(qkv, uint32(first + uint32(4 * k)))
                        vals[o + 4 * k] = a
                        vals[o + 4 * k + 1] = b
                        vals[o + 4 * k + 2] = c
                        vals[o + 4 * k + 3] = d
                        ss = ss + a * a
                        ss = ss + b * b
                        ss = ss + c * c
                        ss = ss + d * d
                else:
                    for i in range(RUN):
                        v = load(qkv[uint32(first + uint32(i))])
                        vals[o + i] = v
                        ss = ss + v * v
            sums[r] = ss
        # ex: end fused_loads

        p = positions[token]
        prow = uint32(0)
        in_range = True
        if CACHE:  # the row's first entry; out of range, row 0 is read and NaN written below
            prow, in_range = cache_row(p, table_a.shape[0], n_pairs)
        pos = float32(p)

        # cos/sin of this lane's pairs depend on the token and the lane only: computed once and
        # shared by every head the lane works on.
        cs = cuda.local.array(PAIRS, float32)
        sn = cuda.local.array(PAIRS, float32)
        if IN_LANE:
            lane_cos_sin(cs, sn, table_a, sub, pos, prow, n_pairs)

        for r in range(ROUNDS):
            head = uint32(head0 + uint32(r * GROUPS) + group)
            ss = sums[r]
            scale = head_scale(ss, eps)  # the butterfly over the head's lanes
            is_q = head < heads_q
            for q in range(RUNS):
                w_first = uint32(sub * uint32(RUN) + uint32(q * HALF))
                o = r * E + q * RUN
                if WIDE16:
                    for k in range(CHUNKS):
                        # Two loads in two branches, not one load through a selected pointer:
                        # the selected pointer loses its address space (a generic ld in the PTX).
                        at = uint32(w_first + uint32(k * CHUNK))
                        if V4:
                            if is_q:
                                w0, w1, w2, w3 = load_u32x4(q_weight, at)
                            else:
                                w0, w1, w2, w3 = load_u32x4(k_weight, at)
                            words = (w0, w1, w2, w3)
                        else:
                            if is_q:
                                w0, w1 = load_u32x2(q_weight, at)
                            else:
                                w0, w1 = load_u32x2(k_weight, at)
                            words = (w0, w1, w0, w1)
                        for m in range(CHUNK // 2):
                            at = o + k * CHUNK + 2 * m
                            vals[at] = vals[at] * low(words[m])
                            vals[at + 1] = vals[at + 1] * high(words[m])
                else:
                    weight = q_weight if is_q else k_weight
                    for i in range(RUN):
                        vals[o + i] = vals[o + i] * load(weight[uint32(w_first + uint32(i))])

            # ex: begin fused_rope_gptj
            if IN_LANE:
                # x * weight is in vals; the norm's scale (and the attention factor) ride on
                # cos and sin: two multiplies per pair instead of one per element and two per
                # pair.
                rot = scale * attention_factor
                for j in range(PAIRS):
                    if INTERLEAVE:  # GPT-J: pair j is slots (2j, 2j+1)
                        a = r * E + 2 * j
                        b = a + 1
                    else:  # split NeoX: pair j is slot j of each run
                        a = r * E + j
                        b = a + RUN
                    x0 = vals[a]
                    x1 = vals[b]
                    if FULL or uint32(sub * uint32(PAIRS) + uint32(j)) < n_pairs:
                        c = cs[j] * rot
                        s = sn[j] * rot
                        vals[a] = x0 * c - x1 * s
                        vals[b] = x0 * s + x1 * c
                    else:  # partial rotary: normalized only
                        vals[a] = x0 * scale
                        vals[b] = x1 * scale
            # ex: end fused_rope_gptj
            else:
                for i in range(E):
                    vals[r * E + i] = vals[r * E + i] * scale
                # A pair's halves lie half_lanes lanes apart inside the head's group.
                partner, pair0, sign, rotated = neox_partner(lane, sub, half_lanes)
                for i in range(E):
                    other = cuda.shfl_sync(FULL_MASK, vals[r * E + i], partner)
                    if rotated:
                        if CACHE:
                            c = table_a[prow + pair0 + uint32(i)] * attention_factor
                            s = table_a[prow + n_pairs + pair0 + uint32(i)] * attention_factor
                        else:
                            angle = pos * table_a[pair0 + uint32(i)]  # offset folded, as above
                            c = math.cos(angle) * attention_factor
                            s = math.sin(angle) * attention_factor
                        # first half: x*c - partner*s; second half: partner*s + x*c
                        vals[r * E + i] = vals[r * E + i] * c + sign * other * s

            if head < heads_qk:
                if CACHE:
                    if not in_range:  # the position has no row: say so in the data and the word
                        for i in range(E):
                            vals[r * E + i] = NAN
                        if sub == uint32(0):
                            errors[0] = p
                for q in range(RUNS):
                    first = uint32(bases[r] + uint32(q * HALF // UNIT))
                    o = r * E + q * RUN
                    if WIDE16:
                        for k in range(CHUNKS):
                            v = o + k * CHUNK
                            if V4:
                                store_u32x4(dest, uint32(first + uint32(k * STEP)),
                                            pack(vals[v], vals[v + 1]), pack(vals[v + 2], vals[v + 3]),
                                            pack(vals[v + 4], vals[v + 5]), pack(vals[v + 6], vals[v + 7]))
                            else:
                                store_u32x2(dest, uint32(first + uint32(k * STEP)),
                                            pack(vals[v], vals[v + 1]), pack(vals[v + 2], vals[v + 3]))
                    elif PACKED:
                        for k in range(WORDS):
                            dest[uint32(first + uint32(k))] = pack2(vals[o + 2 * k], vals[o + 2 * k + 1])
                    elif VEC4:
                        for k in range(QUADS):
                            store_f32x4(dest, uint32(first + uint32(4 * k)), vals[o + 4 * k],
                                        vals[o + 4 * k + 1], vals[o + 4 * k + 2], vals[o + 4 * k + 3])
                    else:
                        for i in range(RUN):
                            dest[uint32(first + uint32(i))] = store(vals[o + i])
    # ex: end fused_kernel

    if OUT and CACHE:
        def fused_qknorm_rope(qkv, out, q_weight, k_weight, positions, cos_sin, errors,
                              heads_q, heads_qk, heads_total, n_pairs, half_lanes, eps,
                              attention_factor):
            body(qkv, out, q_weight, k_weight, positions, cos_sin, cos_sin, errors, heads_q,
                 heads_qk, heads_total, n_pairs, half_lanes, eps, attention_factor)
    elif OUT:
        def fused_qknorm_rope(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                              heads_qk, heads_total, n_pairs, half_lanes, eps,
                              attention_factor):
            body(qkv, out, q_weight, k_weight, positions, inv_freq, inv_freq, positions,
                 heads_q, heads_qk, heads_total, n_pairs, half_lanes, eps, attention_factor)
    elif CACHE:
        def fused_qknorm_rope(qkv, q_weight, k_weight, positions, cos_sin, errors,
                              heads_q, heads_qk, heads_total, n_pairs, half_lanes, eps,
                              attention_factor):
            body(qkv, qkv, q_weight, k_weight, positions, cos_sin, cos_sin, errors, heads_q,
                 heads_qk, heads_total, n_pairs, half_lanes, eps, attention_factor)
    else:
        def fused_qknorm_rope(qkv, q_weight, k_weight, positions, inv_freq, heads_q, heads_qk,
                              heads_total, n_pairs, half_lanes, eps, attention_factor):
            # No cache, no error word: positions stands in for it and is never written.
            body(qkv, qkv, q_weight, k_weight, positions, inv_freq, inv_freq, positions,
                 heads_q, heads_qk, heads_total, n_pairs, half_lanes, eps, attention_factor)

    fused_qknorm_rope.__qualname__ = (
        f"fused_qknorm_rope_d{head_dim}_{'gptj' if interleave else 'neox'}_{storage}"
        f"{f'_v{vector_bytes * 8}' if vector_bytes else ''}"
        f"{f'_h{heads_per_warp}' if heads_per_warp > 1 else ''}{'_g16' if G == 16 else ''}"
        f"{'_split' if SPLIT else ''}{'_full' if FULL else ''}{'_cache' if CACHE else ''}"
        f"{('_out128' if copy_bytes else '_out') if OUT else ''}")
    return fused_qknorm_rope


# The kernel the course shows: SGLang's production case (head_dim 128, interleaved, bfloat16)
# with the course's first mapping, one warp per head.
KERNEL = make_kernel(128, True, "bfloat16")


