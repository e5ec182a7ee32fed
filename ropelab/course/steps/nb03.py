"""Notebook 03's ladder of graded steps (03_pack4.ipynb).

The last step is the notebook's whole exercise.  Solutions and recorded wrong attempts:
``notebooks/solutions/03_pack4.py``.
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


def _cases_03(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        quads = (hidden // 2 + 1) // 2
        total = tokens * quads
        case.inputs.update(n_pairs=np.uint64(hidden // 2), quads_per_row=np.uint64(quads),
                           total_quads=np.int64(total), base=np.float32(BASE))
        case.grid, case.block = (blocks(total),), (THREADS,)
    return rope_cases("03-pack4-loads-first", big, fill)


STEPS = [
    Step(
        id="03.1", alias="03-pack4-loads-first", notebook="03_pack4",
        kind="kernel",
        title="pack4_scalar with every load before the first store",
        kernel_name="my_rope_pack4_scalar",
        task="reorder the body so both pairs are loaded before the first store to out",
        arguments=("x", "out", "positions", "n_pairs", "quads_per_row", "total_quads", "base"),
        contract=(f"{ROPE_IN}; n_pairs: uint64 = hidden / 2; quads_per_row: uint64 = "
                  "ceil(n_pairs / 2); total_quads: int64 = tokens * quads_per_row; base: float32"),
        launch_text=f"grid ceil(total_quads / {THREADS}) blocks of {THREADS} threads",
        signature=signature_of(pack4_scalar.VARIANT),
        reference=("ropelab.kernels.pack4", "rope_pack4_scalar", None),
        reference_signature=signature_of(pack4_scalar.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "ld_global", "st_global",
                  "loads_after_store"),
        gates=(NO_F64, Gate("loads_after_store", "<=", 0, "{got} global loads come after the "
                            "first store (the goal: {limit}): out may be x itself, so the second "
                            "pair's loads wait for the first pair's stores; load all four floats "
                            "first")),
        make_cases=_cases_03,
        hint="both pairs of a quad: elements i, i+1 and, when pair + 1 < n_pairs, i+2, i+3",
        bounds_hint=("the second pair of a row with an odd number of pairs does not exist: "
                     "load and store it only when pair + 1 < n_pairs"),
    ),
]
