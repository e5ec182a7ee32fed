"""Notebook 05's ladder of graded steps (05_pair_sincos.ipynb): fewer special functions.

1. one angle per pair, its cos and sin shared by the pair's two floats, from an empty body;
2. strided slots, one pow per thread and a multiply per further slot (the exercise this
   notebook had before);
3. the launch of step 2: the stride and its frequency ratio computed on the host;
4. the whole pair_sincos variant: heads and both pair layouts, from an empty body.

Solutions and recorded wrong attempts: ``notebooks/solutions/05_pair_sincos.py``.
"""

from __future__ import annotations

import numpy as np

from ... import reference
from ...kernels import flat, pair_sincos
from ...tolerance import max_angle
from ..grading import Case, Gate
from .base import Step
from .contracts import float32_argument
from .cases import (base, MAX_POSITION, NO_F64, ONE_THREAD_HINT, ROPE_IN, THREADS, blocks,
                    freqs, owner_of, rng_for, rope_cases, signature_of, tolerance)

NOTEBOOK = "05_pair_sincos"
PAIRS_PER_THREAD = 4
# Counted per pass (ropelab.measure.census.passes): a loop body once, and the copies of it the
# compiler makes for exclusive cases (a grid-stride loop unswitched on n_pairs == 0) once.
ONE_POW = Gate("pow_pass", "<=", 1, "one pass through your kernel computes {got} pow (the goal: "
                                    "{limit} per thread): after the first slot, f = f * "
                                    "stride_ratio")
# The strided steps hand over the ratio between a thread's frequencies: a kernel that ignores
# it makes each next frequency some other way (a second pow of the same base shares the first
# one's lg2, so the pow count sees one).
STRIDE_RATIO_READ = (("stride_ratio", "the step hands you the ratio between a thread's "
                      "frequencies: one pow gives its first slot's f, then each next slot's "
                      "is f * stride_ratio"),)
NO_POW_IN_LOOP = Gate("pow_per_slot", "<=", 0, "math.pow runs inside the loop that rotates the "
                      "slots, once per slot (the goal: once per thread, before that loop): step "
                      "the frequency with f = f * stride_ratio")


