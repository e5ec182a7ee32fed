"""Fused QK-RMSNorm + RoPE, in place on a packed ``qkv`` buffer (SGLang's ``fused_qknorm_rope``).

``qkv`` is ``[tokens, (heads_q + heads_k + heads_v) * head_dim]``, each row ``[Q | K | V]``.  For
every token and every Q and K head: RMSNorm over ``head_dim`` in float32 (``x * rsqrt(mean(x**2)
+ eps) * weight``, one weight vector for all Q heads and one for all K heads), then RoPE on the
first ``rotary_dim`` dims, written back where it came from.  V is never read nor written.

Mapping: one warp per (token, head).  Lane ``l`` holds the ``E = head_dim / 32`` contiguous
elements ``l*E .. l*E + E-1`` in registers, so a head is read once and written once.

* RMSNorm: each lane sums its squares; a ``shfl_xor_sync`` butterfly (16, 8, 4, 2, 1) leaves the
  whole head's sum in every lane, with no shared memory and no ``syncthreads``.
* Interleaved RoPE (GPT-J): ``E`` is even, so pair ``(2k, 2k+1)`` never straddles two lanes; each
  pair costs one frequency lookup and one sin/cos, shared by its two elements (the point of
  SGLang PR 21654).
* Half-split RoPE (NeoX): element ``d`` pairs with ``d + rotary_dim/2``, which lives
  ``half_lanes = rotary_dim / (2E)`` lanes away in the same register slot: one ``shfl_sync`` per
  slot fetches the partner.  Every lane of the warp takes part in every shuffle (lanes outside
  the rotated range read themselves), so the calls are warp-uniform.  This needs
  ``rotary_dim`` to be a multiple of ``2E``; the public API says so when it is not.

The grid is 2-D: ``blockIdx.x`` is the token and ``blockIdx.y * warps_per_block + warp`` the
head, so no thread divides by the number of heads (an integer division is dozens of
instructions, and at these sizes the instruction count, not DRAM, is what a careless kernel runs
out of first).  ``x`` may be as large as CUDA's 2**31 - 1 blocks; ``y`` stays small.

Frequencies come from a float32 table ``inv_freq[rotary_dim / 2]`` built on the host in float64
(YaRN blend included) rather than from an in-kernel ``pow``: the kernel is bound by memory and
the table (at most 1 KiB) stays in L1 after the first warp of a block reads it, so the lookup is
cheaper than ``lg2.approx`` + ``ex2.approx``; the frequency is then exact to float32 rounding
instead of carrying fast-math ``pow`` error that the angle multiplies by the position; and YaRN
costs the kernel nothing.  ``ropelab.kernels.freq_table`` makes the same choice for plain RoPE.

Storage dtypes: float32, float16, and bfloat16 as ``uint16`` bit patterns (see
:mod:`ropelab.bf16`); all arithmetic is float32 and shuffles carry float32 only.  Memory access
per lane: bfloat16 moves as uint32 words of two elements; float32 with ``head_dim % 128 == 0``
and a 16-byte aligned buffer moves as 128-bit vectors (:mod:`ropelab.kernels.vec`); otherwise
one scalar access per element (float16 always: numba has no way to reinterpret bits as half).  One kernel is
built per (head_dim, layout, storage) by :func:`make_kernel`, because the number of registers a
lane holds must be a compile-time constant for them to stay in registers.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

import numpy as np
from numba import cuda, float32, uint32

from ..bf16 import load_bf16, pack2, store_bf16, unpack_high, unpack_low
from ..problem import FusedProblem
from ._device import FULL_MASK, WARP
from ._launch import Plan, Variant
from .vec import load_f32x4, store_f32x4

NAME = "fused_qknorm_rope"
SUMMARY = ("QK-RMSNorm + RoPE in place on packed qkv: warp per (token, head), shuffle-reduced "
           "sum of squares, one sin/cos per pair, NeoX partners by shuffle")
HEAD_DIMS = tuple(range(64, 513, 64))  # E = head_dim / 32 must be even (pairs stay in a lane)
STORAGES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
            "bfloat16": np.dtype(np.uint16)}
# Index arithmetic is 32-bit (uint32): a buffer must hold fewer elements than this.
MAX_ELEMENTS = 2**32 - 1

HEADS_PER_WARP_CHOICES = (1, 2, 4)
# Heads per warp by storage when the caller does not choose (see make_kernel's docstring).
# Measured on the H200 (data/bench): bfloat16 flux_1024 68% of the copy with one head per warp,
# 74% with two; float32 is at 94-95% with one head and gains nothing from more.
HEADS_PER_WARP = {"float32": 1, "float16": 2, "bfloat16": 2}


@cuda.jit(device=True, inline="always")
def _load_plain(v):
    return float32(v)


@cuda.jit(device=True, inline="always")
def _store_plain(v):
    return v  # float16 storage rounds on assignment (cvt.rn: round to nearest even)


_LOAD = {"float32": _load_plain, "float16": _load_plain, "bfloat16": load_bf16}
_STORE = {"float32": _store_plain, "float16": _store_plain, "bfloat16": store_bf16}


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, vector4: bool = False,
                heads_per_warp: int = 1):
    """The kernel function for one head size, pair layout and storage dtype (cached).

    ``vector4`` (float32 only, ``head_dim`` a multiple of 128): each lane moves its elements
    with 128-bit ``ld/st.global.v4.f32`` (:mod:`ropelab.kernels.vec`), which needs ``qkv`` to be
    16-byte aligned; the launcher picks it when it is.

    ``heads_per_warp`` (1, 2 or 4): a warp handles that many heads of one token, issuing all their
    loads before any arithmetic.  With 16-bit storage one head is only 256 bytes per warp: even a
    full SM does not keep enough bytes in flight to cover DRAM latency (Little's law), and the
    kernel stalls below the copy rate.  Two (four) heads per warp double (quadruple) the bytes in
    flight, at the price of more registers per lane.
    """
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if vector4 and (storage != "float32" or head_dim % 128):
        raise ValueError("vector4 needs float32 storage and head_dim a multiple of 128")
    if heads_per_warp not in HEADS_PER_WARP_CHOICES:
        raise ValueError(f"heads_per_warp must be one of {HEADS_PER_WARP_CHOICES}, got {heads_per_warp}")
    E = head_dim // WARP  # elements per lane, even
    PAIRS = E // 2  # interleaved pairs per lane
    INV_HEAD_DIM = float32(1.0 / head_dim)  # a power of two: exact
    INTERLEAVE = bool(interleave)
    # bfloat16 qkv arrives as uint32 words of two elements: half the loads and stores.
    PACKED = storage == "bfloat16"
    WORDS = E // 2
    VEC4 = bool(vector4)
    QUADS = E // 4
    HPW = int(heads_per_warp)
    SLOTS = E * HPW  # register slots per lane (local.array needs a plain constant)
    load = _LOAD[storage]
    store = _STORE[storage]

    # ex: begin fused_kernel
    def fused_qknorm_rope(qkv, q_weight, k_weight, positions, inv_freq, heads_q, heads_qk,
                          heads_total, n_pairs, half_lanes, eps, attention_factor):
        tid = uint32(cuda.threadIdx.x)
        lane = tid & uint32(WARP - 1)
        warp = uint32(cuda.blockIdx.y) * (uint32(cuda.blockDim.x) >> uint32(5)) + (tid >> uint32(5))
        head0 = warp * uint32(HPW)  # this warp's first head
        if head0 >= heads_qk:  # the last block column of a head count that is not a multiple
            return
        token = uint32(cuda.blockIdx.x)
        row = token * heads_total
        vals = cuda.local.array(SLOTS, float32)
        sums = cuda.local.array(HPW, float32)

        # Phase 1: every load of every head this warp owns, before any arithmetic.  (A head
        # count past the end only happens for the second head of the last warp: warp-uniform.)
        for h in range(HPW):
            ss = float32(0.0)
            if head0 + uint32(h) < heads_qk:
                first = (row + head0 + uint32(h)) * uint32(head_dim) + lane * uint32(E)
                if PACKED:
                    for k in range(WORDS):
                        word = qkv[(first >> uint32(1)) + uint32(k)]
                        lo = unpack_low(word)
                        hi = unpack_high(word)
                        vals[h * E + 2 * k] = lo
                        vals[h * E + 2 * k + 1] = hi
                        ss += lo * lo + hi * hi
                elif VEC4:
                    for k in range(QUADS):
                        a, b, c, d = load_f32x4(qkv, first + uint32(4 * k))
                        vals[h * E + 4 * k] = a
                        vals[h * E + 4 * k + 1] = b
                        vals[h * E + 4 * k + 2] = c
                        vals[h * E + 4 * k + 3] = d
                        ss += a * a + b * b + c * c + d * d
                else:
                    for i in range(E):
                        v = load(qkv[first + uint32(i)])
                        vals[h * E + i] = v
                        ss += v * v
            sums[h] = ss

        pos = float32(positions[token])
        for h in range(HPW):
            head = head0 + uint32(h)
            if head < heads_qk:
                ss = sums[h]
                # ex: begin fused_butterfly
                # Butterfly: after the five steps every lane holds the sum over all 32 lanes.
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
                scale = float32(1.0) / math.sqrt(ss * INV_HEAD_DIM + eps)
                # ex: end fused_butterfly
                weight = q_weight if head < heads_q else k_weight
                for i in range(E):
                    vals[h * E + i] = vals[h * E + i] * scale * load(weight[lane * uint32(E) + uint32(i)])

                # ex: begin fused_rope_gptj
                if INTERLEAVE:
                    for j in range(PAIRS):
                        pair = lane * uint32(PAIRS) + uint32(j)
                        if pair < n_pairs:  # partial rotary: later pairs are only normalized
                            angle = pos * inv_freq[pair]
                            c = math.cos(angle) * attention_factor
                            s = math.sin(angle) * attention_factor
                            x0 = vals[h * E + 2 * j]
                            x1 = vals[h * E + 2 * j + 1]
                            vals[h * E + 2 * j] = x0 * c - x1 * s
                            vals[h * E + 2 * j + 1] = x0 * s + x1 * c
                # ex: end fused_rope_gptj
                else:
                    # Lanes [0, n) hold first halves of pairs, [n, 2n) the second halves, n = half_lanes.
                    first_half = lane < half_lanes
                    rotated = lane < half_lanes + half_lanes
                    if first_half:
                        partner, pair0, sign = lane + half_lanes, lane * uint32(E), float32(-1.0)
                    elif rotated:
                        partner, pair0, sign = lane - half_lanes, (lane - half_lanes) * uint32(E), float32(1.0)
                    else:
                        partner, pair0, sign = lane, uint32(0), float32(0.0)
                    for i in range(E):
                        other = cuda.shfl_sync(FULL_MASK, vals[h * E + i], partner)
                        if rotated:
                            angle = pos * inv_freq[pair0 + uint32(i)]
                            c = math.cos(angle) * attention_factor
                            s = math.sin(angle) * attention_factor
                            # first half: x*c - partner*s; second half: partner*s + x*c
                            vals[h * E + i] = vals[h * E + i] * c + sign * other * s

                first = (row + head) * uint32(head_dim) + lane * uint32(E)
                if PACKED:
                    for k in range(WORDS):
                        qkv[(first >> uint32(1)) + uint32(k)] = pack2(vals[h * E + 2 * k],
                                                                    vals[h * E + 2 * k + 1])
                elif VEC4:
                    for k in range(QUADS):
                        store_f32x4(qkv, first + uint32(4 * k), vals[h * E + 4 * k],
                                    vals[h * E + 4 * k + 1], vals[h * E + 4 * k + 2],
                                    vals[h * E + 4 * k + 3])
                else:
                    for i in range(E):
                        qkv[first + uint32(i)] = store(vals[h * E + i])
    # ex: end fused_kernel

    fused_qknorm_rope.__qualname__ = (f"fused_qknorm_rope_d{head_dim}_{'gptj' if interleave else 'neox'}"
                                      f"_{storage}{'_v4' if vector4 else ''}"
                                      f"{f'_h{HPW}' if HPW > 1 else ''}")
    return fused_qknorm_rope


# The kernel the course shows: SGLang's production case (head_dim 128, interleaved, bfloat16).
KERNEL = make_kernel(128, True, "bfloat16")


def pick_warps_per_block(head_groups: int) -> int:
    """Warps per block: 8 or 4 (or 2) with the fewest idle warps in the last block column.

    Blocks of 2 warps still fill an H100/H200 SM (32 resident blocks x 2 warps = 64 warps).
    """
    best, waste_best = 8, None
    for w in (8, 4, 2):
        waste = (-head_groups) % w / (head_groups + (-head_groups) % w)
        if waste_best is None or waste < waste_best - 1e-12:
            best, waste_best = w, waste
    return best


def launch_config(problem, warps_per_block=None, heads_per_warp=1):
    """((tokens, head_blocks), threads): grid x is the token, grid y a group of heads."""
    groups = -(-(problem.heads_q + problem.heads_k) // heads_per_warp)  # warps needed per token
    wpb = warps_per_block or pick_warps_per_block(groups)
    return (problem.tokens, (groups + wpb - 1) // wpb), wpb * WARP


def scalar_args(problem) -> tuple:
    """The scalar kernel arguments after the arrays, typed as the kernel wants them."""
    n_pairs = problem.rotary_dim // 2
    e = problem.head_dim // WARP
    half_lanes = 0 if problem.interleave else n_pairs // e
    return (np.uint32(problem.heads_q), np.uint32(problem.heads_q + problem.heads_k),
            np.uint32(problem.heads_q + problem.heads_k + problem.heads_v), np.uint32(n_pairs),
            np.uint32(half_lanes), np.float32(problem.eps), np.float32(problem.attention_factor))


# The caller's arrays as the kernel sees them: qkv, q_weight, k_weight, positions.  bfloat16 qkv
# (uint16 bit patterns) is passed as uint32 words of two elements: half the loads and stores.
CALLER = {
    "float32": (np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.int32)),
    "float16": (np.dtype(np.float16), np.dtype(np.float16), np.dtype(np.float16), np.dtype(np.int32)),
    "bfloat16": (np.dtype(np.uint32), np.dtype(np.uint16), np.dtype(np.uint16), np.dtype(np.int32)),
}
OPTIONS = {"warps_per_block": None, "heads_per_warp": None}


@lru_cache(maxsize=16)
def _freq_table(freq_bytes: bytes) -> np.ndarray:
    """float32 frequencies, one array per distinct set (so the device copy is made once)."""
    return np.frombuffer(freq_bytes, dtype=np.float64).astype(np.float32)


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """``threads`` is unused (the block is ``warps_per_block`` warps); ``aligned``: qkv starts on
    a 16-byte boundary (float32's 128-bit path needs it)."""
    hpw = options.get("heads_per_warp") or HEADS_PER_WARP[problem.storage]
    grid, block = launch_config(problem, options.get("warps_per_block"), hpw)
    vector4 = problem.storage == "float32" and problem.head_dim % 128 == 0 and aligned
    fn = make_kernel(problem.head_dim, problem.interleave, problem.storage, vector4, hpw)
    return Plan(fn, fastmath, grid, block, CALLER[problem.storage],
                tables=(_freq_table(problem.inv_freq.tobytes()),), scalars=scalar_args(problem))


def census_plans() -> list[Plan]:
    """What the PTX census compiles: the production head size in both layouts, bfloat16 and
    float32 at their default heads per warp, and bfloat16 with one head per warp (the course's
    mapping)."""
    out = []
    for storage, hpw in (("bfloat16", None), ("float32", None), ("bfloat16", 1)):
        for inter in ((True, False) if hpw is None else (True,)):
            p = FusedProblem(1, 1, 1, 1, 128, 128, inter, storage, 1e-6, 10000.0,
                             inv_freq=np.ones(64))
            out.append(plan(p, {"heads_per_warp": hpw}))
    return out


VARIANT = Variant(NAME, SUMMARY, frozenset(), plan, KERNEL, options=OPTIONS, census=census_plans)
