"""Notebook 03's ladder (03_pack4.ipynb): two pairs per thread.

03.1 two neighbouring pairs per thread, one block per token, rows of an even number of pairs
(the frequencies given) -> 03.2 one thread per quad of a flat grid, rows of an odd number of
pairs: the row's last thread has one pair -> 03.3 the launch, with the quad counts computed on
the host -> 03.4 pack4_scalar with every load before the first store (the notebook's old
exercise: its starter runs, and its census shows what to change).  Solutions and recorded
wrong attempts: ``notebooks/solutions/03_pack4.py``.
"""

from __future__ import annotations

import numpy as np

from ...kernels import pack4_scalar
from ..grading import Case, Gate
from .base import Step
from .cases import (base, BIG_SHAPE, NO_F64, ROPE_IN, THREADS, blocks, freqs,
                    rng_for, rope_case, rope_cases, signature_of)
from .nb01 import NO_MODULO, ONE_DIVISION, UNSIGNED
from .nb02 import NO_DIVISION
from ...cuda_limits import WARP

NOTEBOOK = "03_pack4"
EVEN_SHAPES = ((1, 4), (3, 12), (5, 136))  # rows of 2, 6 and 68 pairs: every quad whole
PACK4_SIGNATURE = "void(float32[::1], float32[::1], int32[::1], float32[::1], int64)"
QUADS_SIGNATURE = ("void(float32[::1], float32[::1], int32[::1], float32[::1], uint64, uint64, "
                   "int64)")
LOADS_FIRST = Gate("loads_after_store", "<=", 0, "{got} global loads come after the first store "
                   "(the goal: {limit}): out may be x itself, so the second pair's loads wait "
                   "for the first pair's stores; load all four floats first")


def _quads(n_pairs: int) -> int:
    return (n_pairs + 1) // 2


def _quad_owner(tokens: int, n_pairs: int, per_row: int, row_threads: int) -> np.ndarray:
    """Quad q (the pairs 2q', 2q' + 1 of a row, q' its place in the row) is written by thread
    token * row_threads + q'; every float of its pairs."""
    quad = np.arange(n_pairs) // 2
    owner = np.arange(tokens)[:, None] * row_threads + quad[None, :]
    assert per_row == _quads(n_pairs)
    return np.repeat(owner, 2, axis=1).ravel()


