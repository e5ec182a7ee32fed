"""The fused kernel's host side: its arguments, tables and options, the :class:`Plan` of one
call, the census's plans and the ``Variant`` record."""

from __future__ import annotations

import numpy as np

from ...problem import MAX_THREADS_PER_BLOCK, FusedProblem
from ...validate import check_bool, check_int, fail
from ..freq_table import MAX_CACHE_ENTRIES, tables
from ..plan import Plan, Variant
from .kernel import KERNEL, make_kernel
from .mapping import (HEADS_PER_WARP, launch_config, neox_split, pick_lanes_per_head,
                      vector_bytes_for)

NAME = "fused_qknorm_rope"
SUMMARY = ("QK-RMSNorm + RoPE in place on packed qkv: a warp or half a warp per (token, head), "
           "shuffle-reduced sum of squares, one sin/cos per pair (or a float64-built cos/sin "
           "cache), NeoX pairs held whole by a lane (partners by shuffle for partial rotary), "
           "64/128-bit accesses, token rows in 8-warp blocks")


def scalar_args(problem, lanes_per_head: int = 32) -> tuple:
    """The scalar kernel arguments after the arrays, typed as the kernel wants them."""
    n_pairs = problem.rotary_dim // 2
    e = problem.head_dim // lanes_per_head
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
OPTIONS = {"warps_per_block": None, "heads_per_warp": None, "lanes_per_head": None,
           "tokens_per_block": None, "neox_split": None, "cache": False, "max_positions": None,
           "user_cache_rows": None, "out_of_place": False}


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
    ``aligned``: ``qkv``, both weights (and ``out``) start on a 16-byte boundary (the vector
    accesses need it).  ``out_of_place=True``: the kernel that reads ``qkv`` and writes a
    separate ``out`` (its second array), V heads copied on warps of their own."""
    hpw = options.get("heads_per_warp") or HEADS_PER_WARP[problem.storage]
    split = neox_split(problem, options.get("neox_split"))
    lanes = pick_lanes_per_head(problem, hpw, options.get("lanes_per_head"), split)
    max_positions = cache_options(problem, options)
    user_rows = options.get("user_cache_rows")  # the caller passes cos_sin_cache
    tpb = options.get("tokens_per_block")
    if tpb is not None:
        tpb = check_int("tokens_per_block", tpb, minimum=1, maximum=32)
    out = check_bool("out_of_place", options.get("out_of_place", False))
    grid, block = launch_config(problem, options.get("warps_per_block"), hpw, tpb, out)
    if block[0] * block[1] > MAX_THREADS_PER_BLOCK:
        fail(f"a block of {block[0]} x {block[1]} threads exceeds CUDA's {MAX_THREADS_PER_BLOCK}")
    run = problem.head_dim // lanes // (2 if split else 1)  # contiguous elements a lane moves
    width = vector_bytes_for(problem.storage, run) if aligned else 0
    fn = make_kernel(problem.head_dim, problem.interleave, problem.storage, width, hpw, lanes,
                     max_positions is not None or user_rows is not None, split,
                     problem.rotary_dim == problem.head_dim, out,
                     16 if out and aligned else 0)
    caller = CALLER[problem.storage]
    if out:  # out, after qkv: the same layout
        caller = caller[:1] + caller
    if user_rows is not None:
        return Plan(fn, fastmath, grid, block, caller + (np.dtype(np.float32),),
                    scalars=scalar_args(problem, lanes), errors=True, position_limit=user_rows,
                    limit_reason=f"cos_sin_cache has rows for positions 0 .. {user_rows - 1}")
    freq_bytes = problem.inv_freq.tobytes()
    if max_positions is None:
        return Plan(fn, fastmath, grid, block, caller,
                    tables=tables("inv_freq", freq_bytes), scalars=scalar_args(problem, lanes))
    return Plan(fn, fastmath, grid, block, caller,
                tables=tables("cos_sin_rows", freq_bytes, max_positions),
                scalars=scalar_args(problem, lanes), errors=True, position_limit=max_positions,
                limit_reason=f"the cos/sin cache holds positions 0 .. {max_positions - 1} "
                             f"(max_positions={max_positions})")


def census_plans() -> list[Plan]:
    """What the PTX census compiles, all at head_dim 128: each storage at its default mapping in
    both layouts, bfloat16 NeoX with the shuffle mapping beside its default split one, bfloat16
    with one head per warp (the course's first mapping), the cos/sin cache kernel of bfloat16,
    and the out-of-place kernel (autograd's forward) of bfloat16 in both layouts and of
    float32 GPT-J."""
    out = []
    cases = [(st, None, inter, {}) for st in ("bfloat16", "float16", "float32")
             for inter in (True, False)]
    cases += [("bfloat16", None, False, {"neox_split": False}), ("bfloat16", 1, True, {}),
              ("bfloat16", None, True, {"cache": True, "max_positions": 16}),
              ("bfloat16", None, False, {"user_cache_rows": 16})]
    cases += [(st, None, inter, {"out_of_place": True})
              for st, inter in (("bfloat16", True), ("bfloat16", False), ("float32", True))]
    for storage, hpw, inter, extra in cases:
        p = FusedProblem(1, 1, 1, 1, 128, 128, inter, storage, 1e-6, 10000.0,
                         inv_freq=np.ones(64))
        out.append(plan(p, {"heads_per_warp": hpw, **extra}))
    return out


VARIANT = Variant(NAME, SUMMARY, frozenset(), plan, KERNEL, options=OPTIONS, census=census_plans)
