"""The on-ramp's test cases (notebooks/00_on_ramp.ipynb): small uneven shapes, the answer in
float64 NumPy, and the typical mistakes a wrong element is compared with.

Every expected output here is computed in float64 from the case's float32 inputs; none comes
from a kernel.  Each ``*_cases(big)`` returns the graded cases (``big=False``) or one timing
case (``big=True``); :mod:`.onramp` declares the puzzles that use them.
"""

from __future__ import annotations

import numpy as np

from ... import reference
from ..grading import Case
from .cases import blocks, rng_for

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23: one float32 rounding is at most half of it
SCALE = np.float32(1 / np.sqrt(8))  # attention's score scale for heads of 8 floats
TILE = 8  # the Q K^T puzzle: tiles of 8 queries x 8 keys, heads of 8 floats
ROW_MAX = 64  # the shared-memory puzzles' rows fit a shared array of 64 floats
BLOCK_2D = (8, 4)  # the 2-D puzzles' blocks: 8 threads along a row, 4 rows


def _tol(magnitude, roundings: int = 1) -> float:
    """Room for ``roundings`` float32 roundings of values up to ``magnitude`` in size."""
    return roundings * EPS32 * max(1.0, float(np.max(np.abs(magnitude))))


def _floats(n: int, rng) -> np.ndarray:
    return rng.standard_normal(n).astype(np.float32)


def _one(e):
    return [e]


def _case(label, inputs, expected, grid, block, tol, locate, *, unit=_one, alternatives=(),
          big=False) -> Case:
    arrays = [v for v in inputs.values() if isinstance(v, np.ndarray)]
    return Case(label=label, inputs=inputs, grid=grid, block=block, expected=expected, tol=tol,
                locate=locate, unit=unit, alternatives=[] if big else list(alternatives),
                bytes_moved=sum(a.nbytes for a in arrays) + 4 * expected.size)


def _at_float(e):
    return f"float {e}"


# --- ramp.1-2: map and zip, one block of n threads -----------------------------------------

def square_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.1")
    cases = []
    for n in ((1024,) if big else (4, 7, 30)):
        x = _floats(n, rng)
        x64 = x.astype(np.float64)
        cases.append(_case(f"{n} floats", {"x": x}, x64 * x64, (1,), (n,), _tol(x64 * x64),
                           _at_float, big=big, alternatives=[
                               ("x[i] + x[i] doubles the float; its square is x[i] * x[i]",
                                2 * x64),
                               ("out[i] = x[i]: the float was copied, not squared", x64)]))
    return cases


def weigh_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.2")
    cases = []
    for n in ((1024,) if big else (3, 10, 24)):
        x, w = _floats(n, rng), rng.uniform(0.5, 1.5, n).astype(np.float32)
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        cases.append(_case(f"{n} floats", {"x": x, "weight": w}, x64 * w64, (1,), (n,),
                           _tol(x64 * w64), _at_float, big=big, alternatives=[
                               ("every float was multiplied by weight[0]: float i takes "
                                "weight[i]", x64 * w64[0]),
                               ("added instead of multiplied: out[i] = x[i] * weight[i]",
                                x64 + w64)]))
    return cases


# --- ramp.3-5: guard, several blocks, the launch --------------------------------------------

def _scale_case(n: int, rng, grid, block, big: bool, label: str = "") -> Case:
    x = _floats(n, rng)
    expected = x.astype(np.float64) * np.float64(SCALE)
    return _case(label or f"{n} float{'s' if n > 1 else ''}", {"x": x, "scale": SCALE, "n": np.int64(n)},
                 expected, grid, block, _tol(expected),
                 lambda e: f"float {e} (block {e // block[0]}, thread {e % block[0]})",
                 big=big, alternatives=[("out[i] = x[i]: the float was copied, not scaled",
                                         x.astype(np.float64))])


def guard_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.3")
    return [_scale_case(n, rng, (1,), (32,), big) for n in ((32,) if big else (1, 13, 31))]


