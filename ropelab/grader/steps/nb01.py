"""Notebook 01's ladder (01_flat_divmod.ipynb): a flat index becomes (token, pair).

01.1 angles (token and pair from one unsigned division, the remainder by a multiply-subtract)
-> 01.2 the launch of that kernel (grid from tokens x pairs) -> 01.3 each pair's frequency,
computed in float32 (pow, no float64) -> 01.4 the seed's flat RoPE kernel from an empty body
(the notebook's old exercise).  Solutions and recorded wrong
attempts: ``notebooks/solutions/01_flat_divmod.py``.
"""

from __future__ import annotations

import numpy as np

from ...kernels import flat
from ..grading import Case, Gate
from .base import Forbid, Step
from .cases import (base, BIG_SHAPE, MAX_POSITION, NO_F64, NO_SIGNED_DIVISION, ONE_THREAD_HINT,
                    ROPE_IN, SMALL_SHAPES, THREADS, blocks, freqs, owner_of, rng_for,
                    rope_cases, signature_of)

NOTEBOOK = "01_flat_divmod"


# No signed div/rem (the census breaks int_divrem down by opcode): a signed int64 // compiles to
# one div.s64 plus a div.u32 fast path, as many divisions as the unsigned one, so the plain
# count cannot tell them apart (checked on the pinned numba-cuda).
UNSIGNED = NO_SIGNED_DIVISION
# Counted on the source as numba compiles it, before NVVM optimizes (ropelab.measure.census.
# ir_divisions): one path through the kernel, each loop's body once.  The PTX text holds one
# unsigned // twice (a 64-bit division and a 32-bit fast path), once per copy of a loop the
# compiler unrolled, and once more for a trip count it computes; none of that is the learner's.
ONE_DIVISION = Gate("divrem_source", "<=", 1, "your kernel divides {got} times on one path "
                    "through its code, each loop's body counted once (the goal: {limit}, one "
                    "unsigned //): divide once, and take the remainder from the quotient (the "
                    "index minus quotient times divisor)")
NO_MODULO = Forbid("%", "take the remainder from the quotient you have (pair = i - token * "
                   "n_pairs): a multiply and a subtract instead of a second division")
_ANGLE_SIGNATURE = "void(float32[::1], int32[::1], float32[::1], uint64, int64)"


def _cases_angles(big: bool, shapes=SMALL_SHAPES) -> list[Case]:
    """out[token * n_pairs + pair] = float32(positions[token]) * inv_freq[pair]."""
    rng = rng_for("01.1")
    cases = []
    for tokens, hidden in ((BIG_SHAPE,) if big else shapes):
        n_pairs = hidden // 2
        pos = rng.integers(0, MAX_POSITION, tokens).astype(np.int32)
        inv_freq = freqs(hidden).astype(np.float32)
        expected = (pos.astype(np.float64)[:, None] * inv_freq.astype(np.float64)).ravel()
        shifted = np.roll(inv_freq.astype(np.float64), -1)
        total = tokens * n_pairs
        cases.append(Case(
            label=f"{tokens} token{'s' if tokens > 1 else ''} x {n_pairs} pair"
                  f"{'s' if n_pairs > 1 else ''}",
            inputs={"positions": pos, "inv_freq": inv_freq, "n_pairs": np.uint64(n_pairs),
                    "total_pairs": np.int64(total)},
            grid=(blocks(total),), block=(THREADS,),
            expected=expected,
            # one float32 rounding of the product (plus a little): no slack for a wrong index
            tol=float(np.abs(expected).max()) * 2.0 ** -22 + 1e-30,
            locate=lambda e, n=n_pairs: f"token {e // n}, pair {e % n}",
            unit=lambda e: [e],
            alternatives=[] if big else [
                ("the angle used the row number, not the token's position: read "
                 "positions[token]", (np.arange(tokens)[:, None] * inv_freq).ravel()),
                ("the pair is one too far: this element holds the next pair's angle",
                 (pos.astype(np.float64)[:, None] * shifted).ravel()),
            ],
            bytes_moved=4 * total + pos.nbytes + inv_freq.nbytes,
            owner=owner_of(total, 1),  # thread idx writes the angle of pair idx
        ))
    return cases


