"""Notebook 08's ladder of graded steps (08_backward_pass.ipynb): the backward pass, per head.

The forward of one Q or K head: ``r = sqrt(mean(x**2) + eps)``, ``n = x / r``, ``z = n * w``,
``y = R(theta) z``.  Its backward, one piece a step:

1. the inverse rotation, ``dz = R(theta)^T dy``, one warp per head of 64 floats, from an
   empty body;
2. the RMSNorm backward of one head, ``dx = (dn - n * mean(dn * n)) / r``: the mean is a warp
   reduction (shuffle butterfly), from an empty body;
3. the weight gradient's first stage: each block sums ``dz * n`` over its rows (every head of
   every token is a row) into a shared array, then writes one partial row; race-checked, from
   an empty body;
4. its launch: the partial rows of step 3, then one reduction of them into ``dw`` (stage two
   is given: ropelab's own ``reduce_partials``, compiled here as :data:`reduce_partials_kernel`).

The references are float64 NumPy written from the formulas above (the whole backward is
:func:`ropelab.reference.fused_qknorm_rope_backward`; a step grades one piece of it).
Solutions and recorded wrong attempts: ``notebooks/solutions/08_backward_pass.py``.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ...kernels.fused_qknorm_rope import backward_host
from ...kernels.fused_qknorm_rope.backward_reduce import make_reduce
from ...problem import FusedProblem
from ...tolerance import max_angle
from ..grading import Case, Gate
from .base import Step
from .cases import (BASE, MAX_POSITION, NO_F64, base, blocks, butterfly_only, owner_of, rng_for, signature_of,
                    tolerance)
from .contracts import (blocks_at_most, given_launch, reads_what_was_written,
                        threads_exactly)

NOTEBOOK = "08_backward_pass"
ROW = 64  # floats per head: two per lane of a warp
WARPS_PER_BLOCK = 4  # steps 1 and 2
GROUPS = 4  # step 3: a block of 4 groups of 64 threads, thread t owns column t % 64
PARTIAL_THREADS = GROUPS * ROW
EPS = 1e-6
# Step 08.4's stage two, given to the learner: the package's reduction (written once, in
# kernels/fused_qknorm_rope/backward.py), built for blocks of eight thread rows of 32 (the
# package's own launch uses up to REDUCE_PHASES; eight are plenty for the course's few dozen
# partial rows, and on the simulator every idle thread is a Python thread), compiled as a kernel
# the notebook can launch.
REDUCE_ROWS = 8
REDUCE_THREADS = REDUCE_ROWS * 32
reduce_partials_kernel = cuda.jit(fastmath=True)(make_reduce(REDUCE_ROWS))


# The census compares each step with ropelab's backward kernel for one float32 GPT-J head of 64
# (its scalar build: the vector one the package prefers differs only in its access widths).
_REFERENCE = ("ropelab.kernels.fused_qknorm_rope.backward", "make_kernel",
              [ROW, True, "float32"])
_REFERENCE_SIGNATURE = signature_of(backward_host.VARIANT, {}, FusedProblem(
    1, 1, 1, 1, ROW, ROW, True, "float32", EPS, BASE, inv_freq=np.ones(ROW // 2)))
_CENSUS = dict(reference=_REFERENCE, reference_signature=_REFERENCE_SIGNATURE)
HAS_SHUFFLE = Gate("shfl", ">=", 1, "the PTX has no warp shuffle: the sum of dn * n over the "
                                    "head is the shuffle butterfly's (cuda.shfl_xor_sync)")


def _freqs() -> np.ndarray:
    return base() ** (-2.0 * np.arange(ROW // 2, dtype=np.float64) / ROW)


def _turn(g: np.ndarray, positions, freq, sign: float, swap: bool = False) -> np.ndarray:
    """Each pair of ``g`` [rows, 64] turned by ``sign * theta`` (float64); ``swap`` exchanges
    cos and sin (a typical mistake)."""
    theta = np.asarray(positions, np.float64)[:, None] * freq[None, :]
    c, s = np.cos(theta), np.sin(theta)
    if swap:
        c, s = s, c
    s = sign * s
    g0, g1 = g[:, 0::2].astype(np.float64), g[:, 1::2].astype(np.float64)
    out = np.empty(g.shape)
    out[:, 0::2] = c * g0 - s * g1
    out[:, 1::2] = s * g0 + c * g1
    return out


def _warp_locate(e: int) -> str:
    return f"head {e // ROW}, float {e % ROW} (lane {(e % ROW) // 2})"


# --- step 1: the inverse rotation -----------------------------------------------------------

def _cases_inverse(big: bool) -> list[Case]:
    rng = rng_for("08.1")
    freq = _freqs()
    cases = []
    for rows in ((4096 * 16,) if big else (1, 6)):
        dy = rng.standard_normal((rows, ROW)).astype(np.float32)
        pos = rng.integers(0, MAX_POSITION, rows).astype(np.int32)
        expected = _turn(dy, pos, freq, -1.0)
        alternatives = []
        if not big:
            alternatives = [
                ("turned the forward way (by +theta): the backward applies R(theta)^T, the "
                 "turn by -theta: dz = (c*g0 + s*g1, -s*g0 + c*g1)", _turn(dy, pos, freq, 1.0)),
                ("cos and sin are swapped", _turn(dy, pos, freq, -1.0, swap=True)),
                ("turned by the row number instead of the head's position: read "
                 "positions[row]", _turn(dy, np.arange(rows), freq, -1.0)),
            ]
        cases.append(Case(
            label=f"{rows} head{'s' if rows > 1 else ''} of {ROW}",
            inputs={"dy": dy.ravel(), "positions": pos, "inv_freq": freq.astype(np.float32),
                    "rows": np.int64(rows)},
            grid=(blocks(rows, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
            expected=expected.ravel(),
            tol=tolerance(float(np.abs(dy).max()) * 2, max_angle(pos, freq)),
            locate=_warp_locate,
            unit=lambda e: [e - e % 2, e - e % 2 + 1],
            alternatives=alternatives,
            bytes_moved=2 * dy.nbytes + pos.nbytes,
            owner=owner_of(rows * ROW, 2),  # lane l of warp `row`: floats 2l, 2l + 1
        ))
    return cases


# --- step 2: the RMSNorm backward of one head -----------------------------------------------

def _norm_backward(dn, n, r, *, mean_term=True, divisor=ROW, times_r=False):
    """``(dn - n * sum(dn * n) / divisor) / r`` in float64, or a typical mistake of it."""
    dn, n, r = dn.astype(np.float64), n.astype(np.float64), r.astype(np.float64)[:, None]
    inner = (dn * n).sum(axis=1, keepdims=True) / divisor if mean_term else 0.0
    g = dn - n * inner
    return g * r if times_r else g / r


def _diagnose_lanes(expected: np.ndarray, tol: float):
    rows = expected.reshape(-1, ROW)

    def diagnose(got, e):
        row = e // ROW
        wrong = np.abs(got.reshape(-1, ROW)[row].astype(np.float64) - rows[row]) > tol
        lane_ok = ~wrong.reshape(32, 2).any(axis=1)
        if lane_ok[0] and not lane_ok[1:].any():
            return ("only lane 0 is right: only its mean(dn * n) covers the whole head "
                    "(shfl_down leaves the total in lane 0; shfl_xor_sync gives it to all)")
        return None
    return diagnose


def _cases_norm_backward(big: bool) -> list[Case]:
    rng = rng_for("08.2")
    cases = []
    for rows in ((4096 * 16,) if big else (1, 6)):
        x = rng.standard_normal((rows, ROW)) * 3.0  # r near 3: dividing and multiplying differ
        r64 = np.sqrt((x * x).mean(axis=1) + EPS)
        r = r64.astype(np.float32)
        n = (x / r64[:, None]).astype(np.float32)
        dn = rng.standard_normal((rows, ROW)).astype(np.float32)
        expected = _norm_backward(dn, n, r)
        alternatives = []
        if not big:
            alternatives = [
                ("the mean term is missing: dx = (dn - n * mean(dn * n)) / r, not dn / r",
                 _norm_backward(dn, n, r, mean_term=False)),
                ("the sum of dn * n was not divided by the head's 64 floats: the term is the "
                 "mean, sum / 64", _norm_backward(dn, n, r, divisor=1)),
                ("multiplied by r: the forward divided by r, so the backward divides too",
                 _norm_backward(dn, n, r, times_r=True)),
            ]
        tol = tolerance(float(np.abs(expected).max()) * 2, 0.0)
        case = Case(
            label=f"{rows} head{'s' if rows > 1 else ''} of {ROW}",
            inputs={"dn": dn.ravel(), "n": n.ravel(), "r": r, "rows": np.int64(rows)},
            grid=(blocks(rows, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
            expected=expected.ravel(),
            tol=tol,
            locate=_warp_locate,
            unit=lambda e: [e - e % 2, e - e % 2 + 1],
            alternatives=alternatives,
            bytes_moved=3 * dn.nbytes + r.nbytes,
            owner=owner_of(rows * ROW, 2),
        )
        case.diagnose = _diagnose_lanes(case.expected, tol)
        cases.append(case)
    return cases


# --- steps 3 and 4: the weight gradient, two stages -----------------------------------------

def _partials(products: np.ndarray, grid: int, rows_of=None) -> np.ndarray:
    """Block b's partial row: the sum of ``products`` over the rows the grid-stride loop gives
    it, ``(row // GROUPS) % grid == b``; ``rows_of(b)`` replaces that set (a mistake)."""
    out = np.zeros((grid, ROW))
    if rows_of is None:
        owner = (np.arange(products.shape[0]) // GROUPS) % grid
        np.add.at(out, owner, products)
        return out.ravel()
    for b in range(grid):
        mine = rows_of(b)
        out[b] = products[mine[mine < products.shape[0]]].sum(axis=0)
    return out.ravel()


def _sum_tolerance(products: np.ndarray) -> float:
    # float32 sums of up to a few dozen products: bounded by the sum of their magnitudes.
    return tolerance(float(np.abs(products).sum(axis=0).max()), 0.0)


PARTIAL_SHAPES = ((3, 2, 1), (5, 3, 2), (7, 4, 3))  # (tokens, heads, blocks): 6, 15, 28 rows


def _cases_partials(big: bool) -> list[Case]:
    rng = rng_for("08.3")
    cases = []
    for tokens, heads, grid in (((4096, 16, 1024),) if big else PARTIAL_SHAPES):
        rows = tokens * heads
        dz = rng.standard_normal((rows, ROW)).astype(np.float32)
        n = rng.standard_normal((rows, ROW)).astype(np.float32)
        products = dz.astype(np.float64) * n
        alternatives = []
        if not big:
            stride = GROUPS * grid
            alternatives = [
                ("only one group of 64 threads reached out: after the barrier, thread c of the "
                 "first group adds the four groups' sums, part[c] + part[64 + c] + ...",
                 _partials(products, grid, lambda b: np.arange(GROUPS * b, rows, stride))),
                ("this block summed only its first four rows: loop, row += 4 * gridDim.x, "
                 "while row < rows (a grid-stride loop)",
                 _partials(products, grid, lambda b: np.arange(GROUPS * b, GROUPS * b + GROUPS))),
                ("summed dz alone: the weight gradient sums dz * n",
                 _partials(dz.astype(np.float64), grid)),
            ] + [
                (f"group {g}'s sum is missing (threads {64 * g}-{64 * g + 63}, part[{64 * g} + "
                 "c]): the partial row adds all four groups, part[c] + part[64 + c] + "
                 "part[128 + c] + part[192 + c]",
                 _partials(products, grid, lambda b, g=g: np.array([
                     r for r in range(rows) if (r // GROUPS) % grid == b and r % GROUPS != g],
                     dtype=np.int64)))
                for g in range(GROUPS)
            ]
        cases.append(Case(
            label=f"{tokens} tokens x {heads} heads, {grid} block{'s' if grid > 1 else ''}",
            inputs={"dz": dz.ravel(), "n": n.ravel(), "rows": np.int64(rows)},
            grid=(grid,), block=(PARTIAL_THREADS,),
            expected=_partials(products, grid),
            tol=_sum_tolerance(products),
            locate=lambda e: f"block {e // ROW}'s partial row, column {e % ROW}",
            unit=lambda e: [e],
            alternatives=alternatives,
            bytes_moved=2 * dz.nbytes,
            # thread c of block b (the first group) writes column c of b's partial row
            owner=(np.arange(grid)[:, None] * PARTIAL_THREADS + np.arange(ROW)[None, :]).ravel(),
        ))
    return cases


DW_SHAPES = ((1, 1), (3, 2), (5, 4), (13, 3))  # (tokens, heads); 39 rows: 10 blocks, > 8 phases


def _cases_dw_launch(big: bool) -> list[Case]:
    rng = rng_for("08.4")
    cases = []
    for tokens, heads in (((4096, 16),) if big else DW_SHAPES):
        rows = tokens * heads
        dz = rng.standard_normal((rows, ROW)).astype(np.float32)
        n = rng.standard_normal((rows, ROW)).astype(np.float32)
        products = dz.astype(np.float64) * n
        alternatives = []
        if not big and heads > 1:
            alternatives = [
                ("dw is missing rows: it sums dz * n over every head of every token, rows = "
                 "tokens * heads", products[:tokens].sum(axis=0)),
            ]
        cases.append(Case(
            label=f"{tokens} token{'s' if tokens > 1 else ''} x {heads} head"
                  f"{'s' if heads > 1 else ''}",
            inputs={"dz": dz.ravel(), "n": n.ravel(), "tokens": tokens, "heads": heads},
            grid=(1,), block=(1,),
            expected=products.sum(axis=0),
            tol=_sum_tolerance(products),
            locate=lambda e: f"dw[{e}]",
            unit=lambda e: [e],
            alternatives=alternatives,
            bytes_moved=2 * dz.nbytes,
        ))
    return cases


def _rows(case: Case) -> int:
    return int(case.inputs["tokens"]) * int(case.inputs["heads"])


_WARP_LAUNCH = (f"one warp per head of {ROW} floats (two per lane), {WARPS_PER_BLOCK} warps "
                f"per block, grid ceil(rows / {WARPS_PER_BLOCK})")

DW_PARTIALS = Step(
    id="08.3", notebook=NOTEBOOK, kind="kernel",
    title="The weight gradient, stage one: per-block partial sums in shared memory",
    kernel_name="dw_partials",
    task=("a block of 256 threads, four groups of 64: thread t adds dz * n of column t % 64 "
          "over the rows blockIdx.x * 4 + t // 64, stepping by 4 * gridDim.x; the four "
          "groups meet in a shared array of 256, and after the barrier the first group "
          "writes the block's partial row out[blockIdx.x * 64 + c]"),
    arguments=("dz", "n", "out", "rows"),
    contract=(f"dz, n: float32[rows * {ROW}], every head of every token a row; out: "
              f"float32[gridDim.x * {ROW}], one partial row per block; rows: int64"),
    launch_text=(f"grid given by the case (fewer blocks than rows / 4); {PARTIAL_THREADS} "
                 "threads per block"),
    shared=True,
    signature="void(float32[::1], float32[::1], float32[::1], int64)",
    counters=("instructions", "f64", "ld_global", "st_global"),
    gates=(NO_F64,),
    **_CENSUS,
    make_cases=_cases_partials,
    ownership="thread c of block b (the first group of 64) writes out[b * 64 + c]",
    hint=("part = cuda.shared.array(256, float32); part[t] = acc; cuda.syncthreads(); "
          "if t < 64: out[b * 64 + t] = part[t] + part[64 + t] + part[128 + t] + "
          "part[192 + t]"),
    bounds_hint=("an index past the rows: the grid-stride loop runs while row < rows; or "
                 "a partial row past the grid's: block b writes out[b * 64 + c]"),
)

STEPS = [
    Step(
        id="08.1", notebook=NOTEBOOK, kind="kernel",
        title="The inverse rotation: dz from dy",
        kernel_name="inverse_rotate_head",
        task=("one warp per head of 64 floats, lane l holding pair l (floats 2l, 2l + 1): turn "
              "the pair of dy back by positions[row] * inv_freq[l], dz = R(theta)^T dy"),
        arguments=("dy", "out", "positions", "inv_freq", "rows"),
        contract=(f"dy, out: float32[rows * {ROW}], one head per row; positions: int32[rows]; "
                  f"inv_freq: float32[{ROW // 2}]; rows: int64"),
        launch_text=_WARP_LAUNCH,
        signature="void(float32[::1], float32[::1], int32[::1], float32[::1], int64)",
        counters=("instructions", "f64", "sincos", "ld_global", "st_global"),
        gates=(NO_F64,),
        **_CENSUS,
        make_cases=_cases_inverse,
        ownership="lane l of head w's warp writes floats 2l and 2l + 1 of head w",
        hint=("angle = float32(positions[row]) * inv_freq[lane]; out = (g0*c + g1*s, "
              "-g0*s + g1*c)"),
        bounds_hint="a warp past the last head ran: return (the whole warp) when row >= rows",
    ),
    Step(
        id="08.2", notebook=NOTEBOOK, kind="kernel",
        title="The RMSNorm backward of one head: a warp reduction of dn * n",
        kernel_name="rms_norm_backward_head",
        task=("one warp per head, lane l holding floats 2l and 2l + 1: add dn * n over the "
              "head with the shuffle butterfly, then dx = (dn - n * sum / 64) / r[row]"),
        arguments=("dn", "n", "r", "out", "rows"),
        contract=(f"dn, n, out: float32[rows * {ROW}]; r: float32[rows], the forward's "
                  "sqrt(mean(x**2) + eps) of each head; rows: int64"),
        launch_text=_WARP_LAUNCH,
        signature="void(float32[::1], float32[::1], float32[::1], float32[::1], int64)",
        counters=("instructions", "f64", "shfl", "ld_global", "st_global"),
        gates=(NO_F64, HAS_SHUFFLE, butterfly_only("the sum of dn * n over the head")),
        **_CENSUS,
        make_cases=_cases_norm_backward,
        ownership="lane l of head w's warp writes floats 2l and 2l + 1 of head w",
        hint=("s = dn0*n0 + dn1*n1; s += cuda.shfl_xor_sync(0xFFFFFFFF, s, m) for m = 16, 8, "
              "4, 2, 1; mean = s / float32(64.0); out = (dn - n * mean) / r[row]"),
        bounds_hint="a warp past the last head ran: return (the whole warp) when row >= rows",
    ),
    DW_PARTIALS,
    Step(
        id="08.4", notebook=NOTEBOOK, kind="launch",
        title="Launch both stages: partial rows, then one reduction into dw",
        kernel_name="launch_dw",
        task=("rows = tokens * heads; choose a grid (at most ceil(rows / 4) blocks), allocate "
              "its partial rows (cuda.device_array), launch dw_partials with 256 threads, then "
              f"reduce_partials_kernel (32 columns a block, {REDUCE_THREADS} threads) into out"),
        arguments=("dz", "n", "out", "tokens", "heads"),
        contract=(f"dz, n: device float32[tokens * heads * {ROW}]; out: device float32[{ROW}], "
                  "dw; tokens, heads: int; dw_partials(dz, n, partials, rows); "
                  "reduce_partials_kernel(partials, out) reads partials.shape[0] // 64 rows"),
        launch_text=("stage one: at most ceil(rows / 4) blocks of 256 threads, rows = tokens * "
                     f"heads; stage two: ceil(64 / 32) blocks of {REDUCE_THREADS} threads over "
                     "exactly the partial rows stage one wrote"),
        make_cases=_cases_dw_launch,
        launch_rules=(
            threads_exactly(lambda case: PARTIAL_THREADS, f"{PARTIAL_THREADS} (dw_partials' "
                            "four groups of 64)"),
            blocks_at_most(lambda case: blocks(_rows(case), GROUPS), "ceil(rows / 4)"),
            given_launch("reduce_partials_kernel", lambda case: -(-ROW // 32), REDUCE_THREADS,
                         f"ceil(64 / 32) blocks of {REDUCE_THREADS} threads"),
            reads_what_was_written("reduce_partials_kernel", 0, ROW, "partial rows"),
        ),
        **DW_PARTIALS.launching(),
        hint=("blocks = min(ceil(rows / 4), 1024); partials = cuda.device_array(blocks * 64, "
              "np.float32); dw_partials[blocks, 256](...); "
              f"reduce_partials_kernel[2, {REDUCE_THREADS}](partials, out)"),
        bounds_hint=("out holds one row of 64 floats: stage one writes a partial row per block "
                     "into its own buffer, stage two sums them into out"),
    ),
]
