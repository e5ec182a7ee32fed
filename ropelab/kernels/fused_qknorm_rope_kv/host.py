"""The serving kernel's host side: its problem, mapping, arguments and tables, the
:class:`Plan` of one call, the census's plans and the ``Variant`` record."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...problem import MAX_THREADS_PER_BLOCK, FusedProblem
from ...validate import check_int, fail
from .._device import WARP
from ..freq_table import tables
from ..fused_qknorm_rope.host import cache_options
from ..fused_qknorm_rope.mapping import BLOCK_WARPS, neox_fits, neox_split, pick_warps_per_block
from ..plan import Plan, Variant
from .kernel import KERNEL, make_kernel

NAME = "fused_qknorm_rope_kv"
SUMMARY = ("QK-RMSNorm + RoPE of Q and K with K and V written into a paged KV cache at each "
           "token's slot (qkv's dtype or FP8 e4m3 with per-tensor scales), one launch: half a "
           "warp per head for 16-bit storage, V heads on warps of their own")


@dataclass(frozen=True)
class KVProblem:
    """One ``fused_qknorm_rope_kv`` call: the fused problem (heads, layout, frequencies) and
    what the caches add."""

    fused: FusedProblem
    capacity: int  # slots in each cache: num_blocks * block_size
    fp8: bool = False
    gemma: bool = False
    q_row: int = 0  # elements per row of the Q destination (qkv's row when in place)
    slot_dtype: str = "int64"  # slot_mapping as the kernel reads it (int32 or int64)
    k_scale: float = 1.0
    v_scale: float = 1.0


def lanes_per_head(fused: FusedProblem, split: bool) -> int:
    """16 lanes (two heads per warp, 16 bytes a lane at head_dim 128) for 16-bit storage where
    NeoX's halves fill whole lanes; 32 for float32 (one head per warp, ``float4``)."""
    if fused.storage == "float32":
        return WARP
    return 16 if neox_fits(fused, 16, split) else WARP


