"""Notebook 04's ladder of graded steps (04_freq_table_cache.ipynb): tables instead of pow.

1. read a host frequency table (``inv_freq[pair]`` replaces the pow), from an empty body;
2. stage that table in shared memory once per block (a missing barrier is a race);
3. read cos and sin from a float64-built cache (the exercise this notebook had before);
4. the whole freq_table variant: heads, both pair layouts, a partial rotation, from an empty
   body;
5. its launch: grid and block from the shape.

Solutions and recorded wrong attempts: ``notebooks/solutions/04_freq_table_cache.py``.
"""

from __future__ import annotations

import numpy as np

from ... import reference
from ...kernels import freq_table
from ...tolerance import max_angle
from ..grading import Case, Gate
from .base import Step
from .cases import (base, MAX_POSITION, NO_F64, ONE_THREAD_HINT, ROPE_IN, THREADS, blocks,
                    freqs, owner_of, rng_for, rope_case, signature_of, tolerance)

NOTEBOOK = "04_freq_table_cache"
TABLE_CAPACITY = 128  # the starter's shared table: at most this many pairs a row (step 2)
SHARED_BIG_SHAPE = (16384, 256)  # the timing shape of step 2: 128 pairs fill the table
NO_POW = Gate("pow", "<=", 0, "the PTX still computes {got} pow (the goal: {limit}): the "
                              "frequency is inv_freq[pair], computed on the host")
_TABLE_SIGNATURE = "void(float32[::1], float32[::1], int32[::1], float32[::1], uint64, int64)"
_TABLE_CONTRACT = (f"{ROPE_IN}; inv_freq: float32[n_pairs], the pair's frequency computed on "
                   "the host in float64; n_pairs: uint64 = hidden / 2; total_pairs: int64 = "
                   "tokens * n_pairs")