def _stride(n_pairs: int) -> int:
    return -(-n_pairs // PAIRS_PER_THREAD)


def _first_slot_only(x, pos, hidden):
    """Every slot of a thread rotated with the frequency of the thread's first slot."""
    n_pairs = hidden // 2
    j = np.arange(n_pairs)
    return [("every slot of this thread used the frequency of its first slot: multiply f by "
             "stride_ratio after each slot",
             reference.rope(x, pos, freqs=freqs(hidden)[j % _stride(n_pairs)]))]


def _exponent_of_the_float(x, pos, hidden):
    """Each pair rotated with the frequency its first float's index would give: pair p with
    base ** (-2 (2p) / hidden)."""
    p = np.arange(hidden // 2, dtype=np.float64)
    return [("the exponent counts floats, not pairs: pair p's frequency is "
             "base ** (exponent_step * p)",
             reference.rope(x, pos, freqs=base() ** (-4.0 * p / hidden)))]


def _ratio_of_neighbours(x, pos, hidden):
    """Slot j + k stride reached with k steps of the neighbouring pairs' ratio."""
    n_pairs = hidden // 2
    stride = _stride(n_pairs)
    p = np.arange(n_pairs)
    f = freqs(hidden)[p % stride] * (base() ** (-2.0 / hidden)) ** (p // stride)
    return [("stride_ratio is the ratio of slots stride pairs apart, base ** (exponent_step * "
             "stride), not of neighbouring pairs", reference.rope(x, pos, freqs=f))]


def _launch_alternatives(x, pos, hidden):
    return _first_slot_only(x, pos, hidden) + _ratio_of_neighbours(x, pos, hidden)


def _specific_first(cases: list[Case], count: int) -> list[Case]:
    """Try the step's own ``count`` mistakes (appended last) before the generic ones: where
    both match (a frequency of pair 2p is also "the next pair's" at p = 1), the step's own
    words say more."""
    for case in cases:
        if case.alternatives:
            case.alternatives = case.alternatives[-count:] + case.alternatives[:-count]
    return cases


def _strided_owner(rows: int, n_pairs: int, stride: int, first_of, step: int,
                   partner: int) -> np.ndarray:
    """Thread row * stride + j writes slots j, j + stride, ... of its row: the floats
    first_of(row) + slot * step and that + partner."""
    owner = np.full(rows * 2 * n_pairs, -1, dtype=np.int64)
    row, slot = np.arange(rows)[:, None], np.arange(n_pairs)[None, :]
    a = first_of(row) + slot * step
    owner[a] = owner[a + partner] = row * stride + slot % stride
    return owner


def _cases_one_angle(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        total = tokens * hidden // 2
        case.inputs.update(n_pairs=np.uint64(hidden // 2), total_pairs=np.int64(total),
                           base=np.float32(base()), exponent_step=np.float32(-2.0 / hidden))
        case.grid, case.block = (blocks(total),), (THREADS,)
        case.owner = owner_of(2 * total, 2)
    return _specific_first(rope_cases("05.1", big, fill, _exponent_of_the_float), 1)


def _strided_fill(case, tokens, hidden):
    n_pairs = hidden // 2
    stride = _stride(n_pairs)
    step = -2.0 / hidden
    total = tokens * stride
    case.inputs.update(n_pairs=np.uint64(n_pairs), stride=np.uint64(stride),
                       total_threads=np.int64(total), base=np.float32(base()),
                       exponent_step=np.float32(step),
                       stride_ratio=np.float32(base() ** (step * stride)))
    case.grid, case.block = (blocks(total),), (THREADS,)
    case.owner = _strided_owner(tokens, n_pairs, stride, lambda row: row * hidden, 2, 1)


def _cases_strided(big: bool) -> list[Case]:
    return rope_cases("05-strided-recurrence", big, _strided_fill, _first_slot_only)


def _stride_ratios(case: Case) -> tuple:
    """05.3's stride_ratio, base ** (exponent_step * stride), in float64: with exponent_step =
    -2 / hidden unrounded, or as the contract's float32 exponent_step (set I read it so)."""
    hidden = int(case.inputs["hidden"])
    stride, b = _stride(hidden // 2), float(case.inputs["base"])
    return (b ** ((-2.0 / hidden) * stride), b ** (float(np.float32(-2.0 / hidden)) * stride))


def _cases_launch(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        # Host values, as a caller has them: the launch derives everything else.
        case.inputs.update(tokens=tokens, hidden=hidden, base=base())
        # "stride threads per row": thread row * stride + j owns its row's slots j, j + stride..
        n_pairs = hidden // 2
        case.owner = _strided_owner(tokens, n_pairs, _stride(n_pairs), lambda row: row * hidden,
                                    2, 1)
    return _specific_first(rope_cases("05.3", big, fill, _launch_alternatives), 2)


# --- step 4: heads and layouts --------------------------------------------------------------

# (tokens, heads, head_dim, interleave); every dim rotates (no pass-through in this step).
HEAD_SHAPES = ((1, 1, 2, True), (3, 2, 10, False), (5, 3, 20, True), (2, 1, 130, False))
HEAD_BIG_SHAPE = (4096, 8, 128, False)


def _head_case(shape, rng, big: bool) -> Case:
    tokens, heads, head_dim, interleave = shape
    x = rng.standard_normal((tokens, heads, head_dim)).astype(np.float32)
    pos = rng.integers(0, MAX_POSITION, tokens).astype(np.int32)
    half_dim = head_dim // 2
    freq = reference.inv_freq(head_dim, base())
    stride = _stride(half_dim)
    exponent_step = -2.0 / head_dim
    expected = reference.rope(x, pos, base=base(), interleave=interleave)
    alternatives = []
    if not big:
        j = np.arange(half_dim)
        alternatives = [
            ("the pairs of the other layout: interleaved pairs are (2j, 2j+1), half-split pairs "
             "(j, j + half_dim); a = first + j * step, b = a + partner",
             reference.rope(x, pos, base=base(), interleave=not interleave)),
            ("the pair turned the wrong way: a sign is flipped (out[a] = x0*c - x1*s, "
             "out[b] = x0*s + x1*c)",
             reference.rope(x, pos, base=base(), interleave=interleave, inverse=True)),
            ("every slot of this thread used the frequency of its first slot: multiply f by "
             "stride_ratio after each slot",
             reference.rope(x, pos, interleave=interleave, freqs=freq[j % stride])),
        ]
    step, partner = (2, 1) if interleave else (1, half_dim)
    per_token = heads * head_dim
    total = tokens * heads * stride
    return Case(
        label=f"{tokens}x{heads}x{head_dim} {'interleaved' if interleave else 'half-split'}",
        inputs={"x": x.ravel(), "positions": pos, "heads": np.uint64(heads),
                "half_dim": np.uint64(half_dim), "stride": np.uint64(stride),
                "total_threads": np.int64(total), "step": np.uint64(step),
                "partner": np.uint64(partner), "base": np.float32(base()),
                "exponent_step": np.float32(exponent_step),
                "stride_ratio": np.float32(base() ** (exponent_step * stride))},
        grid=(blocks(total),), block=(THREADS,),
        expected=expected.ravel(),
        tol=tolerance(float(np.abs(x).max()), max_angle(pos, freq)),
        locate=lambda e: (f"token {e // per_token}, head {(e % per_token) // head_dim}, "
                          f"float {e % head_dim}"),
        unit=lambda e: [e],
        alternatives=alternatives,
        bytes_moved=2 * x.nbytes + pos.nbytes,
        owner=_strided_owner(tokens * heads, half_dim, stride, lambda row: row * head_dim, step,
                             partner),
    )


def _cases_heads(big: bool) -> list[Case]:
    rng = rng_for("05.4")
    return [_head_case(s, rng, big) for s in ((HEAD_BIG_SHAPE,) if big else HEAD_SHAPES)]


_STRIDED_ARGS = ("x", "out", "positions", "n_pairs", "stride", "total_threads", "base",
                 "exponent_step", "stride_ratio")
_STRIDED_CONTRACT = (f"{ROPE_IN}; n_pairs: uint64; stride: uint64 = ceil(n_pairs / "
                     f"{PAIRS_PER_THREAD}), threads per row; total_threads: int64 = tokens * "
                     "stride; base: float32; exponent_step: float32 = -2 / hidden; stride_ratio: "
                     "float32 = base ** (exponent_step * stride)")

MY_ROPE_STRIDED = Step(
    id="05.2", alias="05-strided-recurrence", notebook=NOTEBOOK, kind="kernel",
    title="Strided slots with one pow per thread",
    kernel_name="my_rope_strided",
    task=("thread j of a row rotates slots j, j + stride, ... below n_pairs: one pow for "
          "its first slot's frequency, then f * stride_ratio for each next slot"),
    arguments=_STRIDED_ARGS,
    contract=_STRIDED_CONTRACT,
    launch_text=f"grid ceil(total_threads / {THREADS}) blocks of {THREADS} threads",
    signature=("void(float32[::1], float32[::1], int32[::1], uint64, uint64, int64, float32, "
               "float32, float32)"),
    reference=("ropelab.kernels.pair_sincos", "rope_pair_sincos", None),
    reference_signature=signature_of(pair_sincos.VARIANT),
    counters=("instructions", "int_divrem", "f64", "sincos_pass", "pow_pass", "pow_per_slot"),
    gates=(NO_F64, ONE_POW, NO_POW_IN_LOOP),
    must_read=STRIDE_RATIO_READ,
    make_cases=_cases_strided,
    ownership="thread j of a row writes the pairs of its slots j, j + stride, ... of that row",
    hint="slot j has frequency f_j; slot j + stride has f_j * stride_ratio",
    bounds_hint="a slot past the row: loop while j < n_pairs",
)

STEPS = [
    Step(
        id="05.1", notebook=NOTEBOOK, kind="kernel",
        title="One angle per pair, shared by its two floats",
        kernel_name="rope_one_angle",
        task=("one thread per pair: its frequency base ** (exponent_step * pair), its angle, "
              "one cos and one sin, both floats rotated with them"),
        arguments=("x", "out", "positions", "n_pairs", "total_pairs", "base", "exponent_step"),
        contract=(f"{ROPE_IN}; n_pairs: uint64 = hidden / 2; total_pairs: int64 = tokens * "
                  "n_pairs; base: float32 = 10000; exponent_step: float32 = -2 / hidden"),
        launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
        signature=("void(float32[::1], float32[::1], int32[::1], uint64, int64, float32, "
                   "float32)"),
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=signature_of(flat.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos_pass", "pow_pass"),
        gates=(NO_F64,
               Gate("sincos_pass", "<=", 2, "one pass through your kernel (one pair) computes "
                                            "{got} sin/cos (the goal: {limit}, one sin and one "
                                            "cos): both floats of a pair turn by the same "
                                            "angle"),
               Gate("pow_pass", "<=", 1, "one pass through your kernel (one pair) computes "
                                         "{got} pow (the goal: {limit}): a pair has one "
                                         "frequency"),
               Gate("cos", ">=", 1, "the PTX computes no cos: the step asks for one cos and "
                                    "one sin of the angle (math.cos, math.sin); a cos written "
                                    "as a shifted sin rounds the angle once more"),
               Gate("sin", ">=", 1, "the PTX computes no sin: the step asks for one cos and "
                                    "one sin of the angle (math.cos, math.sin)")),
        make_cases=_cases_one_angle,
        ownership="thread i writes the two floats of pair i",
        hint=("f = math.pow(base, exponent_step * float32(pair)); angle = "
              "float32(positions[token]) * f"),
        bounds_hint=ONE_THREAD_HINT + " (idx < total_pairs)",
    ),
    MY_ROPE_STRIDED,
    Step(
        id="05.3", notebook=NOTEBOOK, kind="launch",
        title="The launch: the stride and its ratio, on the host",
        kernel_name="launch_strided",
        task=("from tokens and hidden: n_pairs, stride = ceil(n_pairs / 4), total_threads, "
              "exponent_step and stride_ratio (in float64, rounded once to float32); then "
              "launch my_rope_strided over total_threads threads"),
        arguments=("x", "out", "positions", "tokens", "hidden", "base"),
        contract=("x, out: device float32[tokens * hidden]; positions: device int32[tokens]; "
                  "tokens, hidden: int; base: float = 10000.0; the kernel wants the types of "
                  "step 05.2's contract: " + _STRIDED_CONTRACT),
        launch_text=("stride threads per row, tokens * stride threads in all, blocks of at "
                     "most 1024, none of them wholly idle"),
        make_cases=_cases_launch,
        **MY_ROPE_STRIDED.launching(owned=True),  # "stride threads per row"
        launch_rules=(float32_argument(_STRIDED_ARGS.index("stride_ratio"), _stride_ratios,
                                       "stride_ratio"),),
        hint=("stride_ratio = base ** (exponent_step * stride), computed in Python float64 and "
              "passed as float32"),
        bounds_hint="a launch argument is off: total_threads = tokens * stride",
    ),
    Step(
        id="05.4", notebook=NOTEBOOK, kind="kernel",
        title="The pair_sincos variant: heads and both pair layouts",
        kernel_name="rope_pair_sincos_heads",
        task=("stride threads per head: thread j of a head rotates slots j, j + stride, ... of "
              "floats a = first + j * step and a + partner, one pow per thread"),
        arguments=("x", "out", "positions", "heads", "half_dim", "stride", "total_threads",
                   "step", "partner", "base", "exponent_step", "stride_ratio"),
        contract=("x, out: float32[tokens * heads * head_dim]; positions: int32[tokens]; heads, "
                  "half_dim (= head_dim / 2, every pair rotates), stride (= ceil(half_dim / 4)): "
                  "uint64; total_threads: int64 = tokens * heads * stride; step, partner: "
                  "uint64, (2, 1) interleaved, (1, half_dim) half-split; base, exponent_step "
                  "(= -2 / head_dim), stride_ratio: float32"),
        launch_text=f"grid ceil(total_threads / {THREADS}) blocks of {THREADS} threads",
        signature=("void(float32[::1], float32[::1], int32[::1], uint64, uint64, uint64, int64, "
                   "uint64, uint64, float32, float32, float32)"),
        reference=("ropelab.kernels.pair_sincos", "rope_pair_sincos", None),
        reference_signature=signature_of(pair_sincos.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos_pass", "pow_pass", "pow_per_slot"),
        gates=(NO_F64, ONE_POW, NO_POW_IN_LOOP),
        must_read=STRIDE_RATIO_READ,
        make_cases=_cases_heads,
        ownership=("thread j of a head writes the floats a and a + partner of its slots j, "
                   "j + stride, ... of that head"),
        hint=("head_row = i // stride, j = i - head_row * stride, first = 2 * head_row * "
              "half_dim; the token is head_row // heads"),
        bounds_hint=ONE_THREAD_HINT + " (idx < total_threads)",
        bounds_hints={"positions": "positions has one entry per token, and a token has "
                                   "`heads` heads: read positions[head_row // heads]"},
    ),
]
