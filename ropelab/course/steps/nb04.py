"""Notebook 04's ladder of graded steps (04_freq_table_cache.ipynb).

The last step is the notebook's whole exercise.  Solutions and recorded wrong attempts:
``notebooks/solutions/04_freq_table_cache.py``.
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


def _cases_04(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        cos_c, sin_c = freq_table.cos_sin_cache(freqs(hidden), MAX_POSITION)
        total = tokens * hidden // 2
        case.inputs.update(cos_cache=cos_c, sin_cache=sin_c, n_pairs=np.uint64(hidden // 2),
                           total_pairs=np.int64(total))
        case.grid, case.block = (blocks(total),), (THREADS,)
        case.bytes_moved += 2 * 4 * total  # one cos and one sin read per pair
    return rope_cases("04-cache-lookup", big, fill)


STEPS = [
    Step(
        id="04.1", alias="04-cache-lookup", notebook="04_freq_table_cache",
        kind="kernel",
        title="The cos/sin cache lookup",
        kernel_name="my_rope_cache",
        task="read this pair's cos and sin from the caches at the token's position",
        arguments=("x", "out", "positions", "cos_cache", "sin_cache", "n_pairs", "total_pairs"),
        contract=(f"{ROPE_IN}; cos_cache, sin_cache: float32[{MAX_POSITION}, n_pairs], "
                  "cos/sin of position x frequency built in float64; n_pairs: uint64; "
                  "total_pairs: int64"),
        launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
        signature=("void(float32[::1], float32[::1], int32[::1], float32[:, ::1], "
                   "float32[:, ::1], uint64, int64)"),
        reference=("ropelab.kernels.freq_table", "rope_cos_sin_cache", None),
        reference_signature=signature_of(freq_table.VARIANT, {"cache": True, "max_positions": 16}),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow", "ld_global"),
        gates=(NO_F64, Gate("sincos", "<=", 0, "the PTX still has {got} sin/cos instructions "
                            "(the goal: {limit}): the cache holds them already"),
               Gate("pow", "<=", 0, "the PTX still computes {got} pow (the goal: {limit}): the "
                                    "cache holds cos and sin already")),
        make_cases=_cases_04,
        hint="c = cos_cache[positions[token], pair] and s = sin_cache[positions[token], pair]",
        bounds_hint=("an index past a cache's end: the row is the token's position "
                     "(positions[token]), the column the pair"),
    ),
]
