"""Notebook 05's ladder of graded steps (05_pair_sincos.ipynb).

The last step is the notebook's whole exercise.  Solutions and recorded wrong attempts:
``notebooks/solutions/05_pair_sincos.py``.
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


PAIRS_PER_THREAD = 4


def _first_slot_only(x, pos, hidden):
    """Every slot of a thread rotated with the frequency of the thread's first slot."""
    n_pairs = hidden // 2
    stride = -(-n_pairs // PAIRS_PER_THREAD)
    j = np.arange(n_pairs)
    slot_freqs = freqs(hidden)[j % stride]
    return [("every slot of this thread used the frequency of its first slot: multiply f by "
             "stride_ratio after each slot", reference.rope(x, pos, freqs=slot_freqs))]


def _cases_05(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        n_pairs = hidden // 2
        stride = -(-n_pairs // PAIRS_PER_THREAD)
        step = -2.0 / hidden
        total = tokens * stride
        case.inputs.update(n_pairs=np.uint64(n_pairs), stride=np.uint64(stride),
                           total_threads=np.int64(total), base=np.float32(BASE),
                           exponent_step=np.float32(step),
                           stride_ratio=np.float32(BASE ** (step * stride)))
        case.grid, case.block = (blocks(total),), (THREADS,)
    return rope_cases("05-strided-recurrence", big, fill, _first_slot_only)


STEPS = [
    Step(
        id="05.1", alias="05-strided-recurrence", notebook="05_pair_sincos",
        kind="kernel",
        title="Strided slots with one pow per thread",
        kernel_name="my_rope_strided",
        task="the loop over slots j, j + stride, ...: rotate, then step f and j",
        arguments=("x", "out", "positions", "n_pairs", "stride", "total_threads", "base",
                   "exponent_step", "stride_ratio"),
        contract=(f"{ROPE_IN}; n_pairs: uint64; stride: uint64 = ceil(n_pairs / "
                  f"{PAIRS_PER_THREAD}), threads per row; total_threads: int64 = tokens * stride; "
                  "base: float32; exponent_step: float32 = -2 / hidden; stride_ratio: float32 = "
                  "base ** (exponent_step * stride)"),
        launch_text=f"grid ceil(total_threads / {THREADS}) blocks of {THREADS} threads",
        signature=("void(float32[::1], float32[::1], int32[::1], uint64, uint64, int64, float32, "
                   "float32, float32)"),
        reference=("ropelab.kernels.pair_sincos", "rope_pair_sincos", None),
        reference_signature=signature_of(pair_sincos.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow", "pow_in_loop"),
        gates=(NO_F64, Gate("pow", "<=", 1, "the PTX has {got} pow (the goal: {limit} per "
                            "thread): after the first slot, f = f * stride_ratio"),
               Gate("pow_in_loop", "<=", 0, "math.pow runs inside the loop, once per slot "
                    "(the goal: once per thread, before the loop): step the frequency with "
                    "f = f * stride_ratio")),
        make_cases=_cases_05,
        hint="slot j has frequency f_j; slot j + stride has f_j * stride_ratio",
        bounds_hint="a slot past the row: loop while j < n_pairs",
    ),
]