def _cases_launch(big: bool) -> list[Case]:
    """01.1's cases, plus a batch of 1,200 pairs: more than one block may hold."""
    return _cases_angles(big, SMALL_SHAPES + ((3, 800),))


def _cases_freqs(big: bool) -> list[Case]:
    """out[pair] = base ** (-2 pair / hidden), one row's frequencies."""
    cases = []
    for hidden in ((8192,) if big else (2, 10, 130)):
        n_pairs = hidden // 2
        expected = freqs(hidden)
        pair = np.arange(n_pairs, dtype=np.float64)
        mistakes = [] if big else [
            ("the frequency of the next pair: the exponent counts pairs from 1",
             freqs(hidden, 1)),
            ("base ** (+2 pair / hidden): the reciprocal is missing (inv_freq = 1 / base ** "
             "(2 pair / hidden))", base() ** (2.0 * pair / hidden)),
            ("divided by n_pairs instead of hidden = 2 n_pairs: the exponent is "
             "2 pair / hidden", base() ** (-2.0 * pair / n_pairs)),
        ]
        case = Case(
            label=f"{n_pairs} pair{'s' if n_pairs > 1 else ''}",
            inputs={"n_pairs": np.int64(n_pairs), "base": np.float32(base())},
            grid=(blocks(n_pairs),), block=(THREADS,),
            expected=expected,
            # fast-math pow is lg2.approx + ex2.approx: a few float32 ulps, far below any of the
            # mistakes below (the next pair's frequency differs by a factor of 1.15 or more)
            tol=1e-5,
            locate=lambda e: f"pair {e}",
            unit=lambda e: [e],
            bytes_moved=4 * n_pairs,
            owner=owner_of(n_pairs, 1),
        )
        # Two mistakes can agree on one element (pair 1 of a 5-pair row: the next pair's
        # frequency is base ** (-4 / 10), the n_pairs one base ** (-2 / 5)): name the mistake
        # whose output matches the learner's on every element of the row.
        case.diagnose = _whole_row_match(mistakes, case.tol)
        cases.append(case)
    return cases


def _whole_row_match(mistakes, tol):
    def diagnose(got, e):
        for hint, output in mistakes:
            # relative past 1: without the reciprocal the values reach base itself
            if np.all(np.abs(got.astype(np.float64) - output) <= tol * np.maximum(1, output)):
                return hint
        return None
    return diagnose


