"""Notebook 06's ladder of graded steps (06_fused_qknorm_rope.ipynb): norm and rotation fused.

1. RMSNorm of a 64-float head with a warp shuffle butterfly (the exercise this notebook had
   before);
2. a 256-float head, four warps to a row, whose sums meet in shared memory (a missing barrier
   is a race), from an empty body;
3. norm, then rotate, one head per warp, from an empty body;
4. the fused kernel over packed qkv rows: a warp per head, Q and K normalized with their own
   weights and rotated, V copied, from an empty body;
5. its launch: a warp per head of every token.

Solutions and recorded wrong attempts: ``notebooks/solutions/06_fused_qknorm_rope.py``.
"""

from __future__ import annotations

import numpy as np

from ... import reference
from ...kernels import fused_qknorm_rope
from ...problem import FusedProblem
from ...tolerance import max_angle
from ..grading import Case, Gate
from .base import Step
from .. import case_base
from .cases import (base, MAX_POSITION, NO_F64, blocks, butterfly_only, owner_of, rng_for, signature_of,
                    tolerance)
from .contracts import threads_multiple_of

NOTEBOOK = "06_fused_qknorm_rope"
ROW = 64  # floats per head in steps 1, 3-5: two per lane
WIDE_ROW = 256  # step 2: two floats per thread, 128 threads, four warps
WARPS_PER_BLOCK = 4
EPS = np.float32(1e-6)


def _eps():
    """The cases' eps: :data:`EPS`, or a check's fresh case's (:mod:`..case_base`)."""
    return case_base.eps(EPS)
HAS_SHUFFLE = Gate("shfl", ">=", 1, "the PTX has no warp shuffle: the sum of squares is the "
                                    "shuffle butterfly's (cuda.shfl_xor_sync)")
# 06.2's four warp sums meet by plain stores and a barrier, the pattern it teaches; an atomic
# add on shared memory gives the same total (in some order) without it.
SUMS_IN_SHARED = Gate("atomics_shared", "<=", 0, (
    "the warps' sums meet through an atomic add on shared memory ({got} in the PTX): the step "
    "asks lane 0 of "
    "warp w to store its sum in partial[w] (a plain store: each slot has one writer), then "
    "cuda.syncthreads(), then every thread adds the 4"))


