"""The backward pass of the fused QK-RMSNorm + RoPE (issue 20): ``dx`` of every head and the
two weight gradients, from the forward's *input* ``x`` and the output's gradient ``dy``.

The math, per Q or K head of one token (``H = head_dim``)::

    forward                               backward
    r = sqrt(mean(x**2) + eps)            dz = R(theta)^T dy      (the inverse rotation, same
    n = x / r                                                       attention factor)
    z = n * w                             dw += dz * n            (summed over tokens and heads)
    y = R(theta) z   (rotary dims only)   dn = dz * w
                                          dx = (dn - n * mean(dn * n)) / r

Dims past ``rotary_dim`` are not rotated (``dz = dy`` there) and carry no attention factor,
exactly as in the forward kernel.  V heads pass ``dy`` through to ``dx`` unchanged.

**What the forward saves: its input x.**  The autograd forward is out of place (the op returns
a new tensor), so autograd keeps ``x`` alive at no cost: nothing extra is written.  The
alternative, saving ``y`` and ``1/r`` per head, moves the same bytes in the backward (read
``dy`` and ``y``, write ``dx``) but needs ``n`` back from ``y``: an inverse rotation and a
division by ``w`` (undefined where a weight is 0), plus an extra 4-byte write per head in the
forward.  With ``x`` the backward recomputes ``r`` in registers (one butterfly, free next to
the memory traffic).  Bytes per token of forward + backward together: the forward reads and
writes the row (``2 * row``), the backward reads ``dy`` (the row), ``x`` (its Q and K) and
writes ``dx`` (the row): ``4 * row + QK`` bytes, the count the bench's copy roof uses.

**Mapping.**  One warp per (token, head) "unit", in a grid-stride loop over units: a fixed grid
(``blocks``) so that the weight-gradient partial sums are ``blocks`` rows and no more.  Lane
``l`` holds pairs ``p = l + 32 k`` of the head (``k < H / 64``): GPT-J pair ``(2p, 2p+1)``;
NeoX rotated pair ``(p, p + rotary_dim/2)``; a pass-through pair (``p >= rotary_dim/2``, both
layouts) is ``(2p, 2p+1)``.  Every lane holds the same dims of every head it visits, so its
weight-gradient accumulators are a few registers per dim, kept over all its units.

**The weight gradient.**  At the end each block adds its warps' accumulators in shared memory
in a fixed order, then either writes one row of ``partial[blocks, 2 * H]`` (two-stage: a second
kernel, :func:`make_reduce_kernel`, sums the rows in a fixed order: bitwise the same result on
every run) or adds the row into ``dw[2 * H]`` with ``cuda.atomic.add`` (one launch fewer, but
the order in which blocks arrive changes the float32 rounding from run to run).  Columns
``[0, H)`` are ``dq_weight``, ``[H, 2H)`` are ``dk_weight``.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

import numpy as np
from numba import cuda, float32, uint32

from ..bf16 import load_bf16, store_bf16
from ._device import FULL_MASK, WARP
from .plan import Plan

NAME = "fused_qknorm_rope_backward"
STORAGES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
            "bfloat16": np.dtype(np.uint16)}
DW_MODES = ("two_stage", "atomic")
WARPS_PER_BLOCK = 8
# Enough blocks to fill an H200 once at 8 warps a block (132 SMs x 8 blocks of 256 threads);
# more would only lengthen the partial sums.  A plan option: the bench can sweep it.
MAX_BLOCKS = 1056
REDUCE_PHASES = 32  # the reduce kernel's rows per column: a block of 32 x 32 threads


@cuda.jit(device=True, inline="always")
def _load_plain(v):
    return float32(v)


@cuda.jit(device=True, inline="always")
def _store_plain(v):
    return v  # float16 storage rounds on assignment (round to nearest even)


_LOAD = {"float32": _load_plain, "float16": _load_plain, "bfloat16": load_bf16}
_STORE = {"float32": _store_plain, "float16": _store_plain, "bfloat16": store_bf16}


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, warps_per_block: int = WARPS_PER_BLOCK,
                cos_sin_cache: bool = False, atomic: bool = False):
    """The backward kernel for one head size, layout, storage and weight-gradient mode (cached).

    ``cos_sin_cache``: read cos/sin from a flat float32 table of rows ``[cos half | sin half]``
    (``rotary_dim`` wide; built on the host from the frequencies, or the caller's own) instead
    of computing them; a position without a row makes the head's ``dx`` and its share of the
    weight gradients NaN and is recorded in the error word, as in the forward.
    ``atomic``: the last argument is ``dw[2 * head_dim]`` (zeroed by the caller) and blocks add
    into it; otherwise it is ``partial[blocks * 2 * head_dim]``.
    """
    if head_dim % 64 or head_dim <= 0:
        raise ValueError(f"head_dim must be a positive multiple of 64, got {head_dim}")
    PAIRS = head_dim // 64  # pairs per lane
    SLOTS = 2 * PAIRS  # elements per lane
    HD = head_dim
    NQK = 2 * head_dim  # one row of partial sums: dq_weight then dk_weight
    WPB = int(warps_per_block)
    THREADS = WPB * WARP
    INV_HD = float32(1.0 / head_dim)  # a power of two over 64: exact
    INTERLEAVE = bool(interleave)
    CACHE = bool(cos_sin_cache)
    ATOMIC = bool(atomic)
    NAN = float32(math.nan)
    ZERO = float32(0.0)
    load = _LOAD[storage]
    store = _STORE[storage]

    # ex: begin backward_kernel
    @cuda.jit(device=True, inline="always")
    def body(x, dy, dx, q_weight, k_weight, positions, sums, table, errors, heads_q, heads_qk,
             heads_total, n_pairs, eps, attention_factor):
        tid = uint32(cuda.threadIdx.x)
        lane = tid & uint32(WARP - 1)
        warp_in_block = tid >> uint32(5)
        total_warps = uint32(cuda.gridDim.x) * uint32(WPB)
        units = uint32(positions.shape[0]) * heads_total

        # The lane's dims: the same in every head, so the dw accumulators stay in registers.
        dim_a = cuda.local.array(PAIRS, uint32)
        dim_b = cuda.local.array(PAIRS, uint32)
        for k in range(PAIRS):
            p = lane + uint32(WARP * k)
            if INTERLEAVE or p >= n_pairs:
                dim_a[k] = p + p
                dim_b[k] = p + p + uint32(1)
            else:  # NeoX rotated pair
                dim_a[k] = p
                dim_b[k] = p + n_pairs
        acc_q = cuda.local.array(SLOTS, float32)
        acc_k = cuda.local.array(SLOTS, float32)
        for i in range(SLOTS):
            acc_q[i] = ZERO
            acc_k[i] = ZERO
        n = cuda.local.array(SLOTS, float32)  # x / r, then reused
        dn = cuda.local.array(SLOTS, float32)

        unit = uint32(cuda.blockIdx.x) * uint32(WPB) + warp_in_block
        while unit < units:  # warp-uniform: every lane of a warp takes the same units
            token = unit // heads_total
            head = unit - token * heads_total
            first = unit * uint32(HD)  # the head's first element (rows are heads_total * HD)
            if head >= heads_qk:  # a V head: its gradient passes through
                for k in range(PAIRS):
                    dx[first + dim_a[k]] = dy[first + dim_a[k]]
                    dx[first + dim_b[k]] = dy[first + dim_b[k]]
                unit += total_warps
                continue
            ss = ZERO
            for k in range(PAIRS):
                a = load(x[first + dim_a[k]])
                b = load(x[first + dim_b[k]])
                n[2 * k] = a
                n[2 * k + 1] = b
                dn[2 * k] = load(dy[first + dim_a[k]])
                dn[2 * k + 1] = load(dy[first + dim_b[k]])
                ss += a * a
                ss += b * b
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
            inv_r = float32(1.0) / math.sqrt(ss * INV_HD + eps)

            pos = positions[token]
            row = uint32(0)
            in_range = True
            if CACHE:  # a negative position wraps to a huge row: one compare checks both ends
                row = uint32(pos)
                in_range = row < uint32(table.shape[0]) // (n_pairs + n_pairs)
                row = (row if in_range else uint32(0)) * (n_pairs + n_pairs)
            is_q = head < heads_q
            dot = ZERO
            for k in range(PAIRS):
                p = lane + uint32(WARP * k)
                ga = dn[2 * k]
                gb = dn[2 * k + 1]
                if p < n_pairs:  # dz = R^T dy: rotate back by -theta, same attention factor
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
                    za = ga * c + gb * s
                    zb = gb * c - ga * s
                else:
                    za = ga
                    zb = gb
                na = n[2 * k] * inv_r
                nb = n[2 * k + 1] * inv_r
                n[2 * k] = na
                n[2 * k + 1] = nb
                if is_q:
                    acc_q[2 * k] += za * na
                    acc_q[2 * k + 1] += zb * nb
                    wa = load(q_weight[dim_a[k]])
                    wb = load(q_weight[dim_b[k]])
                else:
                    acc_k[2 * k] += za * na
                    acc_k[2 * k + 1] += zb * nb
                    wa = load(k_weight[dim_a[k]])
                    wb = load(k_weight[dim_b[k]])
                da = za * wa
                db = zb * wb
                dn[2 * k] = da
                dn[2 * k + 1] = db
                dot += da * na
                dot += db * nb
            dot += cuda.shfl_xor_sync(FULL_MASK, dot, 16)
            dot += cuda.shfl_xor_sync(FULL_MASK, dot, 8)
            dot += cuda.shfl_xor_sync(FULL_MASK, dot, 4)
            dot += cuda.shfl_xor_sync(FULL_MASK, dot, 2)
            dot += cuda.shfl_xor_sync(FULL_MASK, dot, 1)
            mean = dot * INV_HD
            for k in range(PAIRS):
                dx[first + dim_a[k]] = store((dn[2 * k] - n[2 * k] * mean) * inv_r)
                dx[first + dim_b[k]] = store((dn[2 * k + 1] - n[2 * k + 1] * mean) * inv_r)
            if CACHE and not in_range and lane == uint32(0):
                errors[0] = pos
            unit += total_warps

        # ex: begin backward_block_sum
        # The block's warps add their accumulators in shared memory, warp 0 first: a fixed
        # order, so the block's row does not depend on which warp finished first.
        block_sums = cuda.shared.array((WPB, NQK), float32)
        for k in range(PAIRS):
            block_sums[warp_in_block, dim_a[k]] = acc_q[2 * k]
            block_sums[warp_in_block, dim_b[k]] = acc_q[2 * k + 1]
            block_sums[warp_in_block, HD + dim_a[k]] = acc_k[2 * k]
            block_sums[warp_in_block, HD + dim_b[k]] = acc_k[2 * k + 1]
        cuda.syncthreads()
        col = tid
        while col < uint32(NQK):
            total = ZERO
            for w in range(WPB):
                total += block_sums[w, col]
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
        f"_w{WPB}{'_cache' if CACHE else ''}{'_atomic' if ATOMIC else ''}")
    return fused_qknorm_rope_backward


# ex: begin backward_reduce
def reduce_partials(partial, dw):
    """Second stage: ``dw[c] = sum over blocks b of partial[b * len(dw) + c]``, in a fixed order.

    A block of 32 x 32 threads takes 32 neighbouring columns (coalesced reads); thread row ``t``
    sums rows ``t, t + 32, ...`` and thread row 0 adds the 32 results in order.  Nothing depends
    on timing, so every run gives the same bits.
    """
    width = uint32(dw.shape[0])
    rows = uint32(partial.shape[0]) // width
    lane = uint32(cuda.threadIdx.x) & uint32(WARP - 1)
    phase = uint32(cuda.threadIdx.x) >> uint32(5)
    col = uint32(cuda.blockIdx.x) * uint32(WARP) + lane
    phase_sums = cuda.shared.array((REDUCE_PHASES, WARP), float32)
    total = float32(0.0)
    if col < width:
        b = phase
        while b < rows:
            total += partial[b * width + col]
            b += uint32(REDUCE_PHASES)
    phase_sums[phase, lane] = total
    cuda.syncthreads()
    if phase == uint32(0) and col < width:
        total = float32(0.0)
        for t in range(REDUCE_PHASES):
            total += phase_sums[t, lane]
        dw[col] = total
# ex: end backward_reduce


# ---- plans --------------------------------------------------------------------------------------

@lru_cache(maxsize=16)
def _freq_table(freq_bytes: bytes) -> np.ndarray:
    return np.frombuffer(freq_bytes, dtype=np.float64).astype(np.float32)


@lru_cache(maxsize=8)
def cos_sin_rows(freq_bytes: bytes, max_positions: int) -> np.ndarray:
    """The flat float32 cos/sin table ``[max_positions * rotary_dim]``, rows ``[cos | sin]``,
    computed in float64 (the forward's ``cache=True`` table, the same formula)."""
    freqs = np.frombuffer(freq_bytes, dtype=np.float64)
    angle = np.outer(np.arange(max_positions, dtype=np.float64), freqs)
    return np.concatenate([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32).reshape(-1)


def pick_blocks(units: int, warps_per_block: int, max_blocks: int) -> int:
    """One warp per unit up to ``max_blocks`` blocks, then the warps loop (grid stride)."""
    return max(1, min(max_blocks, -(-units // warps_per_block)))


def scalar_args(problem) -> tuple:
    return (np.uint32(problem.heads_q), np.uint32(problem.heads_q + problem.heads_k),
            np.uint32(problem.heads_q + problem.heads_k + problem.heads_v),
            np.uint32(problem.rotary_dim // 2), np.float32(problem.eps),
            np.float32(problem.attention_factor))


def plans(problem, *, dw_mode: str = "two_stage", fastmath: bool = True,
          warps_per_block: int = WARPS_PER_BLOCK, max_blocks: int = MAX_BLOCKS,
          max_positions: int | None = None, user_cache: bool = False) -> tuple[Plan, Plan | None]:
    """The backward's plans: the main kernel and (two-stage) the reduction, or None (atomic).

    The main kernel's caller arrays: ``x, dy, dx, q_weight, k_weight, positions`` then
    ``partial`` (two-stage, float32 ``[blocks * 2 * head_dim]``) or ``dw`` (atomic, float32
    ``[2 * head_dim]``, zeroed), then the user's ``cos_sin_cache`` when ``user_cache``.
    The reduction's: ``partial, dw``.
    """
    if dw_mode not in DW_MODES:
        raise ValueError(f"dw_mode must be one of {DW_MODES}, got {dw_mode!r}")
    atomic = dw_mode == "atomic"
    store = STORAGES[problem.storage]
    units = problem.tokens * (problem.heads_q + problem.heads_k + problem.heads_v)
    blocks = pick_blocks(units, warps_per_block, max_blocks)
    caller = (store, store, store, store, store, np.dtype(np.int32), np.dtype(np.float32))
    use_cache = user_cache or max_positions is not None
    fn = make_kernel(problem.head_dim, problem.interleave, problem.storage, warps_per_block,
                     use_cache, atomic)
    common = dict(grid=(blocks,), block=(warps_per_block * WARP,), scalars=scalar_args(problem))
    if user_cache:
        main = Plan(fn, fastmath, caller=caller + (np.dtype(np.float32),), errors=True, **common)
    elif max_positions is not None:
        main = Plan(fn, fastmath, caller=caller, errors=True,
                    tables=(cos_sin_rows(problem.inv_freq.tobytes(), max_positions),),
                    position_limit=max_positions,
                    limit_reason=f"the cos/sin cache holds positions 0 .. {max_positions - 1}",
                    **common)
    else:
        main = Plan(fn, fastmath, caller=caller, tables=(_freq_table(problem.inv_freq.tobytes()),),
                    **common)
    if atomic:
        return main, None
    reduce = Plan(reduce_partials, fastmath, grid=(-(-2 * problem.head_dim // WARP),),
                  block=(REDUCE_PHASES * WARP,), caller=(np.dtype(np.float32),) * 2)
    return main, reduce


def partial_rows(plan: Plan) -> int:
    """Rows of the two-stage partial buffer: one per block of the main kernel."""
    return plan.grid[0]


KERNEL = make_kernel(128, True, "bfloat16")
