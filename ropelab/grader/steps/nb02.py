"""Notebook 02's ladder (02_block2d.ipynb): one block per token, no division.

02.1 one block per token, one thread per pair (2-D indexing: blockIdx.x is the token,
threadIdx.x the pair; the frequencies given) -> 02.2 block2d's stride loop (any row width,
whatever the block size; the notebook's old exercise, now from an empty body) -> 02.3 the
launch of that kernel for any shape, a row wider than 1024 pairs included (a block of more
than 1024 threads is illegal).  Solutions and recorded wrong attempts:
``notebooks/solutions/02_block2d.py``.
"""

from __future__ import annotations

import numpy as np

from ...kernels import block2d
from ..grading import Case, Gate
from .base import Step
from .cases import (base, BIG_SHAPE, NO_F64, ROPE_IN, SMALL_SHAPES, freqs, rng_for, rope_case,
                    rope_cases, signature_of)
from .contracts import blocks_exactly, threads_exactly
from ...cuda_limits import WARP

NOTEBOOK = "02_block2d"
BLOCK2D_THREADS = 32  # fewer threads than pairs (65 in the widest case): the loop must stride
# 02.2's widest case runs in blocks of 64: its loop steps by blockDim.x, whatever the block size
# (a kernel that steps by 32 writes pairs twice there; its timing case has blocks of 256)
BLOCK2D_OTHER = 64
WIDE = (2, 2600)  # 1,300 pairs a row: one thread per pair would need an illegal block

NO_DIVISION = Gate("int_divrem", "<=", 0, "the PTX has {got} integer div/rem instructions (the "
                   "goal: {limit}): blockIdx.x is the token and threadIdx.x the pair, no "
                   "division needed")


