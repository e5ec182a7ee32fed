"""The host side of :mod:`ropelab.kernels.rope_rows`: one call as a :class:`RowsProblem`, the
access width and mapping it gets, and its :class:`~ropelab.kernels.plan.Plan` (geometry, scalar
arguments, tables), with the ``Variant`` record the registry and the census read."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..validate import check_int, fail
from .freq_table import MAX_CACHE_ENTRIES, tables
from .plan import STORAGE_DTYPES as STORAGES, Plan, Variant
from .rope_rows import KERNEL, make_kernel

NAME = "rope_rows"
SUMMARY = ("plain RoPE on rows of heads: float32/float16/bfloat16, row strides, q and k in one "
           "launch, cos/sin once per lane for several heads, 64/128-bit accesses, inv_freq "
           "table or a [max_pos, rotary_dim] cos/sin cache")
HEADS_PER_THREAD = {"float32": 1, "float16": 2, "bfloat16": 2}
HEADS_PER_THREAD_CHOICES = (1, 2, 4)
BLOCK_THREADS = 256


@dataclass(frozen=True)
class RowsProblem:
    """One validated call: plain numbers, the float64 frequencies, row strides in elements."""

    tokens: int
    heads_q: int
    heads_k: int  # 0 for a single tensor
    head_dim: int
    rotary_dim: int
    interleave: bool
    storage: str
    q_in_row: int
    q_out_row: int
    k_in_row: int = 0
    k_out_row: int = 0
    inverse: bool = False
    attention_factor: float = 1.0
    in_place: bool = False  # out is x (one) or always (qk): pass-through lanes do nothing
    pair: bool = False  # the qk kernel (two arrays, in place) rather than x -> out
    freqs: np.ndarray = field(default=None, repr=False, compare=False)  # float64 [rotary_dim/2]

    @property
    def n_pairs(self) -> int:
        return self.rotary_dim // 2


def run_fits(problem, run: int) -> bool:
    """Whether lanes of ``2 * run`` elements tile every head with this layout."""
    if problem.head_dim % (2 * run):
        return False
    if problem.interleave:
        return True
    return problem.n_pairs % run == 0 and (problem.head_dim - problem.rotary_dim) % (2 * run) == 0


def pick_run(problem, aligned: bool, requested=None) -> tuple[int, int]:
    """(elements per run, vector bytes): the widest access that fits, else scalar accesses.

    ``aligned``: every array starts on a 16-byte boundary and every row stride is a multiple
    of 16 bytes (the host checks; vector accesses fault otherwise).
    """
    item = STORAGES[problem.storage].itemsize
    if requested is not None:
        run = check_int("run", requested, minimum=1, maximum=16)
        if not run_fits(problem, run):
            fail(f"run={run} does not tile head_dim {problem.head_dim} with rotary_dim "
                 f"{problem.rotary_dim} in this layout")
        width = 16 if run * item % 16 == 0 else 8 if run * item % 8 == 0 and item == 2 else 0
        return run, width if aligned else 0
    if aligned:
        # 16-bit storage: 64-bit runs of 4 elements first.  On the H200 they beat 128-bit runs of 8
        # through the public call (data/bench_rows, 2026-12-01 15:06: 95.1-95.9% of the copy
        # against 87.9-92.6%, on all three shapes); float32 keeps 128-bit runs of 4.
        for width in ((8, 16) if item == 2 else (16,)):
            run = width // item
            if run_fits(problem, run):
                return run, width
    for run in (4, 2, 1):
        if run_fits(problem, run):
            return run, 0
    raise AssertionError("run 1 always fits an even head_dim")  # pragma: no cover



OPTIONS = {"heads_per_thread": None, "run": None, "cache": False, "max_positions": None,
           "user_cache_rows": None}


def launch_config(problem, run: int, heads_per_thread: int):
    """``((token_blocks, row_blocks), (threads_x, tokens_per_block))``: blocks of about
    ``BLOCK_THREADS`` threads, several tokens per block when a token row is short."""
    lanes = problem.head_dim // (2 * run)
    groups = -(-(problem.heads_q + problem.heads_k) // heads_per_thread)
    row_threads = groups * lanes
    bx = min(-(-row_threads // 32) * 32, BLOCK_THREADS)
    ty = max(1, min(BLOCK_THREADS // bx, problem.tokens))
    return (-(-problem.tokens // ty), -(-row_threads // bx)), (bx, ty)


def caller_dtypes(problem, user_cache: bool) -> tuple:
    dt = STORAGES[problem.storage]
    arrays = (dt, dt, np.dtype(np.int32))
    return arrays + ((np.dtype(np.float32),) if user_cache else ())


def plan(problem: RowsProblem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """``aligned``: every array starts on a 16-byte boundary and every row stride is a multiple
    of 16 bytes.  ``options["user_cache_rows"]``: the caller passes a cos/sin cache of that many
    rows as its last array; ``cache=True, max_positions=N``: the host builds one."""
    hpt = options.get("heads_per_thread")
    hpt = HEADS_PER_THREAD[problem.storage] if hpt is None else check_int("heads_per_thread", hpt)
    if hpt not in HEADS_PER_THREAD_CHOICES:
        fail(f"heads_per_thread must be one of {HEADS_PER_THREAD_CHOICES}, got {hpt}")
    run, width = pick_run(problem, aligned, options.get("run"))
    user_rows = options.get("user_cache_rows")
    max_positions = None
    if options.get("cache"):
        max_positions = check_int("max_positions", options.get("max_positions"), minimum=1)
        if max_positions * problem.n_pairs > MAX_CACHE_ENTRIES:
            fail(f"a cos/sin cache of {max_positions} x {problem.n_pairs} entries exceeds "
                 f"{MAX_CACHE_ENTRIES}")
    use_cache = user_rows is not None or max_positions is not None
    grid, block = launch_config(problem, run, hpt)
    full = problem.rotary_dim == problem.head_dim
    fn = make_kernel(problem.head_dim, problem.interleave, problem.storage, run, width, hpt,
                     use_cache, full, problem.in_place or problem.pair, problem.pair)
    af = problem.attention_factor
    rows = user_rows if user_rows is not None else (max_positions or 0)
    u = np.uint32
    if problem.pair:
        strides = (u(problem.q_in_row), u(problem.k_in_row))
    else:
        strides = (u(problem.q_in_row), u(problem.q_out_row))
    scalars = (u(problem.heads_q), u(problem.heads_q + problem.heads_k), *strides,
               u(problem.n_pairs // run if not problem.interleave else 0), u(problem.n_pairs),
               u(rows), np.float32(af), np.float32(-af if problem.inverse else af))
    caller = caller_dtypes(problem, user_rows is not None)
    if user_rows is not None:
        return Plan(fn, fastmath, grid, block, caller, scalars=scalars, errors=True,
                    position_limit=user_rows,
                    limit_reason=f"cos_sin_cache has rows for positions 0 .. {user_rows - 1}")
    freq_bytes = problem.freqs.tobytes()
    if max_positions is not None:
        return Plan(fn, fastmath, grid, block, caller,
                    tables=tables("cos_sin_rows", freq_bytes, max_positions), scalars=scalars,
                    errors=True, position_limit=max_positions,
                    limit_reason=f"the cos/sin cache holds positions 0 .. {max_positions - 1} "
                                 f"(max_positions={max_positions})")
    return Plan(fn, fastmath, grid, block, caller, tables=tables("inv_freq", freq_bytes),
                scalars=scalars)


def census_plans() -> list[Plan]:
    """What the PTX census compiles, at head_dim 128: bfloat16 and float16 q+k in both layouts
    (the model case), bfloat16 x -> out, a user cache, and float32."""
    out = []
    for storage, inter, pair, extra in (
            ("bfloat16", True, True, {}), ("bfloat16", False, True, {}),
            ("float16", True, True, {}), ("bfloat16", True, False, {}),
            ("bfloat16", False, True, {"user_cache_rows": 16}), ("float32", True, False, {})):
        p = RowsProblem(1, 2, 1 if pair else 0, 128, 128, inter, storage, 256, 256, 128, 128,
                        in_place=pair, pair=pair, freqs=np.ones(64))
        out.append(plan(p, extra))
    return out


VARIANT = Variant(NAME, SUMMARY, frozenset(), plan, KERNEL, options=OPTIONS, census=census_plans)