def _table_cases(step_id: str, big: bool, big_shape=(4096, 1024)) -> list[Case]:
    """The flat one-thread-per-pair cases with a frequency table, as in notebook 01."""
    rng = rng_for(step_id)
    cases = []
    for tokens, hidden in ((big_shape,) if big else ((1, 2), (3, 10), (5, 130))):
        case = rope_case(tokens, hidden, rng, big=big)
        total = tokens * hidden // 2
        case.inputs.update(inv_freq=freqs(hidden).astype(np.float32),
                           n_pairs=np.uint64(hidden // 2), total_pairs=np.int64(total))
        case.grid, case.block = (blocks(total),), (THREADS,)
        case.owner = owner_of(2 * total, 2)  # thread i writes pair i's two floats
        case.bytes_moved += 4 * hidden // 2
        cases.append(case)
    return cases


def _cases_table(big: bool) -> list[Case]:
    return _table_cases("04.1", big)


def _cases_shared(big: bool) -> list[Case]:
    return _table_cases("04.2", big, SHARED_BIG_SHAPE)


def _cases_cache(big: bool) -> list[Case]:
    rng = rng_for("04-cache-lookup")
    cases = []
    for tokens, hidden in (((4096, 1024),) if big else ((1, 2), (3, 10), (5, 130))):
        case = rope_case(tokens, hidden, rng, big=big)
        cos_c, sin_c = freq_table.cos_sin_cache(freqs(hidden), MAX_POSITION)
        total = tokens * hidden // 2
        case.inputs.update(cos_cache=cos_c, sin_cache=sin_c, n_pairs=np.uint64(hidden // 2),
                           total_pairs=np.int64(total))
        case.grid, case.block = (blocks(total),), (THREADS,)
        case.owner = owner_of(2 * total, 2)
        case.bytes_moved += 2 * 4 * total  # one cos and one sin read per pair
        cases.append(case)
    return cases


# --- steps 4 and 5: heads, layouts, partial rotation ----------------------------------------

# (tokens, heads, head_dim, rotary_dim, interleave): a head of one pair; half-split with a
# pass-through tail; several heads with a tail; a head of 65 slots, more than a block of 64.
HEAD_SHAPES = ((1, 1, 2, 2, True), (3, 2, 10, 6, False), (5, 3, 20, 12, True),
               (2, 1, 130, 130, False))
HEAD_BIG_SHAPE = (4096, 8, 128, 64, False)
LAUNCH_WIDE_SHAPE = (40, 4, 16, 8, True)  # 1280 slots: more than one block may hold  # timing: 8 heads of 128, half of each rotated


def slot_owner(tokens: int, heads: int, head_dim: int, n_pairs: int, step: int,
               partner: int) -> np.ndarray:
    """Thread head_row * half_dim + j writes slot j of its head: floats a = first + j * step
    and a + partner when j < n_pairs, floats first + 2j and first + 2j + 1 otherwise."""
    half_dim = head_dim // 2
    owner = np.full(tokens * heads * head_dim, -1, dtype=np.int64)
    head_row, j = np.arange(tokens * heads)[:, None], np.arange(half_dim)[None, :]
    first = head_row * head_dim
    rotated = j < n_pairs
    a = np.where(rotated, first + j * step, first + 2 * j)
    b = np.where(rotated, a + partner, a + 1)
    owner[a] = owner[b] = head_row * half_dim + j
    return owner


def _head_case(shape, rng, big: bool) -> Case:
    tokens, heads, head_dim, rotary_dim, interleave = shape
    x = rng.standard_normal((tokens, heads, head_dim)).astype(np.float32)
    pos = rng.integers(0, MAX_POSITION, tokens).astype(np.int32)
    freq = reference.inv_freq(rotary_dim, base())
    expected = reference.rope(x, pos, base=base(), rotary_dim=rotary_dim, interleave=interleave)
    alternatives = []
    if not big:
        alternatives = [
            ("the pairs of the other layout: interleaved pairs are (2j, 2j+1), half-split pairs "
             "(j, j + n_pairs); a = first + j * step, b = a + partner",
             reference.rope(x, pos, base=base(), rotary_dim=rotary_dim, interleave=not interleave)),
            ("the pair turned the wrong way: a sign is flipped (out[a] = x0*c - x1*s, "
             "out[b] = x0*s + x1*c)",
             reference.rope(x, pos, base=base(), rotary_dim=rotary_dim, interleave=interleave,
                            inverse=True)),
        ]
    half_dim = head_dim // 2
    step, partner = (2, 1) if interleave else (1, rotary_dim // 2)
    per_token = heads * head_dim
    return Case(
        label=f"{tokens}x{heads}x{head_dim} rotary {rotary_dim} "
              f"{'interleaved' if interleave else 'half-split'}",
        inputs={"x": x.ravel(), "positions": pos, "inv_freq": freq.astype(np.float32),
                "heads": np.uint64(heads), "half_dim": np.uint64(half_dim),
                "n_pairs": np.uint64(rotary_dim // 2),
                "total_slots": np.int64(tokens * heads * half_dim),
                "step": np.uint64(step), "partner": np.uint64(partner)},
        grid=(blocks(tokens * heads * half_dim),), block=(THREADS,),
        expected=expected.ravel(),
        tol=tolerance(float(np.abs(x).max()), max_angle(pos, freq)),
        locate=lambda e: (f"token {e // per_token}, head {(e % per_token) // head_dim}, "
                          f"float {e % head_dim}"),
        unit=lambda e: [e],
        alternatives=alternatives,
        bytes_moved=2 * x.nbytes + pos.nbytes,
        owner=slot_owner(tokens, heads, head_dim, rotary_dim // 2, step, partner),
    )


def _cases_heads(big: bool) -> list[Case]:
    rng = rng_for("04.4")
    return [_head_case(s, rng, big) for s in ((HEAD_BIG_SHAPE,) if big else HEAD_SHAPES)]


def _cases_heads_launch(big: bool) -> list[Case]:
    rng = rng_for("04.5")
    cases = []
    for shape in ((HEAD_BIG_SHAPE,) if big else HEAD_SHAPES + (LAUNCH_WIDE_SHAPE,)):
        case = _head_case(shape, rng, big)
        tokens, heads, head_dim, _, interleave = shape
        # A caller's host values: the launch derives the kernel's typed scalars from them.
        case.inputs.update(tokens=tokens, heads=heads, head_dim=head_dim, interleave=interleave)
        cases.append(case)
    return cases


_HEADS_CONTRACT = ("x, out: float32[tokens * heads * head_dim]; positions: int32[tokens]; "
                   "inv_freq: float32[n_pairs]; heads, half_dim (= head_dim / 2), n_pairs "
                   "(= rotary_dim / 2): uint64; total_slots: int64 = tokens * heads * half_dim; "
                   "step, partner: uint64, (2, 1) for interleaved pairs, (1, n_pairs) for "
                   "half-split pairs")
_HEADS_SIGNATURE = ("void(float32[::1], float32[::1], int32[::1], float32[::1], uint64, uint64, "
                    "uint64, int64, uint64, uint64)")

FREQ_TABLE_HEADS = Step(
    id="04.4", notebook=NOTEBOOK, kind="kernel",
    title="The freq_table variant: heads, both layouts, a partial rotation",
    kernel_name="rope_freq_table_heads",
    task=("one thread per slot of a head: slot j < n_pairs rotates floats a = first + "
          "j * step and a + partner; a slot past them copies floats 2j and 2j + 1"),
    arguments=("x", "out", "positions", "inv_freq", "heads", "half_dim", "n_pairs",
               "total_slots", "step", "partner"),
    contract=_HEADS_CONTRACT,
    launch_text=f"grid ceil(total_slots / {THREADS}) blocks of {THREADS} threads",
    signature=_HEADS_SIGNATURE,
    reference=("ropelab.kernels.freq_table", "rope_freq_table", None),
    reference_signature=signature_of(freq_table.VARIANT),
    counters=("instructions", "int_divrem", "f64", "sincos", "pow", "ld_global"),
    gates=(NO_F64, NO_POW),
    make_cases=_cases_heads,
    ownership=("thread i writes the two floats of slot j of its head: a and a + partner for "
               "j < n_pairs, first + 2j and first + 2j + 1 past them"),
    hint=("head_row = i // half_dim (token * heads + head), j = i - head_row * half_dim, "
          "first = 2 * head_row * half_dim; the token is head_row // heads"),
    bounds_hint=ONE_THREAD_HINT + " (idx < total_slots)",
    bounds_hints={"positions": "positions has one entry per token, and a token has "
                               "`heads` heads: read positions[head_row // heads]",
                  "inv_freq": "inv_freq has n_pairs entries: only slots j < n_pairs rotate; "
                              "the others copy their two floats"},
)

STEPS = [
    Step(
        id="04.1", notebook=NOTEBOOK, kind="kernel",
        title="A frequency table read instead of a pow",
        kernel_name="rope_table_read",
        task=("one thread per pair: the angle is the token's position times inv_freq[pair]; "
              "rotate the pair"),
        arguments=("x", "out", "positions", "inv_freq", "n_pairs", "total_pairs"),
        contract=_TABLE_CONTRACT,
        launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
        signature=_TABLE_SIGNATURE,
        reference=("ropelab.kernels.freq_table", "rope_freq_table", None),
        reference_signature=signature_of(freq_table.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow", "ld_global"),
        gates=(NO_F64, NO_POW),
        make_cases=_cases_table,
        ownership="thread i writes the two floats of pair i",
        hint=("angle = float32(positions[token]) * inv_freq[pair], with token = i // n_pairs "
              "and pair = i - token * n_pairs"),
        bounds_hint=ONE_THREAD_HINT + " (idx < total_pairs)",
        bounds_hints={"inv_freq": "inv_freq has one entry per pair: index it with the pair, "
                                  "not the token or the float",
                      "positions": "positions has one entry per token: index it with the token"},
    ),
    Step(
        id="04.2", notebook=NOTEBOOK, kind="kernel",
        title="The table staged in shared memory, once per block",
        kernel_name="rope_shared_table",
        task=("copy inv_freq into the block's shared table (every thread helps), make the "
              "block wait, then read the frequency from the shared table"),
        arguments=("x", "out", "positions", "inv_freq", "n_pairs", "total_pairs"),
        contract=_TABLE_CONTRACT + f"; n_pairs <= {TABLE_CAPACITY}",
        launch_text=(f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads: a block "
                     "covers pairs of several rows, so a thread reads entries other threads "
                     "copied"),
        signature=_TABLE_SIGNATURE,
        reference=("ropelab.kernels.freq_table", "rope_freq_table", None),
        reference_signature=signature_of(freq_table.VARIANT),
        counters=("instructions", "f64", "sincos", "pow", "ld_global"),
        gates=(NO_F64, NO_POW),
        shared=True,
        shared_copy=("inv_freq",),
        make_cases=_cases_shared,
        ownership="thread i writes the two floats of pair i",
        hint=("copy with k = threadIdx.x, k += blockDim.x while k < n_pairs, then "
              "cuda.syncthreads(), then angle = float32(positions[token]) * table[pair]"),
        bounds_hint=ONE_THREAD_HINT + " (idx < total_pairs)",
        bounds_hints={"inv_freq": "the copy ran past the table: copy while k < n_pairs"},
    ),
    Step(
        id="04.3", alias="04-cache-lookup", notebook=NOTEBOOK, kind="kernel",
        title="The cos/sin cache lookup",
        kernel_name="my_rope_cache",
        task=("one thread per pair, as in 04.1, with its cos and sin read from the caches at the "
              "token's position instead of computed"),
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
        make_cases=_cases_cache,
        ownership="thread i writes the two floats of pair i",
        hint="c = cos_cache[positions[token], pair] and s = sin_cache[positions[token], pair]",
        bounds_hint=("an index past a cache's end: the row is the token's position "
                     "(positions[token]), the column the pair"),
    ),
    FREQ_TABLE_HEADS,
    Step(
        id="04.5", notebook=NOTEBOOK, kind="launch",
        title="Launch the freq_table kernel: grid and block from the shape",
        kernel_name="launch_freq_table",
        task=("compute half_dim, n_pairs, total_slots, step and partner from the shape, choose "
              "a block size, and launch rope_freq_table_heads over every slot"),
        arguments=("x", "out", "positions", "inv_freq", "tokens", "heads", "head_dim",
                   "interleave"),
        contract=("x, out, positions, inv_freq: device arrays as in step 04.4 (n_pairs = "
                  "inv_freq.size); tokens, heads, head_dim: int; interleave: bool"),
        launch_text=("one thread per slot: tokens * heads * head_dim / 2 threads, blocks of at "
                     "most 1024, none of them wholly idle"),
        make_cases=_cases_heads_launch,
        **FREQ_TABLE_HEADS.launching(owned=True),  # "one thread per slot"
        hint="blocks = ceil(total_slots / threads); the kernel's scalars are numba.uint64",
        bounds_hint="a launch argument is off: total_slots counts every slot, not only pairs",
    ),
]