def _warps(n: int) -> int:
    """Threads for n work items, rounded up to whole warps."""
    return -(-n // WARP) * WARP


def _row_owner(tokens: int, n_pairs: int, threads: int) -> np.ndarray:
    """Block `token`, thread t writes pairs t, t + threads, ... of its row (both floats)."""
    pair = np.arange(n_pairs)
    owner = np.arange(tokens)[:, None] * threads + pair[None, :] % threads
    return np.repeat(owner, 2, axis=1).ravel()


def _cases_rows(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        n_pairs = hidden // 2
        case.inputs.update(inv_freq=freqs(hidden).astype(np.float32), n_pairs=np.int64(n_pairs))
        case.grid, case.block = (tokens,), (_warps(n_pairs),)
        case.owner = _row_owner(tokens, n_pairs, _warps(n_pairs))
        case.bytes_moved += 4 * n_pairs
    return rope_cases("02.1", big, fill)


def _cases_block2d(big: bool, shapes=SMALL_SHAPES, other_block: bool = True) -> list[Case]:
    rng = rng_for("02-block2d-stride")
    cases = []
    chosen = (BIG_SHAPE,) if big else shapes
    for at, (tokens, hidden) in enumerate(chosen):
        case = rope_case(tokens, hidden, rng, big=big)
        case.inputs.update(n_pairs=np.uint64(hidden // 2), base=np.float32(base()))
        threads = (256 if big else BLOCK2D_OTHER if other_block and at == len(chosen) - 1
                   else BLOCK2D_THREADS)
        case.grid, case.block = (tokens,), (threads,)
        case.owner = _row_owner(tokens, hidden // 2, case.block[0])
        cases.append(case)
    return cases


def _cases_launch(big: bool) -> list[Case]:
    return _cases_block2d(big, SMALL_SHAPES + (WIDE,), other_block=False)


MY_ROPE_BLOCK2D = Step(
    id="02.2", alias="02-block2d-stride", notebook=NOTEBOOK, kind="kernel",
    title="block2d's stride loop: every pair of a row, whatever the block size",
    kernel_name="my_rope_block2d",
    task="thread t of block `token` rotates pairs t, t + blockDim, t + 2 blockDim, ... of "
         "that token's row, computing each pair's frequency (a while loop: for a range() "
         "whose step is known only at run time Numba divides)",
    arguments=("x", "out", "positions", "n_pairs", "base"),
    contract=f"{ROPE_IN}; n_pairs: uint64 = hidden / 2; base: float32 = 10000",
    launch_text=(f"grid: one block per token, {BLOCK2D_THREADS} threads per block (fewer than "
                 "the pairs of the widest row, as 1024 threads are for 2048 pairs); the widest "
                 f"case has blocks of {BLOCK2D_OTHER}, and the GPU timing blocks of 256"),
    signature=signature_of(block2d.VARIANT),
    reference=("ropelab.kernels.block2d", "rope_block2d", None),
    reference_signature=signature_of(block2d.VARIANT),
    counters=("instructions", "int_divrem", "f64", "sincos", "pow"),
    gates=(NO_F64, NO_DIVISION),
    make_cases=_cases_block2d,
    ownership=("thread t of block token writes pairs t, t + blockDim.x, ... of that token's "
               "row"),
    hint="the loop runs while pair < n_pairs and steps by cuda.blockDim.x",
    bounds_hint="the loop ran past the row: stop while pair < n_pairs",
)

STEPS = [
    Step(
        id="02.1", notebook=NOTEBOOK, kind="kernel",
        title="One block per token, one thread per pair",
        kernel_name="rope_rows",
        task="token = blockIdx.x, pair = threadIdx.x; threads past the row do nothing; rotate "
             "by positions[token] * inv_freq[pair]",
        arguments=("x", "out", "positions", "inv_freq", "n_pairs"),
        contract=f"{ROPE_IN}; inv_freq: float32[n_pairs]; n_pairs: int64 = hidden / 2",
        launch_text="grid: one block per token; block: n_pairs threads rounded up to whole "
                    "warps (32, 32 and 96 for rows of 1, 5 and 65 pairs)",
        signature="void(float32[::1], float32[::1], int32[::1], float32[::1], int64)",
        reference=("ropelab.kernels.block2d", "rope_block2d", None),
        reference_signature=signature_of(block2d.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos"),
        gates=(NO_F64, NO_DIVISION),
        make_cases=_cases_rows,
        ownership="thread t of block token writes pair t of that token's row (both floats)",
        hint="the token's row starts at float 2 * token * n_pairs; pair p of it is floats "
             "row + 2p and row + 2p + 1",
        bounds_hint="a thread past the end of its row ran the body: the block is rounded up "
                    "to whole warps, so guard with pair < n_pairs",
        bounds_hints={"positions": "a token past the last one: the token is cuda.blockIdx.x "
                                   "(one block per token), not a global thread index"},
    ),
    MY_ROPE_BLOCK2D,
    Step(
        id="02.3", notebook=NOTEBOOK, kind="launch",
        title="The launch of block2d, rows wider than 1024 pairs included",
        kernel_name="launch_block2d",
        task="launch my_rope_block2d (step 02.2): one block per token, as many threads as "
             "pairs rounded up to whole warps, but never more than 1024",
        arguments=("x", "out", "positions", "n_pairs", "base"),
        contract="the arguments of my_rope_block2d, as device arrays and Python numbers (pass "
                 "them with its contract's types: numba.uint64(n_pairs), numba.float32(base)); "
                 "the tokens are positions.size",
        launch_text="yours: one block per token; threads = the row's pairs rounded up to whole "
                    "warps, capped at 1024; the last case has rows of 1,300 pairs",
        make_cases=_cases_launch,
        launch_rules=(
            blocks_exactly(lambda case: int(case.inputs["positions"].size),
                           "one block per token (positions.size)"),
            threads_exactly(lambda case: min(_warps(int(case.inputs["n_pairs"])), 1024),
                            "the row's pairs rounded up to whole warps, capped at 1024"),
        ),
        **MY_ROPE_BLOCK2D.launching(),
        hint="grid = positions.size (one block per token); threads = min(n_pairs rounded up "
             "to a multiple of 32, 1024): the stride loop does the rest",
        bounds_hint="a block past the last token: the grid is one block per token, "
                    "positions.size blocks",
        bounds_hints={"positions": "a block past the last token read positions[token]: the "
                                   "grid is one block per token, positions.size blocks"},
    ),
]
