"""Fused QK-RMSNorm + RoPE, in place on a packed ``qkv`` buffer (SGLang's ``fused_qknorm_rope``).

``qkv`` is ``[tokens, (heads_q + heads_k + heads_v) * head_dim]``, each row ``[Q | K | V]``.  For
every token and every Q and K head: RMSNorm over ``head_dim`` in float32 (``x * rsqrt(mean(x**2)
+ eps) * weight``, one weight vector for all Q heads and one for all K heads), then RoPE on the
first ``rotary_dim`` dims, written back where it came from.  V is never read nor written.

Mapping: a group of ``G`` lanes per (token, head), ``G`` = 32 (a whole warp) or 16 (half a
warp, two heads side by side).  Lane ``l`` of a group holds ``E = head_dim / G`` elements in
registers, so a head is read once and written once: the contiguous elements ``l*E .. l*E + E-1``
(GPT-J, and NeoX with partner shuffles), or, for NeoX with every dim rotated in 16-bit storage
(*split*), two runs of ``E / 2``: ``l*E/2 ..`` in the first half of the head and the same
offsets in the second half, so that both elements of each of the lane's pairs are its own.

* RMSNorm: each lane sums its squares; a ``shfl_xor_sync`` butterfly (16, 8, 4, 2, 1 for a whole
  warp; 8, 4, 2, 1 for half a warp: an xor below 16 never leaves the half) leaves the head's
  sum in every lane of its group, with no shared memory and no ``syncthreads``.
* Interleaved RoPE (GPT-J): ``E`` is even, so pair ``(2k, 2k+1)`` never straddles two lanes; each
  pair costs one frequency lookup and one sin/cos, shared by its two elements (the point of
  SGLang PR 21654).  Split NeoX pairs slot ``j`` of the two runs and costs the same.  The
  sin/cos of a lane's pairs depend on the token and the lane only: they are computed once and
  shared by every head the lane works on.
* Half-split RoPE (NeoX) with partner shuffles (partial rotary, float32): element ``d`` pairs
  with ``d + rotary_dim/2``, which lives ``half_lanes = rotary_dim / (2E)`` lanes away in the
  same group and register slot: one ``shfl_sync`` per slot fetches the partner, and sin/cos is
  computed per slot.  Every lane of the warp takes part in every shuffle (lanes outside the
  rotated range read themselves, lanes of a head past the end shuffle values they never store),
  so the calls are warp-uniform.  This needs ``rotary_dim`` to be a multiple of ``2E``; the
  public API checks it for ``G = 32``, and the plan keeps ``G = 32`` when ``G = 16`` would break
  it.  Measured on the H200 (``data/bench_fused/``, 11:20): the split mapping took 16-bit NeoX
  from 81-87% of the copy to 93-97%.
* When every dim rotates (``full_rotary``), the norm's scale and the attention factor ride on
  cos and sin (``c * scale * af``): two multiplies per pair instead of one per element and two
  per pair; a partial-rotary kernel tests each pair instead.

Heads per warp (``HPW``): the warp's ``32 / G`` groups side by side, times ``HPW * G / 32`` heads
each group handles one after the other (every load first, then the arithmetic).  The point is
bytes in flight (Little's law): a 16-bit head of 128 elements is only 256 bytes, so one head per
warp cannot keep enough loads outstanding to reach the copy rate.  Measured with a CUDA C++
kernel on the H200 (bf16, GPT-J, head_dim 128): 8-byte loads per lane with one head per warp
reached 72-74% of the copy, 16-byte loads with half a warp per head 93-96%.  So 16-bit storage
defaults to two heads per warp on 16-lane groups, each lane moving its 8 elements with one
128-bit access (``ld.global.v4.u32``).  A head past the end (an odd head count) reads the last
head instead and stores nothing: a select rather than a branch around the loads.

The grid is 2-D: ``blockIdx.x * blockDim.y + threadIdx.y`` is the token and ``blockIdx.y *
warps_per_block + warp`` the warp, so no thread divides by the number of heads (an integer
division is dozens of instructions, and at these sizes the instruction count, not DRAM, is what
a careless kernel runs out of first).  A block holds a row of warps for each of ``8 /
warps_per_block`` tokens, so blocks keep 8 warps even when a token needs only 2 (zimage's 30
head pairs: 64-thread blocks of one token reached 82% of the copy, 256-thread blocks of four
tokens 91%, same run).  Index arithmetic is 32-bit: numba widens ``uint32 op uint32`` to 64
bits, so every step is cast back (the launcher refuses buffers of 2**32 elements or more).

Frequencies come from a float32 table ``inv_freq[rotary_dim / 2]`` built on the host in float64
(YaRN blend included) rather than from an in-kernel ``pow``: the kernel is bound by memory and
the table (at most 1 KiB) stays in L1 after the first warp of a block reads it, so the lookup is
cheaper than ``lg2.approx`` + ``ex2.approx``; the frequency is then exact to float32 rounding
instead of carrying fast-math ``pow`` error that the angle multiplies by the position; and YaRN
costs the kernel nothing.  ``ropelab.kernels.freq_table`` makes the same choice for plain RoPE.

Long contexts (``cache=True``): the float32 angle ``position * inv_freq`` is off by up to
``angle * 2**-23`` rad, about 1e-2 at position 131072, and fast-math sin/cos add more.  The cache
kernel instead reads ``cos`` and ``sin`` from float32 tables ``[max_positions, rotary_dim / 2]``
computed in float64 on the host (YaRN blend included): exact to float32 rounding at every
position.  A position outside ``[0, max_positions)`` cannot be looked up: that token's Q and K
heads are written as NaN and the position is stored in the device error word (``errors[0]``),
which :func:`ropelab.check_errors` reads.

Storage dtypes: float32, float16, and bfloat16 as ``uint16`` bit patterns (see
:mod:`ropelab.bf16`); all arithmetic is float32 and shuffles carry float32 only.  Memory access
per lane, when ``qkv`` and both weights start on a 16-byte boundary: 16-bit storage moves as
32-bit words through 128-bit (or, when a lane holds 4 elements, 64-bit) vector accesses
(:mod:`ropelab.kernels.vec`) and :mod:`ropelab.kernels.words16` converts the words; float32 with
a multiple of 4 elements per lane uses 128-bit ``float4`` accesses.  Otherwise bfloat16 moves as
single 32-bit words of two elements, float32 and float16 one element at a time.  One kernel is
built per (head size, layout, storage, access width, heads per warp, lanes per head, cache) by
:func:`make_kernel`, because the number of registers a lane holds must be a compile-time
constant for them to stay in registers.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

import numpy as np
from numba import cuda, float32, uint32

from ..bf16 import load_bf16, pack2, store_bf16, unpack_high, unpack_low
from ..problem import FusedProblem
from ..validate import check_bool, check_int, fail
from ._device import FULL_MASK, WARP
from .plan import Plan, Variant
from .freq_table import MAX_CACHE_ENTRIES, cos_sin_cache
from .vec import load_f32x4, load_u32x2, load_u32x4, store_f32x4, store_u32x2, store_u32x4
from .words16 import CODECS

NAME = "fused_qknorm_rope"
SUMMARY = ("QK-RMSNorm + RoPE in place on packed qkv: a warp or half a warp per (token, head), "
           "shuffle-reduced sum of squares, one sin/cos per pair (or a float64-built cos/sin "
           "cache), NeoX pairs held whole by a lane (partners by shuffle for partial rotary), "
           "64/128-bit accesses, token rows in 8-warp blocks")
HEAD_DIMS = tuple(range(64, 513, 64))  # E = head_dim / 32 must be even (pairs stay in a lane)
STORAGES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
            "bfloat16": np.dtype(np.uint16)}
# Index arithmetic is 32-bit (uint32): a buffer must hold fewer elements than this.
MAX_ELEMENTS = 2**32 - 1

HEADS_PER_WARP_CHOICES = (1, 2, 4)
# Heads per warp by storage when the caller does not choose.  float32 is at 91-95% of the copy
# with one head per warp and 128-bit accesses (data/bench) and gains nothing from more; 16-bit
# storage needs two (see the module docstring).
HEADS_PER_WARP = {"float32": 1, "float16": 2, "bfloat16": 2}
LANES_PER_HEAD_CHOICES = (32, 16)
# Lanes per head by storage when a warp holds two or more heads and the caller does not choose:
# 16-bit storage splits the warp (a lane then holds 16 bytes of a 128-element head, one 128-bit
# access); float32 keeps whole warps, heads one after the other, as measured so far.
LANES_PER_HEAD = {"float32": 32, "float16": 16, "bfloat16": 16}

_LOG2 = {32: 5, 16: 4}


@cuda.jit(device=True, inline="always")
def _load_plain(v):
    return float32(v)


@cuda.jit(device=True, inline="always")
def _store_plain(v):
    return v  # float16 storage rounds on assignment (cvt.rn: round to nearest even)


_LOAD = {"float32": _load_plain, "float16": _load_plain, "bfloat16": load_bf16}
_STORE = {"float32": _store_plain, "float16": _store_plain, "bfloat16": store_bf16}


def vector_bytes_for(storage: str, elements_per_lane: int) -> int:
    """The widest vector access (16 or 8 bytes, 0 for none) that moves a lane's elements.

    A lane's first element sits at ``lane * elements_per_lane`` of a head, so the access size
    must divide the lane's bytes for every lane to stay aligned.  float32 keeps its 128-bit path
    only (no 64-bit one: it is at the copy rate already).
    """
    nbytes = elements_per_lane * STORAGES[storage].itemsize
    if nbytes % 16 == 0:
        return 16
    if nbytes % 8 == 0 and storage != "float32":
        return 8
    return 0


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, vector_bytes: int = 0,
                heads_per_warp: int = 1, lanes_per_head: int = 32, cos_sin_cache: bool = False,
                split: bool = False, full_rotary: bool = False):
    """The kernel function for one head size, pair layout, storage dtype and mapping (cached).

    ``vector_bytes`` (16, 8 or 0): each lane moves each of its runs of contiguous elements with
    accesses of that many bytes (:func:`vector_bytes_for`); ``qkv`` and, for 16-bit storage,
    both weights must then start on a 16-byte boundary, which the launcher checks before it
    picks a vector kernel.  0: bfloat16 as single 32-bit words, float32 and float16 one element
    at a time.

    ``heads_per_warp`` (1, 2 or 4) and ``lanes_per_head`` (32 or 16): see the module docstring.

    ``cos_sin_cache``: read cos/sin from float32 tables instead of computing them (long
    contexts); the kernel then takes the two tables and the error word instead of ``inv_freq``.

    ``split`` (NeoX only, with ``full_rotary``): a lane holds ``E / 2`` elements of each half of
    the head, so both elements of every pair sit in one lane: no shuffle, and one sin/cos per
    pair as in GPT-J.  Without it NeoX partners are fetched by shuffle.

    ``full_rotary``: ``rotary_dim == head_dim``, known when the kernel is built: no per-pair
    test, and the attention factor folds into the norm's scale (one multiply per head instead
    of two per pair).
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
    INV_HEAD_DIM = float32(1.0 / head_dim)  # a power of two: exact
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
    load = _LOAD[storage]
    store = _STORE[storage]
    low, high, pack = CODECS.get(storage, CODECS["bfloat16"])  # unused for float32

    # Index arithmetic: numba widens uint32 (op) uint32 to 64 bits; every step is cast back to
    # uint32 so that the code stays in 32-bit integer instructions (the launcher refuses
    # buffers of 2**32 elements or more).
    # ex: begin fused_kernel
    @cuda.jit(device=True, inline="always")
    def body(qkv, q_weight, k_weight, positions, table_a, table_b, errors, heads_q, heads_qk,
             heads_total, n_pairs, half_lanes, eps, attention_factor):
        # table_a / table_b: inv_freq twice, or the cos and sin caches; errors: the error word
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
            return
        row = uint32(token * heads_total)
        vals = cuda.local.array(SLOTS, float32)
        sums = cuda.local.array(ROUNDS, float32)
        bases = cuda.local.array(ROUNDS, uint32)  # each head's first item, for load and store

        # Phase 1: every load of every head this lane works on, before any arithmetic.  A head
        # past the end (an odd head count) reads the last head instead, works on it with the
        # others (its shuffles stay inside its own group) and stores nothing: a select, where a
        # branch around the loads would cost a divergence barrier and a second address.
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

        p = positions[token]
        prow = uint32(0)
        in_range = True
        if CACHE:
            # A negative position wraps to a huge unsigned row, so one compare checks both ends.
            prow = uint32(p)
            in_range = prow < uint32(table_a.shape[0])
            if not in_range:
                prow = uint32(0)  # read a valid row; the head is overwritten with NaN below
        pos = float32(p)

        # cos/sin of this lane's pairs depend on the token and the lane only: computed once and
        # shared by every head the lane works on.
        cs = cuda.local.array(PAIRS, float32)
        sn = cuda.local.array(PAIRS, float32)
        if IN_LANE:
            if FREQ4:
                for k in range(PAIRS // 4):
                    f0, f1, f2, f3 = load_f32x4(table_a, uint32(sub * uint32(PAIRS) + uint32(4 * k)))
                    freqs = (f0, f1, f2, f3)
                    for m in range(4):
                        angle = pos * freqs[m]
                        cs[4 * k + m] = math.cos(angle)
                        sn[4 * k + m] = math.sin(angle)
            else:
                for j in range(PAIRS):
                    # The compare in 32 bits; the index left as numba widens it (a sum that
                    # cannot wrap), so the compiler folds j into the load's address offset.
                    pair = sub * uint32(PAIRS) + uint32(j)
                    cs[j] = float32(1.0)
                    sn[j] = float32(0.0)
                    if FULL or uint32(pair) < n_pairs:  # partial rotary: later pairs only normalized
                        if CACHE:
                            cs[j] = table_a[prow, pair]
                            sn[j] = table_b[prow, pair]
                        else:
                            angle = pos * table_a[pair]
                            cs[j] = math.cos(angle)
                            sn[j] = math.sin(angle)

        for r in range(ROUNDS):
            head = uint32(head0 + uint32(r * GROUPS) + group)
            ss = sums[r]
            # ex: begin fused_butterfly
            # Butterfly: after the steps every lane holds the sum over its group's lanes.
            if not HALF_WARP:
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
            scale = float32(1.0) / math.sqrt(ss * INV_HEAD_DIM + eps)
            # ex: end fused_butterfly
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
                # Lanes [0, n) of a group hold first halves of pairs, [n, 2n) the second halves,
                # n = half_lanes; the partner is n lanes away inside the same group.
                first_half = sub < half_lanes
                rotated = sub < uint32(half_lanes + half_lanes)
                if first_half:
                    partner, pair0, sign = uint32(lane + half_lanes), uint32(sub * uint32(E)), float32(-1.0)
                elif rotated:
                    partner, pair0, sign = (uint32(lane - half_lanes),
                                            uint32((sub - half_lanes) * uint32(E)), float32(1.0))
                else:
                    partner, pair0, sign = lane, uint32(0), float32(0.0)
                for i in range(E):
                    other = cuda.shfl_sync(FULL_MASK, vals[r * E + i], partner)
                    if rotated:
                        if CACHE:
                            c = table_a[prow, pair0 + uint32(i)] * attention_factor
                            s = table_b[prow, pair0 + uint32(i)] * attention_factor
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
                                store_u32x4(qkv, uint32(first + uint32(k * STEP)),
                                            pack(vals[v], vals[v + 1]), pack(vals[v + 2], vals[v + 3]),
                                            pack(vals[v + 4], vals[v + 5]), pack(vals[v + 6], vals[v + 7]))
                            else:
                                store_u32x2(qkv, uint32(first + uint32(k * STEP)),
                                            pack(vals[v], vals[v + 1]), pack(vals[v + 2], vals[v + 3]))
                    elif PACKED:
                        for k in range(WORDS):
                            qkv[uint32(first + uint32(k))] = pack2(vals[o + 2 * k], vals[o + 2 * k + 1])
                    elif VEC4:
                        for k in range(QUADS):
                            store_f32x4(qkv, uint32(first + uint32(4 * k)), vals[o + 4 * k],
                                        vals[o + 4 * k + 1], vals[o + 4 * k + 2], vals[o + 4 * k + 3])
                    else:
                        for i in range(RUN):
                            qkv[uint32(first + uint32(i))] = store(vals[o + i])
    # ex: end fused_kernel

    if CACHE:
        def fused_qknorm_rope(qkv, q_weight, k_weight, positions, cos_table, sin_table, errors,
                              heads_q, heads_qk, heads_total, n_pairs, half_lanes, eps,
                              attention_factor):
            body(qkv, q_weight, k_weight, positions, cos_table, sin_table, errors, heads_q,
                 heads_qk, heads_total, n_pairs, half_lanes, eps, attention_factor)
    else:
        def fused_qknorm_rope(qkv, q_weight, k_weight, positions, inv_freq, heads_q, heads_qk,
                              heads_total, n_pairs, half_lanes, eps, attention_factor):
            # No cache, no error word: positions stands in for it and is never written.
            body(qkv, q_weight, k_weight, positions, inv_freq, inv_freq, positions, heads_q,
                 heads_qk, heads_total, n_pairs, half_lanes, eps, attention_factor)

    fused_qknorm_rope.__qualname__ = (
        f"fused_qknorm_rope_d{head_dim}_{'gptj' if interleave else 'neox'}_{storage}"
        f"{f'_v{vector_bytes * 8}' if vector_bytes else ''}"
        f"{f'_h{heads_per_warp}' if heads_per_warp > 1 else ''}{'_g16' if G == 16 else ''}"
        f"{'_split' if SPLIT else ''}{'_full' if FULL else ''}{'_cache' if CACHE else ''}")
    return fused_qknorm_rope


# The kernel the course shows: SGLang's production case (head_dim 128, interleaved, bfloat16)
# with the course's first mapping, one warp per head.
KERNEL = make_kernel(128, True, "bfloat16")


def pick_warps_per_block(head_groups: int) -> int:
    """Warps per token in a block: 8, 4, 2 or 1 with the fewest idle warps in the last block
    column (ties go to the larger; the block is filled with tokens, see :func:`launch_config`)."""
    best, waste_best = 8, None
    for w in (8, 4, 2, 1):
        waste = (-head_groups) % w / (head_groups + (-head_groups) % w)
        if waste_best is None or waste < waste_best - 1e-12:
            best, waste_best = w, waste
    return best


# Warps per block the launcher aims at: a block of 2 warps (zimage's 30 head pairs) is legal,
# but an SM then holds its limit of 32 blocks, and short blocks spend their time being launched
# and retired (the 2026-12-01 profile: 64-thread blocks at 82% of the copy).  Rows of warps
# for several tokens keep every block at 8 warps.
BLOCK_WARPS = 8


def launch_config(problem, warps_per_block=None, heads_per_warp=1, tokens_per_block=None):
    """``((token_blocks, head_blocks), (threads_x, tokens_per_block))``.

    ``blockIdx.x * blockDim.y + threadIdx.y`` is the token, ``blockIdx.y * warps_per_block +
    warp`` the warp within the token's heads.  By default a block has ``BLOCK_WARPS`` warps:
    ``8 / warps_per_block`` tokens (fewer when there are fewer tokens).
    """
    groups = -(-(problem.heads_q + problem.heads_k) // heads_per_warp)  # warps needed per token
    wpb = warps_per_block or pick_warps_per_block(groups)
    tpb = tokens_per_block or max(1, min(BLOCK_WARPS // wpb, problem.tokens))
    return (-(-problem.tokens // tpb), (groups + wpb - 1) // wpb), (wpb * WARP, tpb)


def scalar_args(problem, lanes_per_head: int = 32) -> tuple:
    """The scalar kernel arguments after the arrays, typed as the kernel wants them."""
    n_pairs = problem.rotary_dim // 2
    e = problem.head_dim // lanes_per_head
    half_lanes = 0 if problem.interleave else n_pairs // e
    return (np.uint32(problem.heads_q), np.uint32(problem.heads_q + problem.heads_k),
            np.uint32(problem.heads_q + problem.heads_k + problem.heads_v), np.uint32(n_pairs),
            np.uint32(half_lanes), np.float32(problem.eps), np.float32(problem.attention_factor))


def split_fits(interleave: bool, full_rotary: bool, storage: str) -> bool:
    """Where the split NeoX mapping applies: NeoX, every dim rotated, 16-bit storage (float32
    is memory-bound with the shuffles already).  The CUDA C++ twin follows the same rule."""
    return not interleave and full_rotary and storage != "float32"


def neox_split(problem, requested=None) -> bool:
    """Whether NeoX pairs are held whole by one lane (each lane takes ``E / 2`` elements of each
    half), by default where :func:`split_fits`.  ``requested=False`` keeps the shuffle mapping
    (the controlled comparison); ``True`` where it cannot apply is refused."""
    fits = split_fits(problem.interleave, problem.rotary_dim == problem.head_dim, problem.storage)
    if requested is None:
        return fits
    if check_bool("neox_split", requested) and not fits:
        fail("neox_split=True needs interleave=False, rotary_dim == head_dim and 16-bit storage")
    return bool(requested)


def neox_fits(problem, lanes_per_head: int, split: bool = False) -> bool:
    """Whether each half of the rotated dims fills whole lanes of a ``lanes_per_head`` group
    (always, when pairs are split across a lane's two runs)."""
    per_lane = problem.head_dim // lanes_per_head
    return problem.interleave or split or problem.rotary_dim % (2 * per_lane) == 0


def pick_lanes_per_head(problem, heads_per_warp: int, requested=None, split: bool = False) -> int:
    """Lanes per head: the caller's choice (checked) or the storage's default where it fits."""
    if requested is not None:
        lanes = check_int("lanes_per_head", requested)
        if lanes not in LANES_PER_HEAD_CHOICES:
            fail(f"lanes_per_head must be one of {LANES_PER_HEAD_CHOICES}, got {lanes}")
        if lanes * heads_per_warp < WARP:
            fail("lanes_per_head=16 puts two heads in a warp: it needs heads_per_warp >= 2")
        if not neox_fits(problem, lanes, split):
            fail(f"with interleave=False and lanes_per_head={lanes}, rotary_dim must be a "
                 f"multiple of {2 * problem.head_dim // lanes}; got {problem.rotary_dim}")
        return lanes
    lanes = LANES_PER_HEAD[problem.storage] if heads_per_warp > 1 else WARP
    return lanes if neox_fits(problem, lanes, split) else WARP


# The caller's arrays as the kernel sees them: qkv, q_weight, k_weight, positions.  bfloat16 qkv
# (uint16 bit patterns) is passed as uint32 words of two elements: half the loads and stores.
CALLER = {
    "float32": (np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.int32)),
    "float16": (np.dtype(np.float16), np.dtype(np.float16), np.dtype(np.float16), np.dtype(np.int32)),
    "bfloat16": (np.dtype(np.uint32), np.dtype(np.uint16), np.dtype(np.uint16), np.dtype(np.int32)),
}
OPTIONS = {"warps_per_block": None, "heads_per_warp": None, "lanes_per_head": None,
           "tokens_per_block": None, "neox_split": None, "cache": False, "max_positions": None}


@lru_cache(maxsize=16)
def _freq_table(freq_bytes: bytes) -> np.ndarray:
    """float32 frequencies, one array per distinct set (so the device copy is made once)."""
    return np.frombuffer(freq_bytes, dtype=np.float64).astype(np.float32)


@lru_cache(maxsize=4)
def cos_sin_tables(freq_bytes: bytes, max_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``cos`` and ``sin`` ``[max_positions, rotary_dim / 2]``, computed in float64.

    One pair of arrays per (frequencies, length), so the launcher uploads each once and every
    later call with the same frequencies and length reuses the device copy.
    """
    return cos_sin_cache(np.frombuffer(freq_bytes, dtype=np.float64), max_positions)


def cache_options(problem, options: dict) -> int | None:
    """``max_positions`` when ``cache=True`` (checked), else None."""
    use = check_bool("cache", options.get("cache", False))
    n = options.get("max_positions")
    if not use:
        if n is not None:
            fail("max_positions is the length of the cos/sin cache; pass cache=True with it")
        return None
    if n is None:
        fail("cache=True needs max_positions=N, the number of positions (0 .. N-1) to tabulate")
    n = check_int("max_positions", n, minimum=1)
    pairs = problem.rotary_dim // 2
    if n * pairs > MAX_CACHE_ENTRIES:
        fail(f"a cos/sin cache of {n} x {pairs} entries exceeds {MAX_CACHE_ENTRIES} "
             f"({MAX_CACHE_ENTRIES * 8 // 2**30} GiB for cos and sin)")
    return n


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """``threads`` is unused (the block is ``warps_per_block`` warps by ``tokens_per_block``);
    ``aligned``: ``qkv`` and both weights start on a 16-byte boundary (the vector accesses need
    it)."""
    hpw = options.get("heads_per_warp") or HEADS_PER_WARP[problem.storage]
    split = neox_split(problem, options.get("neox_split"))
    lanes = pick_lanes_per_head(problem, hpw, options.get("lanes_per_head"), split)
    max_positions = cache_options(problem, options)
    tpb = options.get("tokens_per_block")
    if tpb is not None:
        tpb = check_int("tokens_per_block", tpb, minimum=1, maximum=32)
    grid, block = launch_config(problem, options.get("warps_per_block"), hpw, tpb)
    if block[0] * block[1] > 1024:
        fail(f"a block of {block[0]} x {block[1]} threads exceeds CUDA's 1024")
    run = problem.head_dim // lanes // (2 if split else 1)  # contiguous elements a lane moves
    width = vector_bytes_for(problem.storage, run) if aligned else 0
    fn = make_kernel(problem.head_dim, problem.interleave, problem.storage, width, hpw, lanes,
                     max_positions is not None, split, problem.rotary_dim == problem.head_dim)
    freq_bytes = problem.inv_freq.tobytes()
    if max_positions is None:
        return Plan(fn, fastmath, grid, block, CALLER[problem.storage],
                    tables=(_freq_table(freq_bytes),), scalars=scalar_args(problem, lanes))
    return Plan(fn, fastmath, grid, block, CALLER[problem.storage],
                tables=cos_sin_tables(freq_bytes, max_positions),
                scalars=scalar_args(problem, lanes), errors=True, position_limit=max_positions,
                limit_reason=f"the cos/sin cache holds positions 0 .. {max_positions - 1} "
                             f"(max_positions={max_positions})")


def census_plans() -> list[Plan]:
    """What the PTX census compiles, all at head_dim 128: each storage at its default mapping in
    both layouts, bfloat16 NeoX with the shuffle mapping beside its default split one, bfloat16
    with one head per warp (the course's first mapping), and the cos/sin cache kernel of
    bfloat16."""
    out = []
    cases = [(st, None, inter, {}) for st in ("bfloat16", "float16", "float32")
             for inter in (True, False)]
    cases += [("bfloat16", None, False, {"neox_split": False}), ("bfloat16", 1, True, {}),
              ("bfloat16", None, True,
                                          {"cache": True, "max_positions": 16})]
    for storage, hpw, inter, extra in cases:
        p = FusedProblem(1, 1, 1, 1, 128, 128, inter, storage, 1e-6, 10000.0,
                         inv_freq=np.ones(64))
        out.append(plan(p, {"heads_per_warp": hpw, **extra}))
    return out


VARIANT = Variant(NAME, SUMMARY, frozenset(), plan, KERNEL, options=OPTIONS, census=census_plans)