def _reference_signature() -> str:
    """The signature of ropelab's fused kernel for one float32 head of 64 (the census's)."""
    return signature_of(fused_qknorm_rope.VARIANT, {"heads_per_warp": 1}, FusedProblem(
        1, 1, 1, 1, ROW, ROW, True, "float32", 1e-6, 1e4, inv_freq=np.ones(ROW // 2)))


_REFERENCE = ("ropelab.kernels.fused_qknorm_rope", "make_kernel", [ROW, True, "float32"])


def _ratio_diagnosis(expected: np.ndarray, width: int, group: int | None = None):
    """Explain a wrong row of ``width`` floats by the ratio got / expected; ``group``: the
    floats of one warp, when a row spans several warps."""
    rows = expected.reshape(-1, width)

    def diagnose(got, e):
        row = e // width
        ratio = got.reshape(-1, width)[row].astype(np.float64) / rows[row]
        if not np.isfinite(ratio).all():
            return None
        if np.ptp(ratio) <= 1e-4 * abs(ratio.mean()):
            return ("every element of this row is off by the same factor: the lanes agree on a "
                    "wrong sum of squares, or the mean (divide by the row's length), eps or "
                    "square root is wrong")
        if not group or width <= group:
            return None
        per_group = ratio.reshape(-1, group)
        if (np.ptp(per_group, axis=1) <= 1e-4 * np.abs(per_group.mean(axis=1))).all():
            return ("each warp of this row scaled by its own factor: each warp used its own sum "
                    "of squares; add the warps' sums through shared memory")
        return None
    return diagnose


def _rms_cases(step_id: str, width: int, big: bool, rows_small=(1, 6)) -> list[Case]:
    rng = rng_for(step_id)
    cases = []
    for rows in ((4096 * 16 * ROW // width,) if big else rows_small):
        x = rng.standard_normal((rows, width)).astype(np.float32)
        weight = rng.uniform(0.5, 1.5, width).astype(np.float32)
        expected = reference.rms_norm(x, weight, float(_eps()))
        case = Case(
            label=f"{rows} row{'s' if rows > 1 else ''} of {width}",
            inputs={"x": x.ravel(), "weight": weight, "rows": np.int64(rows), "eps": _eps()},
            grid=(blocks(rows, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
            expected=expected,
            tol=tolerance(float(np.abs(expected).max()), 0.0),
            locate=lambda e, w=width: f"row {e // w}, element {e % w} (thread {(e % w) // 2})",
            unit=lambda e: [e],
            bytes_moved=2 * x.nbytes,
            owner=owner_of(rows * width, 2),  # thread t of the grid holds floats 2t, 2t + 1
        )
        cases.append(case)
    return cases


def _diagnose_lanes(case: Case):
    """Step 1's diagnosis: which lanes hold the whole row's sum."""
    expected = case.expected.reshape(-1, ROW)
    fallback = _ratio_diagnosis(case.expected, ROW)

    def diagnose(got, e):
        row = e // ROW
        ratio = got.reshape(-1, ROW)[row].astype(np.float64) / expected[row]
        lanes_ok = np.abs(ratio - 1.0).reshape(32, 2).max(axis=1) <= 1e-4
        if lanes_ok[0] and not lanes_ok[1:].any():
            return ("only lane 0 is right: its sum covers the whole row, the other lanes' do not "
                    "(shfl_down leaves the total in lane 0 only; shfl_xor_sync gives it to all)")
        found = fallback(got, e)
        if found:
            return found
        return ("the lanes of this row ended with different sums: a butterfly step is missing or "
                "repeated (xor masks 16, 8, 4, 2, 1, each once, every lane taking part)")
    return diagnose


def _cases_warp(big: bool) -> list[Case]:
    cases = _rms_cases("06-shuffle-rms", ROW, big)
    for case in cases:
        case.diagnose = _diagnose_lanes(case)
    return cases


def _cases_wide(big: bool) -> list[Case]:
    cases = _rms_cases("06.2", WIDE_ROW, big, rows_small=(1, 3))
    for case in cases:
        rows = int(case.inputs["rows"])
        case.grid, case.block = (rows,), (WIDE_ROW // 2,)
        case.diagnose = _ratio_diagnosis(case.expected, WIDE_ROW, ROW)
    return cases


# --- step 3: norm then rotate one head -------------------------------------------------------

def _cases_norm_rope(big: bool) -> list[Case]:
    rng = rng_for("06.3")
    cases = []
    for rows in ((4096 * 16,) if big else (1, 6)):
        x = rng.standard_normal((rows, ROW)).astype(np.float32)
        weight = rng.uniform(0.5, 1.5, ROW).astype(np.float32)
        pos = rng.integers(0, MAX_POSITION, rows).astype(np.int32)
        freq = reference.inv_freq(ROW, base())
        normed = reference.rms_norm(x, weight, float(_eps()))
        expected = reference.rope(normed, pos, base=base())
        alternatives = []
        if not big:
            rotated_first = reference.rope(x, pos, base=base())
            alternatives = [
                ("rotated before it was normalized: the weights must scale the normalized "
                 "floats, then the pair turns (norm, then rope)",
                 reference.rms_norm(rotated_first, weight, float(_eps()))),
                ("rotated by the row number instead of the token's position: read "
                 "positions[row]", reference.rope(normed, np.arange(rows), base=base())),
                ("normalized without the weight: multiply each float by weight[its index] "
                 "before rotating",
                 reference.rope(reference.rms_norm(x, np.ones(ROW), float(_eps())), pos,
                                base=base())),
                ("cos and sin are swapped", _swapped(normed, pos, freq)),
            ]
        case = Case(
            label=f"{rows} head{'s' if rows > 1 else ''} of {ROW}",
            inputs={"x": x.ravel(), "weight": weight, "positions": pos,
                    "inv_freq": freq.astype(np.float32), "rows": np.int64(rows), "eps": _eps()},
            grid=(blocks(rows, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
            expected=expected.ravel(),
            tol=tolerance(float(np.abs(expected).max()) * 2, max_angle(pos, freq)),
            locate=lambda e: f"row {e // ROW}, pair {(e % ROW) // 2} (lane {(e % ROW) // 2})",
            unit=lambda e: [e - e % 2, e - e % 2 + 1],
            alternatives=alternatives,
            bytes_moved=2 * x.nbytes,
            owner=owner_of(rows * ROW, 2),  # lane l of warp `row` holds floats 2l, 2l + 1
        )
        cases.append(case)
    return cases


def _swapped(x, pos, freq):
    theta = reference.angles(pos, freq)
    x0, x1 = x[:, 0::2], x[:, 1::2]
    out = np.empty(x.shape)
    out[:, 0::2] = x0 * np.sin(theta) - x1 * np.cos(theta)
    out[:, 1::2] = x0 * np.cos(theta) + x1 * np.sin(theta)
    return out


# --- steps 4 and 5: packed qkv rows ---------------------------------------------------------

QKV_SHAPES = ((1, 1, 1, 1), (3, 2, 1, 1), (5, 4, 2, 2))  # (tokens, Q heads, K heads, V heads)
# The launch's cases end with a token of 40 heads (Qwen-like 32 + 4 + 4): 1,280 threads, so a
# block of a thread per lane of every head of a token is a launch a GPU refuses, as the text says.
QKV_LAUNCH_SHAPES = QKV_SHAPES + ((1, 32, 4, 4),)
QKV_BIG_SHAPE = (8192, 16, 4, 4)


def _qkv_case(shape, rng, big: bool, launch: bool) -> Case:
    tokens, hq, hk, hv = shape
    heads = hq + hk + hv
    qkv = rng.standard_normal((tokens, heads * ROW)).astype(np.float32)
    q_weight = rng.uniform(0.5, 1.5, ROW).astype(np.float32)
    k_weight = rng.uniform(0.5, 1.5, ROW).astype(np.float32)
    pos = rng.integers(0, MAX_POSITION, tokens).astype(np.int32)
    freq = reference.inv_freq(ROW, base())

    def fused(qw, kw, hv_normed=0):
        # hv_normed V heads counted as K heads: what a kernel that normalizes V computes.
        out = reference.fused_qknorm_rope(qkv, num_heads_q=hq, num_heads_k=hk + hv_normed,
                                          num_heads_v=hv - hv_normed, head_dim=ROW, q_weight=qw,
                                          k_weight=kw, positions=pos, eps=float(_eps()),
                                          base=base())
        return out.ravel()

    expected = fused(q_weight, k_weight)
    alternatives = []
    if not big:
        alternatives = [
            ("V heads must be copied unchanged: only the Q and K heads (head < heads_q + "
             "heads_k) are normalized and rotated", fused(q_weight, k_weight, hv)),
            ("a K head was normalized with q_weight: K heads take k_weight",
             fused(q_weight, q_weight)),
            ("a Q head was normalized with k_weight: Q heads (head < heads_q) take q_weight",
             fused(k_weight, k_weight)),
        ]
    width = heads * ROW
    inputs = {"qkv": qkv.ravel(), "q_weight": q_weight, "k_weight": k_weight, "positions": pos,
              "inv_freq": freq.astype(np.float32), "eps": _eps()}
    if launch:  # the caller's host values
        inputs.update(tokens=tokens, heads_q=hq, heads_k=hk, heads_v=hv, eps=float(_eps()))
    else:
        inputs.update(heads_q=np.uint64(hq), heads_k=np.uint64(hk),
                      heads_per_token=np.uint64(heads), total_warps=np.int64(tokens * heads))
    return Case(
        label=f"{tokens} token{'s' if tokens > 1 else ''}, {hq}+{hk}+{hv} heads of {ROW}",
        inputs=inputs,
        grid=(blocks(tokens * heads, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
        expected=expected,
        tol=tolerance(float(np.abs(expected).max()) * 2, max_angle(pos, freq)),
        locate=lambda e: (f"token {e // width}, head {(e % width) // ROW} "
                          f"({'Q' if (e % width) // ROW < hq else 'K' if (e % width) // ROW < hq + hk else 'V'}), "
                          f"float {e % ROW}"),
        unit=lambda e: [e],
        alternatives=alternatives,
        bytes_moved=2 * qkv.nbytes,
        owner=owner_of(qkv.size, 2),  # warp w, lane l: floats 2l, 2l + 1 of head w
    )


def _cases_fused(big: bool) -> list[Case]:
    rng = rng_for("06.4")
    return [_qkv_case(s, rng, big, False) for s in ((QKV_BIG_SHAPE,) if big else QKV_SHAPES)]


def _cases_fused_launch(big: bool) -> list[Case]:
    rng = rng_for("06.5")
    return [_qkv_case(s, rng, big, True)
            for s in ((QKV_BIG_SHAPE,) if big else QKV_LAUNCH_SHAPES)]


_WARP_LAUNCH = (f"one warp per row of {ROW} floats (two per lane), {WARPS_PER_BLOCK} warps "
                f"per block, grid ceil(rows / {WARPS_PER_BLOCK})")

FUSED_HEAD = Step(
    id="06.4", notebook=NOTEBOOK, kind="kernel",
    title="The fused head: Q and K normalized and rotated, V copied",
    kernel_name="rope_fused_head",
    task=("warp w handles head w of the packed rows (token = w // heads_per_token): a Q "
          "head is normalized with q_weight, a K head with k_weight, both then rotated; a "
          "V head is copied"),
    arguments=("qkv", "out", "q_weight", "k_weight", "positions", "inv_freq", "heads_q",
               "heads_k", "heads_per_token", "total_warps", "eps"),
    contract=(f"qkv, out: float32[tokens * heads_per_token * {ROW}], each row [Q heads | "
              f"K heads | V heads]; q_weight, k_weight: float32[{ROW}]; positions: "
              f"int32[tokens]; inv_freq: float32[{ROW // 2}]; heads_q, heads_k, "
              "heads_per_token (Q + K + V): uint64; total_warps: int64 = tokens * "
              "heads_per_token; eps: float32"),
    launch_text=(f"one warp per head, {WARPS_PER_BLOCK} warps per block, grid "
                 f"ceil(total_warps / {WARPS_PER_BLOCK})"),
    signature=("void(float32[::1], float32[::1], float32[::1], float32[::1], int32[::1], "
               "float32[::1], uint64, uint64, uint64, int64, float32)"),
    reference=_REFERENCE,
    reference_signature=_reference_signature(),
    counters=("instructions", "int_divrem", "f64", "shfl", "sincos", "ld_global",
              "st_global"),
    gates=(NO_F64, HAS_SHUFFLE),
    make_cases=_cases_fused,
    ownership="lane l of warp w writes floats 2l and 2l + 1 of head w",
    hint=("head = w - token * heads_per_token; head < heads_q: Q; head < heads_q + heads_k: "
          "K; otherwise V, copied"),
    bounds_hint="a warp past the last head ran: return (the whole warp) when w >= total_warps",
    bounds_hints={"positions": "positions has one entry per token: token = w // "
                               "heads_per_token"},
)

STEPS = [
    Step(
        id="06.1", alias="06-shuffle-rms", notebook=NOTEBOOK, kind="kernel",
        title="The shuffle butterfly of RMSNorm",
        kernel_name="my_rms_norm_warp",
        task=("RMSNorm of a 64-float row per warp: each lane squares its two floats, the "
              "shuffle butterfly gives every lane the row's sum, then scale and weight"),
        arguments=("x", "out", "weight", "rows", "eps"),
        contract=(f"x, out: float32[rows * {ROW}]; weight: float32[{ROW}]; rows: int64; "
                  "eps: float32 = 1e-6"),
        launch_text=_WARP_LAUNCH,
        signature="void(float32[::1], float32[::1], float32[::1], int64, float32)",
        reference=_REFERENCE,
        reference_signature=_reference_signature(),
        counters=("instructions", "f64", "shfl", "ld_global", "st_global", "local_bytes"),
        gates=(NO_F64, HAS_SHUFFLE, butterfly_only("the row's sum of squares")),
        make_cases=_cases_warp,
        ownership="lane l of row r's warp writes floats 2l and 2l + 1 of row r",
        reads_own=("x",),  # the row's sum comes through the butterfly, not 64 loads a lane
        hint="ss += cuda.shfl_xor_sync(0xFFFFFFFF, ss, m) for m = 16, 8, 4, 2, 1",
        bounds_hint="a warp past the last row ran: return (the whole warp) when row >= rows",
    ),
    Step(
        id="06.2", notebook=NOTEBOOK, kind="kernel",
        title="A 256-float head: four warps, their sums meet in shared memory",
        kernel_name="rms_norm_256",
        task=("one block of 128 threads per row, two floats a thread: each warp reduces its "
              "64 floats with the butterfly, lane 0 of each warp stores the warp's sum in a "
              "shared array of 4, the block waits, every thread adds the 4 sums"),
        arguments=("x", "out", "weight", "rows", "eps"),
        contract=(f"x, out: float32[rows * {WIDE_ROW}]; weight: float32[{WIDE_ROW}]; rows: "
                  "int64; eps: float32 = 1e-6"),
        launch_text=f"grid: one block per row; {WIDE_ROW // 2} threads (4 warps) per block",
        signature="void(float32[::1], float32[::1], float32[::1], int64, float32)",
        reference=_REFERENCE,
        reference_signature=_reference_signature(),
        counters=("instructions", "f64", "shfl", "ld_global", "st_global"),
        gates=(NO_F64, HAS_SHUFFLE, butterfly_only("each warp's sum"), SUMS_IN_SHARED),
        shared=True,
        shared_reads_each=(4, "the 4 warp sums", (
            "after cuda.syncthreads(), total = partial[0] + partial[1] + partial[2] + "
            "partial[3] in every thread: one barrier, where a total one thread makes for the "
            "others needs a second")),
        make_cases=_cases_wide,
        ownership="thread t of block r writes floats 2t and 2t + 1 of row r",
        hint=("partial = cuda.shared.array(4, float32); lane 0 of warp w stores partial[w]; "
              "cuda.syncthreads(); total = partial[0] + ... + partial[3]; divide by 256"),
        bounds_hint="an index past the row: thread t holds floats 2t and 2t + 1 of its row",
    ),
    Step(
        id="06.3", notebook=NOTEBOOK, kind="kernel",
        title="Norm, then rotate: one head per warp",
        kernel_name="rms_rope_head",
        task=("one warp per head of 64 floats, lane l holding pair l (floats 2l, 2l + 1): "
              "RMS-normalize with the weight, then rotate the pair by positions[row] * "
              "inv_freq[l]"),
        arguments=("x", "out", "weight", "positions", "inv_freq", "rows", "eps"),
        contract=(f"x, out: float32[rows * {ROW}], one head per token; weight: float32[{ROW}]; "
                  f"positions: int32[rows]; inv_freq: float32[{ROW // 2}]; rows: int64; eps: "
                  "float32 = 1e-6"),
        launch_text=_WARP_LAUNCH,
        signature=("void(float32[::1], float32[::1], float32[::1], int32[::1], float32[::1], "
                   "int64, float32)"),
        reference=_REFERENCE,
        reference_signature=_reference_signature(),
        counters=("instructions", "f64", "shfl", "sincos", "ld_global", "st_global"),
        gates=(NO_F64, HAS_SHUFFLE),
        make_cases=_cases_norm_rope,
        ownership="lane l of row r's warp writes floats 2l and 2l + 1 of row r",
        hint=("a = a * scale * weight[2l], b = b * scale * weight[2l + 1], then angle = "
              "float32(positions[row]) * inv_freq[l]: out = (a c - b s, a s + b c)"),
        bounds_hint="a warp past the last row ran: return (the whole warp) when row >= rows",
    ),
    FUSED_HEAD,
    Step(
        id="06.5", notebook=NOTEBOOK, kind="launch",
        title="Launch the fused kernel: a warp per head of every token",
        kernel_name="launch_fused",
        task=("compute heads_per_token and total_warps, choose warps per block, and launch "
              "rope_fused_head with 32 threads per warp"),
        arguments=("qkv", "out", "q_weight", "k_weight", "positions", "inv_freq", "tokens",
                   "heads_q", "heads_k", "heads_v", "eps"),
        contract=("qkv, out, q_weight, k_weight, positions, inv_freq: device arrays as in step "
                  "06.4; tokens, heads_q, heads_k, heads_v: int; eps: float; the kernel wants "
                  "step 06.4's types (uint64 head counts, int64 total_warps, float32 eps)"),
        launch_text=("tokens * (heads_q + heads_k + heads_v) warps of 32 threads, at most 1024 "
                     "threads a block, no block wholly idle; the last case is one token of 40 "
                     "heads (32 + 4 + 4)"),
        make_cases=_cases_fused_launch,
        launch_rules=(threads_multiple_of(32),),
        **FUSED_HEAD.launching(owned=True),  # "a warp per head": held to 06.4's ownership
        hint="blocks = ceil(total_warps / warps_per_block), threads = 32 * warps_per_block",
        bounds_hint="a launch argument is off: total_warps counts every head of every token",
    ),
]
