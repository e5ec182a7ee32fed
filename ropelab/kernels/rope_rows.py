"""Plain RoPE on rows of heads: 16-bit or float32 storage, row strides, q and k in one launch.

What a model hands a RoPE op is rarely one contiguous float32 tensor: activations are bfloat16
or float16, q and k are column slices of a packed ``qkv`` (a row stride larger than the row),
and both must rotate in one launch with their own head counts (GQA).  This kernel is the plain
(norm-free) relative of :mod:`ropelab.kernels.fused_qknorm_rope`, with the same choices:

* A *lane* (thread) owns ``2 * RUN`` elements of a head: GPT-J, ``RUN * 2`` contiguous elements
  (pairs ``(2j, 2j+1)`` inside them); NeoX, ``RUN`` elements at offset ``o`` and the ``RUN``
  partners at ``o + rotary_dim / 2``, so both elements of every pair are the lane's own (no
  shuffle).  A run moves with 128-bit (or 64-bit) vector accesses (:mod:`.vec`) when the
  arrays, the row strides and the run allow it; 16-bit words are unpacked by :mod:`.words16`.
* ``heads_per_thread`` heads are loaded one after the other before any arithmetic (bytes in
  flight), and the lane's cos/sin, which depend on the token and the lane only, are computed
  once and shared by all of them.  A head past the end reads the last head and stores nothing
  (a select, not a branch around the loads).
* Index arithmetic is 32-bit (numba widens ``uint32 op uint32``: every step is cast back); the
  launcher refuses spans of ``2**32`` elements or more.
* Frequencies come from a float32 table built on the host in float64 (scaling included), as in
  ``freq_table``; or cos/sin come from a float32 cache ``[max_pos, rotary_dim]``, cos half then
  sin half (the vLLM / SGLang / FlashInfer ``cos_sin_cache``), which the user passes or the host
  builds in float64.  A position outside the cache writes NaN into that token's rotated pairs
  and stores the position in the device error word (:func:`ropelab.check_errors`).
* NeoX with partial rotary: lanes past the rotated dims copy the pass-through elements, or,
  when the call is in place, do nothing at all.

The caller's arrays, as the kernel sees them (1-D spans from the first element of the first
row to the last element of the last row; rows ``row`` elements apart):

* ``one``: ``x``, ``out``, ``positions`` (``ropelab.rope``; ``out`` may be ``x``);
* ``qk``: ``q``, ``k``, ``positions`` (``ropelab.rope_qk``, in place);
* with a user cache, the cache follows ``positions``.

The host side (the problem, the access width and mapping, the plan) is
:mod:`ropelab.kernels.rope_rows_host`.
"""

from __future__ import annotations

import math
from functools import cache

from numba import cuda, float32, uint32

from ..bf16 import load_bf16, store_bf16
from .vec import load_f32x4, load_u32x2, load_u32x4, store_f32x4, store_u32x2, store_u32x4
from .words16 import CODECS


@cuda.jit(device=True, inline="always")
def _load_plain(v):
    return float32(v)


@cuda.jit(device=True, inline="always")
def _store_plain(v):
    return v  # float16 storage rounds on assignment (cvt.rn)