def _cases_two_pairs(big: bool) -> list[Case]:
    rng = rng_for("03.1")
    cases = []
    for tokens, hidden in ((BIG_SHAPE,) if big else EVEN_SHAPES):
        case = rope_case(tokens, hidden, rng, big=big)
        n_pairs = hidden // 2
        case.inputs.update(inv_freq=freqs(hidden).astype(np.float32), n_pairs=np.int64(n_pairs))
        case.grid = (tokens,)
        case.block = (-(-_quads(n_pairs) // WARP) * WARP,)
        case.owner = _quad_owner(tokens, n_pairs, _quads(n_pairs), case.block[0])
        case.bytes_moved += 4 * n_pairs
        cases.append(case)
    return cases


def _cases_quads(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        n_pairs = hidden // 2
        total = tokens * _quads(n_pairs)
        case.inputs.update(inv_freq=freqs(hidden).astype(np.float32),
                           n_pairs=np.uint64(n_pairs), quads_per_row=np.uint64(_quads(n_pairs)),
                           total_quads=np.int64(total))
        case.grid, case.block = (blocks(total),), (THREADS,)
        case.owner = _quad_owner(tokens, n_pairs, _quads(n_pairs), _quads(n_pairs))
        case.bytes_moved += 4 * n_pairs
    return rope_cases("03.2", big, fill)


def _cases_launch(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        n_pairs = hidden // 2
        case.inputs.update(inv_freq=freqs(hidden).astype(np.float32),
                           n_pairs=np.uint64(n_pairs))
        case.bytes_moved += 4 * n_pairs
        # "one thread per quad": quad q of the batch is the learner's thread q, whatever block
        case.owner = _quad_owner(tokens, n_pairs, _quads(n_pairs), _quads(n_pairs))
    return rope_cases("03.3", big, fill)


def _cases_pack4(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        quads = _quads(hidden // 2)
        total = tokens * quads
        case.inputs.update(n_pairs=np.uint64(hidden // 2), quads_per_row=np.uint64(quads),
                           total_quads=np.int64(total), base=np.float32(base()))
        case.grid, case.block = (blocks(total),), (THREADS,)
        case.owner = _quad_owner(tokens, hidden // 2, quads, quads)
    return rope_cases("03-pack4-loads-first", big, fill)


_TAIL_HINT = ("the second pair of a row with an odd number of pairs does not exist: load and "
              "store it only when pair + 1 < n_pairs")

ROPE_QUADS = Step(
    id="03.2", notebook=NOTEBOOK, kind="kernel",
    title="A flat grid of quads, rows of an odd number of pairs",
    kernel_name="rope_quads",
    task="quad q: its token (one unsigned division by quads_per_row) and its first pair; "
         "the second pair only when it is still in the row",
    arguments=("x", "out", "positions", "inv_freq", "n_pairs", "quads_per_row",
               "total_quads"),
    contract=f"{ROPE_IN}; inv_freq: float32[n_pairs]; n_pairs: uint64, odd or even; "
             "quads_per_row: uint64 = ceil(n_pairs / 2); total_quads: int64 = tokens * "
             "quads_per_row",
    launch_text=f"grid ceil(total_quads / {THREADS}) blocks of {THREADS} threads",
    signature=QUADS_SIGNATURE,
    reference=("ropelab.kernels.pack4", "rope_pack4_scalar", None),
    reference_signature=signature_of(pack4_scalar.VARIANT),
    counters=("instructions", "int_divrem", "divrem_source", "f64", "sincos", "ld_global",
              "st_global", "loads_after_store"),
    gates=(NO_F64, UNSIGNED, ONE_DIVISION),
    forbid=(NO_MODULO,),
    make_cases=_cases_quads,
    ownership="thread q writes the floats of quad q's one or two pairs",
    hint="token = q // quads_per_row, pair = 2 (q - token * quads_per_row): quads restart "
         "at every row, so a row's odd last pair is a quad of its own",
    bounds_hint=_TAIL_HINT,
)

STEPS = [
    Step(
        id="03.1", notebook=NOTEBOOK, kind="kernel",
        title="Two neighbouring pairs per thread",
        kernel_name="rope_two_pairs",
        task="block = token, thread t = pairs 2t and 2t + 1 of the row (four floats), each pair "
             "with its own angle",
        arguments=("x", "out", "positions", "inv_freq", "n_pairs"),
        contract=f"{ROPE_IN}; inv_freq: float32[n_pairs]; n_pairs: int64, even",
        launch_text="grid: one block per token; block: n_pairs / 2 threads rounded up to whole "
                    "warps",
        signature=PACK4_SIGNATURE,
        reference=("ropelab.kernels.pack4", "rope_pack4_scalar", None),
        reference_signature=signature_of(pack4_scalar.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "ld_global", "st_global",
                  "loads_after_store"),
        gates=(NO_F64, NO_DIVISION),
        make_cases=_cases_two_pairs,
        ownership="thread t of block token writes the four floats of pairs 2t and 2t + 1",
        hint="thread t's pairs are 2t and 2t + 1: floats row + 4t .. row + 4t + 3 with row = 2 "
             "token n_pairs, the second pair rotated by its own angle, positions[token] * "
             "inv_freq[2t + 1]",
        bounds_hint="a thread past the end of its row ran the body: the block is rounded up to "
                    "whole warps, so guard with 2t < n_pairs",
    ),
    ROPE_QUADS,
    Step(
        id="03.3", notebook=NOTEBOOK, kind="launch",
        title="The launch: quad counts on the host",
        kernel_name="launch_quads",
        task="compute quads_per_row and total_quads, then launch rope_quads (step 03.2) with "
             "one thread per quad",
        arguments=("x", "out", "positions", "inv_freq", "n_pairs"),
        contract="x, out, positions, inv_freq: device arrays (as in step 03.2); n_pairs: a "
                 "Python int; rope_quads wants step 03.2's types (uint64 n_pairs and "
                 "quads_per_row, int64 total_quads)",
        launch_text="yours: at most 1024 threads per block, every quad covered, no block "
                    "wholly idle",
        make_cases=_cases_launch,
        **ROPE_QUADS.launching(owned=True),  # "one thread per quad"
        hint="quads_per_row = (n_pairs + 1) // 2 (rounded up: an odd row ends on one pair), "
             "total_quads = positions.size * quads_per_row",
        bounds_hint="a quad past the end: total_quads is tokens x quads_per_row, and the "
                    "kernel guards with it",
    ),
    Step(
        id="03.4", alias="03-pack4-loads-first", notebook=NOTEBOOK, kind="kernel",
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
        counters=("instructions", "int_divrem", "divrem_source", "f64", "sincos", "ld_global",
                  "st_global", "loads_after_store"),
        # the notebook's rules from 03.2 on (notebook 01's: unsigned index math, one division,
        # no %) hold here too: the reordering must not bring back what 03.2 took out
        gates=(NO_F64, UNSIGNED, ONE_DIVISION, LOADS_FIRST),
        forbid=(NO_MODULO,),
        make_cases=_cases_pack4,
        ownership="thread q writes the floats of quad q's one or two pairs",
        hint="both pairs of a quad: elements i, i+1 and, when pair + 1 < n_pairs, i+2, i+3",
        bounds_hint=_TAIL_HINT,
    ),
]
