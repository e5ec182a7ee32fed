"""Notebook 01's ladder of graded steps (01_flat_divmod.ipynb).

The last step is the notebook's whole exercise.  Solutions and recorded wrong attempts:
``notebooks/solutions/01_flat_divmod.py``.
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


def _cases_01(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        total = tokens * hidden // 2
        case.inputs.update(n_pairs=np.uint64(hidden // 2), total_pairs=np.int64(total),
                           base=np.float32(BASE))
        case.grid, case.block = (blocks(total),), (THREADS,)
    return rope_cases("01-flat-index", big, fill)


STEPS = [
    Step(
        id="01.1", alias="01-flat-index", notebook="01_flat_divmod",
        kind="kernel",
        title="The flat kernel's index math and bounds guard",
        kernel_name="my_rope_flat",
        task="the guard, then the token and the pair of global thread idx, with one division",
        arguments=("x", "out", "positions", "n_pairs", "total_pairs", "base"),
        contract=(f"{ROPE_IN}; n_pairs: uint64 = hidden / 2; total_pairs: int64 = tokens * "
                  "n_pairs; base: float32 = 10000"),
        launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
        signature=signature_of(flat.VARIANT),
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=signature_of(flat.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow"),
        gates=(NO_F64, Gate("int_divrem", "<=", 2, "the PTX has {got} integer div/rem "
                            "instructions (the goal: {limit}: one unsigned division, which the "
                            "compiler emits as a 64-bit and a 32-bit path): a signed int64 // or "
                            "% costs a division with sign fix-ups; use uint64 index math and take "
                            "the pair as i - token * n_pairs")),
        forbid=(Forbid("%", "take the pair as i - token * n_pairs (one multiply and one "
                           "subtract, no second division)"),),
        make_cases=_cases_01,
        hint="token = i // n_pairs and pair = i - token * n_pairs, with i = uint64(idx)",
        bounds_hint=ONE_THREAD_HINT + " (idx < total_pairs)",
    ),
]