def _cases_flat(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        total = tokens * hidden // 2
        case.inputs.update(n_pairs=np.uint64(hidden // 2), total_pairs=np.int64(total),
                           base=np.float32(base()))
        case.grid, case.block = (blocks(total),), (THREADS,)
        case.owner = owner_of(2 * total, 2)  # thread i writes pair i's floats 2i and 2i + 1
    return rope_cases("01-flat-index", big, fill)


PAIR_ANGLES = Step(
    id="01.1", notebook=NOTEBOOK, kind="kernel",
    title="Token and pair from a flat index, with one unsigned division",
    kernel_name="pair_angles",
    task="thread idx finds its token and pair and writes positions[token] * inv_freq[pair]",
    arguments=("out", "positions", "inv_freq", "n_pairs", "total_pairs"),
    contract="out: float32[tokens * n_pairs], the angle of every pair, row after row; "
             "positions: int32[tokens]; inv_freq: float32[n_pairs]; n_pairs: uint64; "
             "total_pairs: int64 = tokens * n_pairs",
    launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
    signature=_ANGLE_SIGNATURE,
    reference=("ropelab.kernels.flat", "rope_flat", None),
    reference_signature=signature_of(flat.VARIANT),
    counters=("instructions", "int_divrem", "divrem_source", "signed_divrem", "f64"),
    gates=(NO_F64, UNSIGNED, ONE_DIVISION),
    forbid=(NO_MODULO,),
    make_cases=_cases_angles,
    ownership="thread idx writes out[idx], the angle of pair idx of the batch",
    hint="i = uint64(idx); token = i // n_pairs; pair = i - token * n_pairs",
    bounds_hint=ONE_THREAD_HINT + " (idx < total_pairs)",
    bounds_hints={"inv_freq": "a pair index past the row: pair = i - token * n_pairs is "
                              "below n_pairs", "positions": "a token past the last row: "
                              "token = i // n_pairs, and only for idx < total_pairs"},
)

MY_ROPE_FLAT = Step(
    id="01.4", alias="01-flat-index", notebook=NOTEBOOK, kind="kernel",
    title="The seed's flat RoPE kernel, from an empty body",
    kernel_name="my_rope_flat",
    task="one thread per pair: guard, token and pair, the pair's frequency and angle, "
         "then rotate the pair",
    arguments=("x", "out", "positions", "n_pairs", "total_pairs", "base"),
    contract=(f"{ROPE_IN}; n_pairs: uint64 = hidden / 2; total_pairs: int64 = tokens * "
              "n_pairs; base: float32 = 10000"),
    launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
    signature=signature_of(flat.VARIANT),
    reference=("ropelab.kernels.flat", "rope_flat", None),
    reference_signature=signature_of(flat.VARIANT),
    counters=("instructions", "int_divrem", "divrem_source", "signed_divrem", "f64", "sincos",
              "pow"),
    gates=(NO_F64, UNSIGNED, ONE_DIVISION),
    forbid=(NO_MODULO,),
    make_cases=_cases_flat,
    ownership="thread i writes the two floats of pair i, out[2i] and out[2i + 1]",
    hint="inv_freq = 1 / base ** (2 pair / hidden) in float32, angle = positions[token] * "
         "inv_freq; out[2i] = x0*c - x1*s, out[2i+1] = x0*s + x1*c",
    bounds_hint=ONE_THREAD_HINT + " (idx < total_pairs)",
)

STEPS = [
    PAIR_ANGLES,
    Step(
        id="01.2", notebook=NOTEBOOK, kind="launch",
        title="Launch: the grid from tokens x pairs",
        kernel_name="launch_pair_angles",
        task="launch pair_angles (step 01.1) with one thread per pair of the batch",
        arguments=("out", "positions", "inv_freq", "n_pairs", "total_pairs"),
        contract="the arguments of pair_angles, as device arrays and Python numbers: pass "
                 "each scalar with the type pair_angles' contract gives it (n_pairs as "
                 "numba.uint64(n_pairs))",
        launch_text="yours: at most 1024 threads per block, every pair covered, no block "
                    "wholly idle",
        make_cases=_cases_launch,
        **PAIR_ANGLES.launching(owned=True),  # "one thread per pair"
        hint="blocks = (total_pairs + threads - 1) // threads, with total_pairs = tokens x "
             "n_pairs (not n_pairs alone: that covers one row)",
        bounds_hint="a thread past the last pair ran pair_angles' body: the launch rounds up, "
                    "so the kernel (step 01.1) must guard with idx < total_pairs",
    ),
    Step(
        id="01.3", notebook=NOTEBOOK, kind="kernel",
        title="Each pair's frequency, in float32",
        kernel_name="pair_frequencies",
        task="thread pair < n_pairs writes 1 / base ** (2 pair / hidden), hidden = 2 n_pairs, "
             "computed in float32",
        arguments=("out", "n_pairs", "base"),
        contract="out: float32[n_pairs]; n_pairs: int64; base: float32 = 10000",
        launch_text=f"grid ceil(n_pairs / {THREADS}) blocks of {THREADS} threads",
        signature="void(float32[::1], int64, float32)",
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=signature_of(flat.VARIANT),
        counters=("instructions", "f64", "pow"),
        gates=(NO_F64,),
        make_cases=_cases_freqs,
        ownership="thread pair writes out[pair]",
        hint="exponent = float32(pair + pair) / float32(n_pairs + n_pairs); out[pair] = "
             "float32(1.0) / math.pow(base, exponent)",
        bounds_hint=ONE_THREAD_HINT + " (pair < n_pairs)",
    ),
    MY_ROPE_FLAT,
]