def blocks_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.4")
    # the launch the step states, blocks of 8, in the timing case too: a kernel may rely on it
    # (i = blockIdx.x << 3 | threadIdx.x is right there, and wrong in blocks of 256)
    if big:
        n = (1 << 22) + 7
        return [_scale_case(n, rng, (blocks(n, 8),), (8,), big, label=f"{n} floats, blocks of 8")]
    return [_scale_case(n, rng, (blocks(n, 8),), (8,), big) for n in (5, 20, 45)]


def launch_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.5")
    return [_scale_case(n, rng, (1,), (1,), big) for n in (((1 << 22) + 7,) if big else
                                                          (1, 100, 1500))]


# --- ramp.6-7: 2-D grids over [tokens, hidden] -----------------------------------------------

def _grid_2d(width: int, rows: int) -> tuple:
    return (blocks(width, BLOCK_2D[0]), blocks(rows, BLOCK_2D[1]))


def weigh_rows_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.6")
    cases = []
    for tokens, hidden in (((4096, 1024),) if big else ((3, 10), (5, 13))):
        x = rng.standard_normal((tokens, hidden)).astype(np.float32)
        w = rng.uniform(0.5, 1.5, hidden).astype(np.float32)
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        flat = x64.ravel()
        column_order = (flat * w64[np.arange(flat.size) // tokens]).reshape(tokens, hidden)
        alternatives = [] if big else [  # weight[t] needs tokens <= hidden, as the small cases have
            ("weight read with the token t: weight[t]; the weight belongs to the column h, the "
             "same for every token", x64 * w64[:tokens, None]),
            ("the index of element (t, h) is t * hidden + h (rows one after the other); "
             "h * tokens + t walks down the columns", column_order)]
        cases.append(_case(f"{tokens}x{hidden}", {"x": x.ravel(), "weight": w,
                                                  "tokens": np.int64(tokens),
                                                  "hidden": np.int64(hidden)},
                           x64 * w64, _grid_2d(hidden, tokens), BLOCK_2D, _tol(x64 * w64),
                           lambda e, h=hidden: f"token {e // h}, float {e % h}", big=big,
                           alternatives=alternatives))
    return cases


def angle_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.7")
    cases = []
    for tokens, pairs in (((4096, 512),) if big else ((3, 5), (6, 12))):
        pos = rng.integers(0, 100, tokens).astype(np.int32)
        inv = reference.inv_freq(2 * pairs).astype(np.float32)
        inv64 = inv.astype(np.float64)
        expected = reference.angles(pos, inv64)
        cases.append(_case(f"{tokens} tokens x {pairs} pairs",
                           {"positions": pos, "inv_freq": inv, "tokens": np.int64(tokens),
                            "pairs": np.int64(pairs)},
                           expected, _grid_2d(pairs, tokens), BLOCK_2D, _tol(expected),
                           lambda e, p=pairs: f"token {e // p}, pair {e % p}", big=big,
                           alternatives=[
                               ("the row number t was used as the position: the token's "
                                "position is positions[t]", reference.angles(np.arange(tokens),
                                                                             inv64)),
                               ("added instead of multiplied: the angle is positions[t] * "
                                "inv_freq[j]", pos[:, None] + inv64[None, :])]))
    return cases


# --- ramp.8-9: the two pair swaps -----------------------------------------------------------

def swap_interleaved(x: np.ndarray) -> np.ndarray:
    """GPT-J's rotate_every_two: pair (x[2p], x[2p+1]) becomes (-x[2p+1], x[2p])."""
    out = np.empty(x.shape)
    out[:, 0::2], out[:, 1::2] = -x[:, 1::2], x[:, 0::2]
    return out


def swap_half_split(x: np.ndarray) -> np.ndarray:
    """NeoX's rotate_half: the halves (a, b) of each row become (-b, a)."""
    h = x.shape[1] // 2
    return np.concatenate([-x[:, h:], x[:, :h]], axis=1).astype(np.float64)


def _rows(step_id: str, shapes, big: bool, big_shape):
    rng = rng_for(step_id)
    for tokens, hidden in ((big_shape,) if big else shapes):
        yield tokens, hidden, rng.standard_normal((tokens, hidden)).astype(np.float32)


def swap_pairs_cases(big: bool) -> list[Case]:
    cases = []
    for tokens, hidden, x in _rows("ramp.8", ((1, 4), (3, 10)), big, (4096, 1024)):
        x64 = x.astype(np.float64)
        other_sign = -swap_interleaved(x64)
        cases.append(_case(
            f"{tokens}x{hidden}", {"x": x.ravel()}, swap_interleaved(x64), (tokens,), (hidden,),
            0.0, lambda e, h=hidden: f"token {e // h}, pair {(e % h) // 2}",
            unit=lambda e: [e - e % 2, e - e % 2 + 1], big=big, alternatives=[
                # The unsigned swap first: it agrees with the other-sign one on a pair's
                # second float, and only a pair's wrong floats are compared.
                ("the pair was swapped without the minus sign: out[2p] = -x[2p+1]",
                 x64[:, [i ^ 1 for i in range(hidden)]]),
                ("the minus sign is on the wrong float: out[2p] = -x[2p+1] and "
                 "out[2p+1] = x[2p]", other_sign),
                ("that is the half-split (NeoX) swap, which pairs float j with j + hidden/2; "
                 "here a pair is two neighbours, 2p and 2p + 1", swap_half_split(x64))]))
    return cases


def rotate_half_cases(big: bool) -> list[Case]:
    cases = []
    for tokens, hidden, x in _rows("ramp.9", ((1, 8), (3, 12)), big, (65536, ROW_MAX)):
        x64 = x.astype(np.float64)
        h = hidden // 2

        def pair(e, h=h, hidden=hidden):
            start, j = e - e % hidden, e % hidden % h
            return [start + j, start + j + h]

        cases.append(_case(
            f"{tokens}x{hidden}", {"x": x.ravel()}, swap_half_split(x64), (tokens,), (hidden,),
            0.0, lambda e, hidden=hidden: f"token {e // hidden}, float {e % hidden}", unit=pair,
            big=big, alternatives=[
                ("that is the interleaved (GPT-J) swap of puzzle ramp.8; here float j pairs "
                 "with float j + hidden/2", swap_interleaved(x64)),
                ("the minus sign belongs to the first half: out[j] = -row[j + hidden/2] for "
                 "j < hidden/2", -swap_half_split(x64))]))
    return cases


# --- ramp.10-12: sums ---------------------------------------------------------------------

def sum_squares_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.10")
    cases = []
    for rows, n in (((65536, ROW_MAX),) if big else ((3, 16), (2, 64))):
        x = rng.standard_normal((rows, n)).astype(np.float32)
        squares = x.astype(np.float64) ** 2
        cases.append(_case(f"{rows} rows of {n}", {"x": x.ravel()}, squares.sum(axis=1),
                           (rows,), (n,), _tol(squares.sum(axis=1), n),
                           lambda e: f"row {e}", big=big, alternatives=[
                               ("the sum of the floats, not of their squares",
                                x.astype(np.float64).sum(axis=1)),
                               ("only thread 0's own square: the other threads' squares were "
                                "not added", squares[:, 0])]))
    return cases


def _butterfly(v: np.ndarray, masks) -> np.ndarray:
    lanes = np.arange(32)
    for m in masks:
        v = v + v[:, lanes ^ m]
    return v


def _shuffled_down(v: np.ndarray) -> np.ndarray:
    lanes = np.arange(32)
    for d in (16, 8, 4, 2, 1):
        src = np.where(lanes + d < 32, lanes + d, lanes)  # past the end: the lane's own value
        v = v + v[:, src]
    return v


def warp_sum_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.11")
    cases = []
    for warps in ((65536,) if big else (1, 3)):
        x = rng.standard_normal((warps, 32)).astype(np.float32)
        x64 = x.astype(np.float64)
        expected = np.repeat(x64.sum(axis=1, keepdims=True), 32, axis=1)
        cases.append(_case(
            f"{warps} warp{'s' if warps > 1 else ''}", {"x": x.ravel()}, expected, (warps,),
            (32,), _tol(np.abs(x64).sum(axis=1), 32),
            lambda e: f"float {e} (warp {e // 32}, lane {e % 32})", big=big, alternatives=[
                ("each lane wrote its own float: no shuffle added the others'", x64),
                ("only lane 0 holds the whole sum: shfl_down_sync moves values towards lane "
                 "0; shfl_xor_sync (the butterfly) leaves the sum in every lane",
                 _shuffled_down(x64)),
                ("one butterfly step is missing: 32 lanes need five, m = 16, 8, 4, 2, 1",
                 _butterfly(x64, (16, 8, 4, 2)))]))
    return cases


def dot_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.12")
    cases = []
    for tokens, d in (((65536, 64),) if big else ((5, 8), (40, 16))):
        q = rng.standard_normal((tokens, d)).astype(np.float32)
        k = rng.standard_normal((tokens, d)).astype(np.float32)
        q64, k64 = q.astype(np.float64), k.astype(np.float64)
        products = q64 * k64
        by_columns = q64.reshape(d, tokens) * k64.reshape(d, tokens)  # [i, t]: q[i * tokens + t]
        cases.append(_case(
            f"{tokens} tokens, heads of {d}", {"q": q.ravel(), "k": k.ravel(),
                                               "tokens": np.int64(tokens), "d": np.int64(d)},
            products.sum(axis=1), (blocks(tokens, 32),), (32,),
            _tol(np.abs(products).sum(axis=1), d), lambda e: f"token {e}", big=big,
            alternatives=[
                ("one term short: the loop must add all d products, i = 0 .. d - 1",
                 products[:, :-1].sum(axis=1)),
                ("token t's head is the d floats from t * d on; q[i * tokens + t] walks down "
                 "the columns", by_columns.sum(axis=0)),
                ("q times q: the score is q[t] . k[t]", (q64 * q64).sum(axis=1))]))
    return cases


# --- ramp.13: Q K^T of rotated queries and keys --------------------------------------------

def rotated_rows(vector: np.ndarray, tokens: int) -> np.ndarray:
    """The same ``vector`` for every token, rotated by RoPE at positions 0 .. tokens - 1,
    stored as float32 (the rotation in float64)."""
    rows = np.repeat(vector[None, :].astype(np.float64), tokens, axis=0)
    return reference.rope(rows, np.arange(tokens)).astype(np.float32)


def scores_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.13")
    cases = []
    q0, k0 = rng.standard_normal((2, TILE))
    for tokens in ((1024,) if big else (TILE, 2 * TILE)):
        q, k = rotated_rows(q0, tokens), rotated_rows(k0, tokens)
        q64, k64 = q.astype(np.float64), k.astype(np.float64)
        expected = q64 @ k64.T
        tiles = tokens // TILE
        cases.append(_case(
            f"{tokens} tokens", {"q": q.ravel(), "k": k.ravel(), "tokens": np.int64(tokens)},
            expected, (tiles, tiles), (TILE, TILE), _tol(np.abs(q64) @ np.abs(k64).T, TILE),
            lambda e, t=tokens: f"query {e // t}, key {e % t}", big=big, alternatives=[
                ("transposed: row m of the scores is query m against every key n, "
                 "out[m * tokens + n] = q[m] . k[n]", expected.T)]))
    return cases


# --- ramp.14: lengths -> offsets ----------------------------------------------------------

def offsets_cases(big: bool) -> list[Case]:
    rng = rng_for("ramp.14")
    cases = []
    for n in ((31,) if big else (1, 4, 13)):
        lengths = rng.integers(1, 20, n).astype(np.int32)
        expected = np.concatenate([[0], np.cumsum(lengths)]).astype(np.float64)
        inclusive = np.concatenate([np.cumsum(lengths), [np.nan]])
        cases.append(_case(
            f"{n} sequence{'s' if n > 1 else ''}", {"lengths": lengths, "n": np.int64(n)},
            expected, (1,), (32,), 0.0, lambda e: f"offsets[{e}]", big=big, alternatives=[
                ("an inclusive sum: offsets[i] counted sequence i itself; the offset of "
                 "sequence i is the sum of the lengths before it", inclusive)]))
    return cases
