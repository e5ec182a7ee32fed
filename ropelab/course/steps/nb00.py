"""Notebook 00's ladder of graded steps (00_rope_in_one_notebook.ipynb).

The last step is the notebook's whole exercise.  Solutions and recorded wrong attempts:
``notebooks/solutions/00_rope_in_one_notebook.py``.
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


def _cases_00(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        freq = freqs(hidden)
        theta = reference.angles(case.inputs["positions"], freq)
        n = tokens * hidden
        case.inputs.update(cos_t=np.cos(theta).astype(np.float32).ravel(),
                           sin_t=np.sin(theta).astype(np.float32).ravel(), n=np.int64(n))
        case.grid, case.block = (blocks(n),), (THREADS,)
        case.bytes_moved += 2 * case.inputs["cos_t"].nbytes
    return rope_cases("00-first-kernel", big, fill)


STEPS = [
    Step(
        id="00.1", alias="00-first-kernel", notebook="00_rope_in_one_notebook",
        kind="kernel",
        title="A first kernel: one thread per float, with a bounds guard",
        kernel_name="rotate_elements",
        task="skip threads past the end, then write out[i] from x, cos_t and sin_t",
        arguments=("x", "out", "cos_t", "sin_t", "n"),
        contract=("x, out: float32[tokens * hidden] (rows one after the other); "
                  "cos_t, sin_t: float32[tokens * hidden / 2], the cos and sin of "
                  "each pair's angle, in pair order; n: int64, the number of floats"),
        launch_text=f"grid ceil(n / {THREADS}) blocks of {THREADS} threads",
        signature="void(float32[::1], float32[::1], float32[::1], float32[::1], int64)",
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=signature_of(flat.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "ld_global", "st_global"),
        gates=(NO_F64,),
        make_cases=_cases_00,
        hint="an even i is the first float of pair i // 2: out[i] = x[i]*c - x[i+1]*s; an odd i "
             "is the second: out[i] = x[i-1]*s + x[i]*c",
        bounds_hint=ONE_THREAD_HINT,
    ),
]
