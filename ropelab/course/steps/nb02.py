"""Notebook 02's ladder of graded steps (02_block2d.ipynb).

The last step is the notebook's whole exercise.  Solutions and recorded wrong attempts:
``notebooks/solutions/02_block2d.py``.
"""

from __future__ import annotations

import numpy as np

from ... import reference  # noqa: F401  (the cases' reference outputs)
from ...kernels import (block2d, flat, freq_table, fused_qknorm_rope,  # noqa: F401
                        pack4_scalar, pair_sincos)
from ...problem import FusedProblem  # noqa: F401
from ..grading import Case, Gate  # noqa: F401
from .base import Forbid, Step  # noqa: F401
from .cases import (BASE, MAX_POSITION, NO_F64, ONE_THREAD_HINT, ROPE_IN, THREADS,  # noqa: F401
                    blocks, freqs, rng_for, rope_cases, signature_of, tolerance)


BLOCK2D_THREADS = 32  # fewer threads than pairs (65 in the widest case): the loop must stride


def _cases_02(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        case.inputs.update(n_pairs=np.uint64(hidden // 2), base=np.float32(BASE))
        case.grid, case.block = (tokens,), ((256 if big else BLOCK2D_THREADS),)
    return rope_cases("02-block2d-stride", big, fill)


STEPS = [
    Step(
        id="02.1", alias="02-block2d-stride", notebook="02_block2d",
        kind="kernel",
        title="block2d's stride loop: every pair of a row, whatever the block size",
        kernel_name="my_rope_block2d",
        task="the loop over this thread's pairs: tid, tid + blockDim, tid + 2 blockDim, ...",
        arguments=("x", "out", "positions", "n_pairs", "base"),
        contract=f"{ROPE_IN}; n_pairs: uint64 = hidden / 2; base: float32 = 10000",
        launch_text=(f"grid: one block per token, {BLOCK2D_THREADS} threads per block (fewer than "
                     "the pairs of the widest row, as 1024 threads are for 2048 pairs)"),
        signature=signature_of(block2d.VARIANT),
        reference=("ropelab.kernels.block2d", "rope_block2d", None),
        reference_signature=signature_of(block2d.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow"),
        gates=(NO_F64, Gate("int_divrem", "<=", 0, "the PTX has {got} integer div/rem "
                            "instructions (the goal: {limit}): blockIdx.x is the token and "
                            "threadIdx.x the first pair, no division needed")),
        make_cases=_cases_02,
        hint="the loop runs while pair < n_pairs and steps by cuda.blockDim.x",
        bounds_hint="the loop ran past the row: stop while pair < n_pairs",
    ),
]
