"""The host side of the fused QK-RMSNorm + RoPE backward (:mod:`.backward`): its grid, its
scalar arguments and tables, the plans of the main kernel and of the reduction, the census's
plans and the ``Variant`` record.

**What the forward saves: its input x.**  The autograd forward is out of place (the op returns
a new tensor), so autograd keeps ``x`` alive at no cost: nothing extra is written.  The
alternative, saving ``y`` and ``1/r`` per head, moves the same bytes in the backward (read
``dy`` and ``y``, write ``dx``) but needs ``n`` back from ``y``: an inverse rotation and a
division by ``w`` (undefined where a weight is 0), plus an extra 4-byte write per head in the
forward.  With ``x`` the backward recomputes ``r`` in registers (one butterfly, free next to
the memory traffic).  Bytes per token of forward + backward together: the forward reads and
writes the row (``2 * row``), the backward reads ``dy`` (the row), ``x`` (its Q and K) and
writes ``dx`` (the row): ``4 * row + QK`` bytes, the count the bench's copy roof uses.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...problem import FusedProblem
from ...target import SIMULATED
from .._device import WARP
from ..freq_table import tables
from ..plan import STORAGE_DTYPES, Plan, Variant, jitted
from .backward import KERNEL, KERNEL_VIEW, UNITS_PER_PASS, WARPS_PER_BLOCK, make_kernel
from .backward_reduce import REDUCE_PHASES, make_reduce

NAME = "fused_qknorm_rope_backward"
DW_MODES = ("two_stage", "atomic")
# The grid is as many blocks as the GPU holds at once, one wave: a second, partial wave would
# leave most SMs idle while it runs (every block has the same work), and more blocks only
# lengthen the partial sums.  On a GPU the driver's occupancy of the compiled build says how many
# that is (its registers decide it); without one (the simulator, a plan made for compiling only)
# this table stands in: blocks of 256 threads an SM, by units a pass and head_dim, from the
# registers nvJitLink (CUDA 13, sm_90) gives the builds, the most of both layouts and storages:
# one unit a pass, 48 at head_dim 128 (5 x 256 x 48 <= 65536), 55 at 64, 90 at 192 and 256;
# two, 69 at 128 (3 blocks; 64 in bfloat16, 4); three, 80 at 128.  Shared memory (8 warps x 2 x
# head_dim floats) never binds first.
BLOCKS_PER_SM = {1: {64: 4, 128: 5, 192: 2, 256: 2}, 2: {64: 3, 128: 3, 192: 2, 256: 2},
                 3: {64: 2, 128: 3, 192: 1, 256: 1}}
BLOCKS_PER_SM_FEWEST = 1  # head_dim 320 .. 512, four or more units a pass
H200_SMS = 132
MAX_BLOCKS = H200_SMS * BLOCKS_PER_SM[1][128]  # an H200 at head_dim 128, one unit a pass


def blocks_per_sm(head_dim: int = 128, units_per_pass: int = UNITS_PER_PASS) -> int:
    """:data:`BLOCKS_PER_SM` of a build (what an SM holds of it, without asking a GPU)."""
    return BLOCKS_PER_SM.get(units_per_pass, {}).get(head_dim, BLOCKS_PER_SM_FEWEST)


def default_max_blocks(plan: Plan, head_dim: int = 128,
                       units_per_pass: int = UNITS_PER_PASS) -> int:
    """One wave of ``plan``'s build on the current GPU (the driver's occupancy of the compiled
    kernel, for ``plan.block`` threads), or :func:`blocks_per_sm` on every SM of an H200
    without a GPU (the simulator, the driver-less census)."""
    if not SIMULATED:
        try:
            kernel = jitted(plan.kernel, plan.fastmath).compile(plan.argtypes())
            return max(1, int(kernel.max_cooperative_grid_blocks(plan.block)))
        except Exception:  # no driver: a plan made for compiling only
            pass
    return H200_SMS * blocks_per_sm(head_dim, units_per_pass)


def pick_blocks(units: int, warps_per_block: int, max_blocks: int) -> int:
    """One warp per unit up to ``max_blocks`` blocks, then the warps loop (grid stride)."""
    return max(1, min(max_blocks, -(-units // warps_per_block)))


def scalar_args(problem) -> tuple:
    return (np.uint32(problem.heads_q), np.uint32(problem.heads_q + problem.heads_k),
            np.uint32(problem.heads_q + problem.heads_k + problem.heads_v),
            np.uint32(problem.rotary_dim // 2), np.float32(problem.eps),
            np.float32(problem.attention_factor))


def plans(problem, *, dw_mode: str = "two_stage", fastmath: bool = True,
          warps_per_block: int = WARPS_PER_BLOCK, max_blocks: int | None = None,
          max_positions: int | None = None, user_cache: bool = False,
          aligned: bool = True, dw_storage: str = "float32",
          units_per_pass: int = UNITS_PER_PASS) -> tuple[Plan, Plan | None]:
    """The backward's plans: the main kernel and (two-stage) the reduction, or None (atomic).

    The main kernel's caller arrays: ``x, dy, dx, q_weight, k_weight`` (as
    :data:`KERNEL_VIEW`: 16-bit storage as uint32 words), ``positions``, then
    ``partial`` (two-stage, float32 ``[blocks * 2 * head_dim]``) or ``dw`` (atomic, float32
    ``[2 * head_dim]``, zeroed), then the user's ``cos_sin_cache`` when ``user_cache``.
    The reduction's: ``partial, dw``.  ``aligned``: the five storage arrays start on
    :data:`VECTOR_ALIGN` boundaries, so the kernel moves groups with vector accesses.
    ``dw_storage`` (two-stage): the reduction writes ``dw`` as float32, or in the weights'
    16-bit storage (:data:`~ropelab.kernels.plan.STORAGE_DTYPES`: bfloat16 as uint16 bits).
    ``units_per_pass``: the units each warp loads before it computes any (see the kernel).
    """
    if dw_mode not in DW_MODES:
        raise ValueError(f"dw_mode must be one of {DW_MODES}, got {dw_mode!r}")
    atomic = dw_mode == "atomic"
    if atomic and dw_storage != "float32":
        raise ValueError("the atomic mode adds into a float32 dw; a 16-bit dw needs two_stage")
    store = KERNEL_VIEW[problem.storage]
    units = problem.tokens * (problem.heads_q + problem.heads_k + problem.heads_v)
    caller = (store, store, store, store, store, np.dtype(np.int32), np.dtype(np.float32))
    use_cache = user_cache or max_positions is not None
    fn = make_kernel(problem.head_dim, problem.interleave, problem.storage, warps_per_block,
                     use_cache, atomic, aligned, units_per_pass)
    # The grid follows from the build's occupancy, so the plan is made first with one block.
    common = dict(grid=(1,), block=(warps_per_block * WARP,), scalars=scalar_args(problem))
    if user_cache:
        main = Plan(fn, fastmath, caller=caller + (np.dtype(np.float32),), errors=True, **common)
    elif max_positions is not None:
        main = Plan(fn, fastmath, caller=caller, errors=True,
                    tables=tables("cos_sin_rows", problem.inv_freq.tobytes(), max_positions),
                    position_limit=max_positions,
                    limit_reason=f"the cos/sin cache holds positions 0 .. {max_positions - 1}",
                    **common)
    else:
        main = Plan(fn, fastmath, caller=caller,
                    tables=tables("inv_freq", problem.inv_freq.tobytes()), **common)
    if max_blocks is None:
        max_blocks = default_max_blocks(main, problem.head_dim, units_per_pass)
    blocks = pick_blocks(units, warps_per_block, max_blocks)
    main = replace(main, grid=(blocks,))
    if atomic:
        return main, None
    phases = min(REDUCE_PHASES, blocks)
    reduce = Plan(make_reduce(phases, dw_storage), fastmath,
                  grid=(-(-2 * problem.head_dim // WARP),), block=(phases * WARP,),
                  caller=(np.dtype(np.float32), STORAGE_DTYPES[dw_storage]))
    return main, reduce


def partial_rows(plan: Plan) -> int:
    """Rows of the two-stage partial buffer: one per block of the main kernel."""
    return plan.grid[0]


def census_plans() -> list[Plan]:
    """What the PTX census compiles, all at head_dim 128 (4 tokens, 2 + 1 + 1 heads): the
    two-stage build of each storage in GPT-J and NeoX, bfloat16 NeoX's atomic build, bfloat16
    GPT-J's scalar (unaligned) build and its cos/sin cache build, and the 32-row reduction."""
    out = []
    cases = [(st, inter, "two_stage", {}) for st in ("bfloat16", "float16", "float32")
             for inter in (True, False)]
    cases += [("bfloat16", False, "atomic", {}), ("bfloat16", True, "two_stage", {"aligned": False}),
              ("bfloat16", True, "two_stage", {"max_positions": 16})]
    for storage, inter, mode, extra in cases:
        p = FusedProblem(4, 2, 1, 1, 128, 128, inter, storage, 1e-6, 1e4, inv_freq=np.ones(64))
        main, reduce = plans(p, dw_mode=mode, max_blocks=MAX_BLOCKS, **extra)
        out.append(main)
    p = FusedProblem(4096, 2, 1, 1, 128, 128, True, "bfloat16", 1e-6, 1e4, inv_freq=np.ones(64))
    out.append(plans(p, max_blocks=MAX_BLOCKS)[1])  # enough blocks for the 32-row reduction
    return out


def _main_plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """The main kernel's plan (the census and Variant interface; the public op, which also runs
    the reduction, is :func:`ropelab.ops.fused_backward.fused_qknorm_rope_backward`)."""
    return plans(problem, fastmath=fastmath, aligned=aligned, **options)[0]


VARIANT = Variant(NAME, "the fused QK-RMSNorm + RoPE backward (dx, dq_weight, dk_weight)",
                  frozenset(), _main_plan, KERNEL, census=census_plans)
