"""Shared pieces of the steps' test cases: RoPE shapes, inputs, the reference output and
the typical mistakes a wrong element is compared with.

Every ladder module (nb00 ... nb06) builds its cases from these, so a shape or a hint is
written once.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ... import reference
from ...kernels.plan import census_problem
from ...tolerance import max_angle
from ..case_base import BASE, base  # noqa: F401  (the steps read both from here)
from ..grading import Case, Gate, tolerance

MAX_POSITION = 1024  # random positions below this: large enough angles, a tight tolerance
THREADS = 64  # block size of the 1-D launches: the small shapes still leave a partial block


def signature_of(variant, options=None, problem=None) -> str:
    """The signature ropelab's own launch passes to ``variant``'s kernel (from its plan)."""
    return variant.plan(problem or census_problem(variant.features), options or {}).signature()


SMALL_SHAPES = ((1, 2), (3, 10), (5, 130))  # (tokens, hidden): 1, 15 and 325 pairs
BIG_SHAPE = (4096, 1024)  # for timing on a GPU


def rng_for(ex_id: str) -> np.random.Generator:
    # Fixed per exercise: the same cases every run, so a verdict is reproducible.
    return np.random.default_rng(sum(map(ord, ex_id)))


def freqs(hidden: int, shift: int = 0) -> np.ndarray:
    """``base ** (-2 (i + shift) / hidden)``: the frequencies, or those of the pair ``shift``
    further on (what a pair index off by one computes)."""
    i = np.arange(hidden // 2, dtype=np.float64) + shift
    return base() ** (-2.0 * i / hidden)


def swapped_cos_sin(x, pos, freq):
    theta = reference.angles(pos, freq)
    x0, x1 = x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64)
    out = np.empty(x.shape)
    out[:, 0::2] = x0 * np.sin(theta) - x1 * np.cos(theta)
    out[:, 1::2] = x0 * np.cos(theta) + x1 * np.sin(theta)
    return out


def rope_case(tokens: int, hidden: int, rng, *, big: bool,
              extra_alternatives: Callable | None = None) -> Case:
    """A [tokens, hidden] interleaved RoPE case: x, positions, reference and mistakes."""
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    pos = rng.integers(0, MAX_POSITION, tokens).astype(np.int32)
    freq = freqs(hidden)
    expected = reference.rope(x, pos, base=base())
    alternatives = []
    if not big:
        alternatives = [
            ("the pair turned the wrong way: a sign is flipped (out[2i] = x0*c - x1*s, "
             "out[2i+1] = x0*s + x1*c)", reference.rope(x, pos, base=base(), inverse=True)),
            ("cos and sin are swapped", swapped_cos_sin(x, pos, freq)),
            ("pair index off by one: this pair was rotated with the frequency of the next pair",
             reference.rope(x, pos, freqs=freqs(hidden, 1))),
            ("pair index off by one: this pair was rotated with the frequency of the previous pair",
             reference.rope(x, pos, freqs=freqs(hidden, -1))),
            ("rotated by the row number instead of the token's position: read positions[token]",
             reference.rope(x, np.arange(tokens), base=base())),
        ]
        if extra_alternatives is not None:
            alternatives += extra_alternatives(x, pos, hidden)
    return Case(
        label=f"{tokens}x{hidden}",
        inputs={"x": x.ravel(), "positions": pos},
        grid=(1,), block=(1,),
        expected=expected,
        tol=tolerance(float(np.abs(x).max()), max_angle(pos, freq)),
        locate=lambda e: f"token {e // hidden}, pair {(e % hidden) // 2}",
        unit=lambda e: [e - e % 2, e - e % 2 + 1],
        alternatives=alternatives,
        bytes_moved=2 * x.nbytes + pos.nbytes,
    )


def owner_of(n: int, per_thread: int) -> np.ndarray:
    """The owner array of a flat one-thread-per-item step: element e is thread e // per_thread's
    (per_thread floats an item: 1 a float, 2 a pair)."""
    return np.arange(n, dtype=np.int64) // per_thread


def blocks(work: int, threads: int = THREADS) -> int:
    return (work + threads - 1) // threads


def rope_cases(ex_id: str, big: bool, fill: Callable, extra_alternatives=None) -> list[Case]:
    """One case per shape (or the timing shape), completed by ``fill(case, tokens, hidden)``."""
    rng = rng_for(ex_id)
    cases = []
    for tokens, hidden in ((BIG_SHAPE,) if big else SMALL_SHAPES):
        case = rope_case(tokens, hidden, rng, big=big, extra_alternatives=extra_alternatives)
        fill(case, tokens, hidden)
        cases.append(case)
    return cases


ROPE_IN = ("x, out: float32[tokens * hidden] (rows one after the other); "
           "positions: int32[tokens]")
NO_F64 = Gate("f64", "<=", 0, "the fast-math build has {got} float64 instructions (the goal: "
              "{limit}): in Numba a bare literal (2.0) or an int / int division is a float64; "
              "wrap it in float32(...)")


def butterfly_only(what: str) -> Gate:
    """The step's sum is the shuffle butterfly's: ``shfl_xor_sync`` leaves it in every lane.  A
    ``shfl_down_sync`` tree gathers it in lane 0, and then a broadcast (``shfl_sync``) hands it
    out: the same values, one more shuffle, and not the method the step teaches."""
    return Gate("shfl_not_xor", "<=", 0, (
        "the PTX has {got} shuffles that are not the butterfly's (shfl_down, shfl_up or a "
        f"broadcast): the step asks for {what} by the butterfly, cuda.shfl_xor_sync(mask, v, "
        "m) for m = 16, 8, 4, 2, 1, which leaves the whole sum in every lane with nothing to "
        "broadcast"))


NO_SIGNED_DIVISION = Gate(
    "signed_divrem", "<=", 0, "the PTX has {got} signed integer div/rem instructions (div.s64, "
    "rem.s64; the goal: {limit}): // and % on a signed int (cuda.grid(1) is an int64) are "
    "Python's floor division, with sign fix-ups; make the index unsigned first: "
    "i = uint64(idx)")
ONE_THREAD_HINT = ("a thread past the end ran the body: the grid is rounded up to whole "
                   "blocks, so guard with the number of work items")