_LOAD = {"float32": _load_plain, "float16": _load_plain, "bfloat16": load_bf16}
_STORE = {"float32": _store_plain, "float16": _store_plain, "bfloat16": store_bf16}


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, run: int, vector_bytes: int,
                heads_per_thread: int, use_cache: bool, full_rotary: bool, in_place: bool,
                pair: bool):
    """The kernel function for one head size, layout, storage, access width and mapping.

    The number of values a lane holds must be a compile-time constant for them to stay in
    registers, hence one function per combination (cached).
    """
    RUN = int(run)
    LANE = 2 * RUN  # elements a lane holds per head
    G = head_dim // LANE  # lanes per head
    R = int(heads_per_thread)
    SLOTS = LANE * R  # local.array needs a plain constant
    HEAD = int(head_dim)
    INTERLEAVE = bool(interleave)
    FULL = bool(full_rotary)
    COPY = not in_place  # pass-through lanes copy x to out
    CACHE = bool(use_cache)
    NAN = float32(math.nan)
    WIDE16 = storage != "float32" and vector_bytes > 0
    V4 = vector_bytes == 16
    CHUNK = vector_bytes // 2 if WIDE16 else 1  # 16-bit elements per access
    CHUNKS = RUN // CHUNK
    VEC4 = storage == "float32" and vector_bytes == 16
    QUADS = RUN // 4
    # Every pair of a lane rotated and RUN a multiple of 4: its RUN frequencies are consecutive
    # floats of the table at a 16-byte boundary (pair sub * RUN), read with 128-bit loads.
    FREQ4 = FULL and not CACHE and RUN % 4 == 0
    load = _LOAD[storage]
    store = _STORE[storage]
    low, high, pack = CODECS.get(storage, CODECS["bfloat16"])  # unused for float32

    @cuda.jit(device=True, inline="always")
    def load_run(src, first, vals, o):
        if WIDE16:
            for k in range(CHUNKS):
                if V4:
                    w0, w1, w2, w3 = load_u32x4(src, uint32(first + uint32(k * CHUNK)))
                    words = (w0, w1, w2, w3)
                else:
                    w0, w1 = load_u32x2(src, uint32(first + uint32(k * CHUNK)))
                    words = (w0, w1, w0, w1)  # one tuple type; only two are used
                for m in range(CHUNK // 2):
                    vals[o + k * CHUNK + 2 * m] = low(words[m])
                    vals[o + k * CHUNK + 2 * m + 1] = high(words[m])
        elif VEC4:
            for k in range(QUADS):
                a, b, c, d = load_f32x4(src, uint32(first + uint32(4 * k)))
                vals[o + 4 * k] = a
                vals[o + 4 * k + 1] = b
                vals[o + 4 * k + 2] = c
                vals[o + 4 * k + 3] = d
        else:
            for i in range(RUN):
                vals[o + i] = load(src[uint32(first + uint32(i))])

    @cuda.jit(device=True, inline="always")
    def store_run(dst, first, vals, o):
        if WIDE16:
            for k in range(CHUNKS):
                v = o + k * CHUNK
                if V4:
                    store_u32x4(dst, uint32(first + uint32(k * CHUNK)), pack(vals[v], vals[v + 1]),
                                pack(vals[v + 2], vals[v + 3]), pack(vals[v + 4], vals[v + 5]),
                                pack(vals[v + 6], vals[v + 7]))
                else:
                    store_u32x2(dst, uint32(first + uint32(k * CHUNK)), pack(vals[v], vals[v + 1]),
                                pack(vals[v + 2], vals[v + 3]))
        elif VEC4:
            for k in range(QUADS):
                store_f32x4(dst, uint32(first + uint32(4 * k)), vals[o + 4 * k],
                            vals[o + 4 * k + 1], vals[o + 4 * k + 2], vals[o + 4 * k + 3])
        else:
            for i in range(RUN):
                dst[uint32(first + uint32(i))] = store(vals[o + i])

    # ex: begin rope_rows
    @cuda.jit(device=True, inline="always")
    def body(q_in, q_out, k_in, k_out, positions, table, errors, heads_q, heads_qk, q_in_row,
             q_out_row, k_in_row, k_out_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale):
        # x: the lanes of a token row (all its heads); y: the token.  No division by a runtime
        # number: G (lanes per head) is a compile-time constant.
        t = uint32(uint32(cuda.blockIdx.y) * uint32(cuda.blockDim.x) + uint32(cuda.threadIdx.x))
        token = uint32(uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y))
        group = uint32(t // uint32(G))
        sub = uint32(t - uint32(group * uint32(G)))  # lane within its head
        head0 = uint32(group * uint32(R))
        if head0 >= heads_qk or token >= uint32(positions.shape[0]):
            return
        # Where the lane's two runs start in a head, and whether it rotates at all.
        if INTERLEAVE:
            off0 = uint32(sub * uint32(LANE))
            off1 = uint32(off0 + uint32(RUN))
            rotating = FULL or off0 < uint32(n_pairs + n_pairs)
        elif sub < rot_lanes:
            off0 = uint32(sub * uint32(RUN))
            off1 = uint32(off0 + n_pairs)
            rotating = True
        else:  # NeoX pass-through dims past rotary_dim
            off0 = uint32(uint32(n_pairs + n_pairs) + uint32(sub - rot_lanes) * uint32(LANE))
            off1 = uint32(off0 + uint32(RUN))
            rotating = False
        if not rotating and not COPY:
            return  # in place: nothing to move
        vals = cuda.local.array(SLOTS, float32)

        # Phase 1: every load of every head this lane works on.
        last = uint32(heads_qk - uint32(1))
        for r in range(R):
            head = uint32(head0 + uint32(r))
            src = head if head < heads_qk else last
            if src < heads_q:
                first = uint32(token * q_in_row + src * uint32(HEAD))
                load_run(q_in, uint32(first + off0), vals, r * LANE)
                load_run(q_in, uint32(first + off1), vals, r * LANE + RUN)
            else:
                first = uint32(token * k_in_row + uint32(src - heads_q) * uint32(HEAD))
                load_run(k_in, uint32(first + off0), vals, r * LANE)
                load_run(k_in, uint32(first + off1), vals, r * LANE + RUN)

        # Phase 2: cos/sin of the lane's pairs, once for all its heads.  Pair j of the lane is
        # pair sub * RUN + j of the head in both layouts.
        p = positions[token]
        in_range = True
        if rotating:
            cs = cuda.local.array(RUN, float32)
            sn = cuda.local.array(RUN, float32)
            pos = float32(p)
            prow = uint32(0)
            if CACHE:
                # A negative position wraps to a huge unsigned row: one compare checks both ends.
                prow = uint32(p)
                in_range = prow < cache_rows
                if not in_range:
                    prow = uint32(0)  # read a valid row; the pairs are written as NaN below
            if FREQ4:
                for q4 in range(RUN // 4):
                    f0, f1, f2, f3 = load_f32x4(table, uint32(sub * uint32(RUN) + uint32(4 * q4)))
                    freqs = (f0, f1, f2, f3)
                    for m in range(4):
                        angle = pos * freqs[m]
                        cs[4 * q4 + m] = math.cos(angle) * cos_scale
                        sn[4 * q4 + m] = math.sin(angle) * sin_scale
            for j in range(0 if FREQ4 else RUN):
                pair = uint32(sub * uint32(RUN) + uint32(j))
                cs[j] = float32(1.0)
                sn[j] = float32(0.0)
                if FULL or pair < n_pairs:
                    if CACHE:
                        row = uint32(prow * uint32(n_pairs + n_pairs))
                        cs[j] = table[uint32(row + pair)] * cos_scale
                        sn[j] = table[uint32(row + n_pairs + pair)] * sin_scale
                    else:
                        angle = pos * table[pair]
                        cs[j] = math.cos(angle) * cos_scale
                        sn[j] = math.sin(angle) * sin_scale
            for r in range(R):
                for j in range(RUN):
                    if INTERLEAVE:
                        a = r * LANE + 2 * j
                        b = a + 1
                    else:
                        a = r * LANE + j
                        b = a + RUN
                    x0 = vals[a]
                    x1 = vals[b]
                    if FULL or uint32(sub * uint32(RUN) + uint32(j)) < n_pairs:
                        # A select, not a branch: an out-of-range position poisons the pair.
                        vals[a] = (x0 * cs[j] - x1 * sn[j]) if in_range else NAN
                        vals[b] = (x0 * sn[j] + x1 * cs[j]) if in_range else NAN
            if CACHE:
                if not in_range and sub == uint32(0) and head0 == uint32(0):
                    errors[0] = p

        # Phase 3: stores, for the heads that exist.
        for r in range(R):
            head = uint32(head0 + uint32(r))
            if head < heads_qk:
                if head < heads_q:
                    first = uint32(token * q_out_row + head * uint32(HEAD))
                    store_run(q_out, uint32(first + off0), vals, r * LANE)
                    store_run(q_out, uint32(first + off1), vals, r * LANE + RUN)
                else:
                    first = uint32(token * k_out_row + uint32(head - heads_q) * uint32(HEAD))
                    store_run(k_out, uint32(first + off0), vals, r * LANE)
                    store_run(k_out, uint32(first + off1), vals, r * LANE + RUN)
    # ex: end rope_rows

    # The entry points differ only in which arrays the caller passes; ``errors`` is the device
    # error word with a cache, else ``positions`` stands in for it and is never written.
    if pair and CACHE:
        def rope_rows(q, k, positions, cos_sin, errors, heads_q, heads_qk, q_row, k_row,
                      rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale):
            body(q, q, k, k, positions, cos_sin, errors, heads_q, heads_qk, q_row, q_row, k_row,
                 k_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)
    elif pair:
        def rope_rows(q, k, positions, inv_freq, heads_q, heads_qk, q_row, k_row, rot_lanes,
                      n_pairs, cache_rows, cos_scale, sin_scale):
            body(q, q, k, k, positions, inv_freq, positions, heads_q, heads_qk, q_row, q_row,
                 k_row, k_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)
    elif CACHE:
        def rope_rows(x, out, positions, cos_sin, errors, heads_q, heads_qk, x_row, out_row,
                      rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale):
            body(x, out, x, out, positions, cos_sin, errors, heads_q, heads_qk, x_row, out_row,
                 x_row, out_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)
    else:
        def rope_rows(x, out, positions, inv_freq, heads_q, heads_qk, x_row, out_row, rot_lanes,
                      n_pairs, cache_rows, cos_scale, sin_scale):
            body(x, out, x, out, positions, inv_freq, positions, heads_q, heads_qk, x_row,
                 out_row, x_row, out_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)

    rope_rows.__qualname__ = (
        f"rope_rows_d{head_dim}_{'gptj' if interleave else 'neox'}_{storage}_r{RUN}"
        f"{f'_v{vector_bytes * 8}' if vector_bytes else ''}_h{R}{'_full' if FULL else ''}"
        f"{'_cache' if CACHE else ''}{'_inplace' if in_place else ''}{'_qk' if pair else ''}")
    return rope_rows


# The kernel the course shows: bfloat16 GPT-J, head_dim 128, q and k in one launch.
KERNEL = make_kernel(128, True, "bfloat16", 8, 16, 2, False, True, True, True)