def warps_per_token(problem: KVProblem, lanes: int) -> tuple[int, int]:
    """(warps of Q and K heads, warps of V heads) per token."""
    hpw = WARP // lanes
    f = problem.fused
    return -(-(f.heads_q + f.heads_k) // hpw), -(-f.heads_v // hpw)


def launch_config(problem: KVProblem, lanes: int, warps_per_block=None, tokens_per_block=None):
    """``((token_blocks, warp_blocks), (threads_x, tokens_per_block))``: as the fused kernel's
    (:func:`ropelab.kernels.fused_qknorm_rope.launch_config`), over the Q/K warps and then the
    V warps of each token."""
    qk, v = warps_per_token(problem, lanes)
    wpb = warps_per_block or pick_warps_per_block(qk + v)
    tokens = max(problem.fused.tokens, 1)
    tpb = tokens_per_block or max(1, min(BLOCK_WARPS // wpb, tokens))
    return (-(-tokens // tpb), -(-(qk + v) // wpb)), (wpb * WARP, tpb)


def scalar_args(problem: KVProblem, lanes: int) -> tuple:
    f = problem.fused
    n_pairs = f.rotary_dim // 2
    half_lanes = 0 if f.interleave else n_pairs // (f.head_dim // lanes)
    qk_warps, _ = warps_per_token(problem, lanes)
    u = np.uint32
    return (u(f.heads_q), u(f.heads_q + f.heads_k), u(f.heads_q + f.heads_k + f.heads_v),
            u(qk_warps), u(f.heads_v), u(problem.q_row), u(n_pairs), u(half_lanes),
            np.float32(f.eps), np.float32(f.attention_factor), np.uint64(problem.capacity),
            np.float32(1.0 / problem.k_scale), np.float32(1.0 / problem.v_scale))


def caller_dtypes(problem: KVProblem, user_cache: bool) -> tuple:
    """The kernel's view of the caller's arrays: qkv, q destination, q_weight, k_weight,
    positions, slot_mapping, k_cache, v_cache (, cos_sin_cache).  16-bit storage and the FP8
    caches travel as ``uint16`` (two e4m3 bytes per element)."""
    storage = np.dtype(np.float32) if problem.fused.storage == "float32" else np.dtype(np.uint16)
    cache = np.dtype(np.uint16) if problem.fp8 else storage
    out = (storage, storage, storage, storage, np.dtype(np.int32), np.dtype(problem.slot_dtype),
           cache, cache)
    return out + ((np.dtype(np.float32),) if user_cache else ())


OPTIONS = {"warps_per_block": None, "tokens_per_block": None, "cache": False,
           "max_positions": None, "user_cache_rows": None}


def plan(problem: KVProblem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """``threads`` is unused; ``aligned`` must be True (the op refuses device arrays that do not
    start on a 16-byte boundary; host arrays are copied to aligned buffers)."""
    if not aligned:
        fail("the serving kernel needs every array on a 16-byte boundary")
    f = problem.fused
    split = neox_split(f)
    lanes = lanes_per_head(f, split)
    max_positions = cache_options(f, options)
    user_rows = options.get("user_cache_rows")
    tpb = options.get("tokens_per_block")
    if tpb is not None:
        tpb = check_int("tokens_per_block", tpb, minimum=1, maximum=32)
    grid, block = launch_config(problem, lanes, options.get("warps_per_block"), tpb)
    if block[0] * block[1] > MAX_THREADS_PER_BLOCK:
        fail(f"a block of {block[0]} x {block[1]} threads exceeds CUDA's {MAX_THREADS_PER_BLOCK}")
    table = max_positions is not None or user_rows is not None
    fn = make_kernel(f.head_dim, f.interleave, f.storage, lanes, table, split,
                     f.rotary_dim == f.head_dim, problem.fp8, problem.gemma)
    caller = caller_dtypes(problem, user_rows is not None)
    scalars = scalar_args(problem, lanes)
    if user_rows is not None:
        return Plan(fn, fastmath, grid, block, caller, scalars=scalars, errors=True,
                    position_limit=user_rows,
                    limit_reason=f"cos_sin_cache has rows for positions 0 .. {user_rows - 1}")
    freq_bytes = f.inv_freq.tobytes()
    if max_positions is None:
        return Plan(fn, fastmath, grid, block, caller, tables=tables("inv_freq", freq_bytes),
                    scalars=scalars, errors=True)
    return Plan(fn, fastmath, grid, block, caller,
                tables=tables("cos_sin_rows", freq_bytes, max_positions), scalars=scalars,
                errors=True, position_limit=max_positions,
                limit_reason=f"the cos/sin cache holds positions 0 .. {max_positions - 1} "
                             f"(max_positions={max_positions})")


def census_plans() -> list[Plan]:
    """What the PTX census compiles, at head_dim 128: bfloat16 GPT-J into a bfloat16 cache (the
    course's first build), bfloat16 NeoX (split) into an FP8 cache with int32 slots, float16
    GPT-J, float32 NeoX with partial rotary (partner shuffles) into FP8 with the Gemma norm, and
    bfloat16 NeoX with the caller's cos/sin cache into FP8."""
    cases = [("bfloat16", True, 128, False, False, "int64", {}),
             ("bfloat16", False, 128, True, False, "int32", {}),
             ("float16", True, 128, False, False, "int64", {}),
             ("float32", False, 64, True, True, "int64", {}),
             ("bfloat16", False, 128, True, False, "int64", {"user_cache_rows": 16})]
    out = []
    for storage, inter, rotary, fp8, gemma, slots, extra in cases:
        f = FusedProblem(1, 4, 2, 2, 128, rotary, inter, storage, 1e-6, 10000.0,
                         inv_freq=np.ones(rotary // 2))
        p = KVProblem(f, 16, fp8, gemma, 4 * 128, slots)
        out.append(plan(p, extra))
    return out


VARIANT = Variant(NAME, SUMMARY, frozenset(), plan, KERNEL, options=OPTIONS, census=census_plans)
