"""Notebook 06's ladder of graded steps (06_fused_qknorm_rope.ipynb).

The last step is the notebook's whole exercise.  Solutions and recorded wrong attempts:
``notebooks/solutions/06_fused_qknorm_rope.py``.
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


ROW = 64  # floats per row (one head): two per lane
WARPS_PER_BLOCK = 4


def _diagnose_rms(case: Case):
    expected = case.expected.reshape(-1, ROW)

    def diagnose(got, e):
        row = e // ROW
        ratio = got.reshape(-1, ROW)[row].astype(np.float64) / expected[row]
        lanes_ok = np.abs(ratio - 1.0).reshape(32, 2).max(axis=1) <= 1e-4
        if lanes_ok[0] and not lanes_ok[1:].any():
            return ("only lane 0 is right: its sum covers the whole row, the other lanes' do not "
                    "(shfl_down leaves the total in lane 0 only; shfl_xor_sync gives it to all)")
        if np.ptp(ratio) <= 1e-4 * abs(ratio.mean()):
            return ("every element of this row is off by the same factor: the lanes agree on a "
                    "wrong sum of squares, or the mean, eps or square root is wrong")
        return ("the lanes of this row ended with different sums: a butterfly step is missing or "
                "repeated (xor masks 16, 8, 4, 2, 1, each once, every lane taking part)")
    return diagnose


def _cases_06(big: bool) -> list[Case]:
    rng = rng_for("06-shuffle-rms")
    cases = []
    for rows in ((4096 * 16,) if big else (1, 6)):
        x = rng.standard_normal((rows, ROW)).astype(np.float32)
        weight = rng.uniform(0.5, 1.5, ROW).astype(np.float32)
        eps = np.float32(1e-6)
        expected = reference.rms_norm(x, weight, float(eps))
        case = Case(
            label=f"{rows} row{'s' if rows > 1 else ''} of {ROW}",
            inputs={"x": x.ravel(), "weight": weight, "rows": np.int64(rows), "eps": eps},
            grid=(blocks(rows, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
            expected=expected,
            tol=tolerance(float(np.abs(expected).max()), 0.0),
            locate=lambda e: f"row {e // ROW}, element {e % ROW} (lane {(e % ROW) // 2})",
            unit=lambda e: [e],
            bytes_moved=2 * x.nbytes,
        )
        case.diagnose = _diagnose_rms(case)
        cases.append(case)
    return cases


STEPS = [
    Step(
        id="06.1", alias="06-shuffle-rms", notebook="06_fused_qknorm_rope",
        kind="kernel",
        title="The shuffle butterfly of RMSNorm",
        kernel_name="my_rms_norm_warp",
        task="the butterfly: after it, every lane holds the sum of squares of the whole row",
        arguments=("x", "out", "weight", "rows", "eps"),
        contract=(f"x, out: float32[rows * {ROW}]; weight: float32[{ROW}]; rows: int64; "
                  "eps: float32 = 1e-6"),
        launch_text=(f"one warp per row of {ROW} floats (two per lane), {WARPS_PER_BLOCK} warps "
                     f"per block, grid ceil(rows / {WARPS_PER_BLOCK})"),
        signature="void(float32[::1], float32[::1], float32[::1], int64, float32)",
        reference=("ropelab.kernels.fused_qknorm_rope", "make_kernel", [ROW, True, "float32"]),
        reference_signature=signature_of(fused_qknorm_rope.VARIANT, {"heads_per_warp": 1}, FusedProblem(
            1, 1, 1, 1, ROW, ROW, True, "float32", 1e-6, 1e4, inv_freq=np.ones(ROW // 2))),
        counters=("instructions", "f64", "shfl", "ld_global", "st_global", "local_bytes"),
        gates=(NO_F64, Gate("shfl", ">=", 1, "the PTX has no warp shuffle: the exercise is "
                            "the shuffle butterfly (cuda.shfl_xor_sync)")),
        make_cases=_cases_06,
        hint="ss += cuda.shfl_xor_sync(0xFFFFFFFF, ss, m) for m = 16, 8, 4, 2, 1",
        bounds_hint=("a warp past the last row ran: return (the whole warp) when row >= rows"),
    ),
]
