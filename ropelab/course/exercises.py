"""The kernel exercises of the course, and the grader's entry point.

Each notebook 00-06 ends with a starter ``@cuda.jit`` kernel whose marked part (``...``) the
learner writes, and a cell that grades it::

    from ropelab.course import exercises
    verdict = exercises.check(my_rope_flat, "01-flat-index")

An :class:`Exercise` holds everything the grader needs: the notebook and the name of the
starter kernel, the launch contract (the argument list, its PTX signature, and how the grader
launches it), the test cases (shapes that fill no block evenly, random positions), the ropelab
kernel it corresponds to, and the census counters that matter for it, some of them required
(:class:`~.grading.Gate`).  :mod:`.grading` does the checking; solutions and recorded wrong
attempts live in ``notebooks/solutions/`` and are run by ``python -m ropelab exercises --verify``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .. import reference
from ..kernels import block2d, flat, freq_table, fused_qknorm_rope, pack4_scalar, pair_sincos
from ..kernels.plan import census_problem
from ..problem import FusedProblem
from ..tolerance import max_angle
from . import kernel_census
from .grading import Case, Gate, Verdict, grade, tolerance


def _signature(variant, options=None, problem=None) -> str:
    """The signature ropelab's own launch passes to ``variant``'s kernel (from its plan)."""
    return variant.plan(problem or census_problem(variant.features), options or {}).signature()

NOTEBOOK_SOURCES = Path(__file__).resolve().parents[2] / "notebooks" / "src"
SOLUTIONS = NOTEBOOK_SOURCES.parent / "solutions"
BASE = 10000.0
MAX_POSITION = 1024  # random positions below this: large enough angles, a tight tolerance
THREADS = 64  # block size of the 1-D launches: the small shapes still leave a partial block


@dataclass(frozen=True)
class Exercise:
    """One kernel exercise; see the module docstring."""

    id: str
    notebook: str  # file stem under notebooks/, e.g. "01_flat_divmod"
    title: str
    kernel_name: str  # the starter's function name
    task: str  # one sentence: what to write
    arguments: tuple  # the launch contract: argument names in order
    contract: str  # argument types and meaning, in words
    launch_text: str  # grid and block, in words
    signature: str  # the contract as a PTX signature (the census compiles the learner's kernel)
    reference: tuple  # (module, qualname, factory args or None) of ropelab's kernel
    reference_signature: str
    counters: tuple  # census counters shown next to the reference's
    gates: tuple  # census counters required (Gate)
    make_cases: Callable[[bool], list]  # big=False: the graded cases; True: one timing case
    hint: str  # when no typical mistake matches the wrong element
    bounds_hint: str

    @property
    def reference_label(self) -> str:
        module, name, factory_args = self.reference
        if factory_args is None:
            return f"ropelab's {name}"
        # A kernel built by a factory: name it by its module and arguments.
        return f"ropelab's {module.rsplit('.', 1)[-1]}({', '.join(map(repr, factory_args))})"

    def reference_job(self) -> dict:
        return kernel_census.ship_reference(*self.reference)

    def cases(self) -> list[Case]:
        return self.make_cases(False)

    def timing_case(self) -> Case:
        return self.make_cases(True)[0]

    def check(self, kernel) -> Verdict:
        """Grade ``kernel``, print the verdict, return it (never raises for a wrong kernel)."""
        verdict = grade(self, kernel)
        print(verdict)
        return verdict

    def starter_source(self) -> str | None:
        """The starter cell of the notebook source (None outside a source checkout)."""
        path = NOTEBOOK_SOURCES / f"{self.notebook}.py"
        if not path.is_file():
            return None
        cells, current = [], []
        for line in path.read_text().splitlines(keepends=True):
            if line.startswith("# %%"):  # a cell starts (percent format)
                cells.append("".join(current))
                current = []
            else:
                current.append(line)
        cells.append("".join(current))
        found = [c for c in cells if f"def {self.kernel_name}(" in c and "@cuda.jit" in c]
        return found[0].strip("\n") + "\n" if len(found) == 1 else None


# --------------------------------------------------------------------------------------------
# Cases: shapes, inputs, the reference output and the typical mistakes
# --------------------------------------------------------------------------------------------

SMALL_SHAPES = ((1, 2), (3, 10), (5, 130))  # (tokens, hidden): 1, 15 and 325 pairs
BIG_SHAPE = (4096, 1024)  # for timing on a GPU


def _rng(ex_id: str) -> np.random.Generator:
    # Fixed per exercise: the same cases every run, so a verdict is reproducible.
    return np.random.default_rng(sum(map(ord, ex_id)))


def _freqs(hidden: int, shift: int = 0) -> np.ndarray:
    """``base ** (-2 (i + shift) / hidden)``: the frequencies, or those of the pair ``shift``
    further on (what a pair index off by one computes)."""
    i = np.arange(hidden // 2, dtype=np.float64) + shift
    return BASE ** (-2.0 * i / hidden)


def _swapped_cos_sin(x, pos, freqs):
    theta = reference.angles(pos, freqs)
    x0, x1 = x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64)
    out = np.empty(x.shape)
    out[:, 0::2] = x0 * np.sin(theta) - x1 * np.cos(theta)
    out[:, 1::2] = x0 * np.cos(theta) + x1 * np.sin(theta)
    return out


def _rope_case(tokens: int, hidden: int, rng, *, big: bool,
               extra_alternatives: Callable | None = None) -> Case:
    """A [tokens, hidden] interleaved RoPE case: x, positions, reference and mistakes."""
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    pos = rng.integers(0, MAX_POSITION, tokens).astype(np.int32)
    freqs = _freqs(hidden)
    expected = reference.rope(x, pos)
    alternatives = []
    if not big:
        alternatives = [
            ("the pair turned the wrong way: a sign is flipped (out[2i] = x0*c - x1*s, "
             "out[2i+1] = x0*s + x1*c)", reference.rope(x, pos, inverse=True)),
            ("cos and sin are swapped", _swapped_cos_sin(x, pos, freqs)),
            ("pair index off by one: this pair was rotated with the frequency of the next pair",
             reference.rope(x, pos, freqs=_freqs(hidden, 1))),
            ("pair index off by one: this pair was rotated with the frequency of the previous pair",
             reference.rope(x, pos, freqs=_freqs(hidden, -1))),
            ("rotated by the row number instead of the token's position: read positions[token]",
             reference.rope(x, np.arange(tokens))),
        ]
        if extra_alternatives is not None:
            alternatives += extra_alternatives(x, pos, hidden)
    return Case(
        label=f"{tokens}x{hidden}",
        inputs={"x": x.ravel(), "positions": pos},
        grid=(1,), block=(1,),
        expected=expected,
        tol=tolerance(float(np.abs(x).max()), max_angle(pos, freqs)),
        locate=lambda e: f"token {e // hidden}, pair {(e % hidden) // 2}",
        unit=lambda e: [e - e % 2, e - e % 2 + 1],
        alternatives=alternatives,
        bytes_moved=2 * x.nbytes + pos.nbytes,
    )


def _blocks(work: int, threads: int = THREADS) -> int:
    return (work + threads - 1) // threads


def _rope_cases(ex_id: str, big: bool, fill: Callable, extra_alternatives=None) -> list[Case]:
    """One case per shape (or the timing shape), completed by ``fill(case, tokens, hidden)``."""
    rng = _rng(ex_id)
    cases = []
    for tokens, hidden in ((BIG_SHAPE,) if big else SMALL_SHAPES):
        case = _rope_case(tokens, hidden, rng, big=big, extra_alternatives=extra_alternatives)
        fill(case, tokens, hidden)
        cases.append(case)
    return cases


# --- 00: one thread per element, cos/sin given ----------------------------------------------

def _cases_00(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        freqs = _freqs(hidden)
        theta = reference.angles(case.inputs["positions"], freqs)
        n = tokens * hidden
        case.inputs.update(cos_t=np.cos(theta).astype(np.float32).ravel(),
                           sin_t=np.sin(theta).astype(np.float32).ravel(), n=np.int64(n))
        case.grid, case.block = (_blocks(n),), (THREADS,)
        case.bytes_moved += 2 * case.inputs["cos_t"].nbytes
    return _rope_cases("00-first-kernel", big, fill)


# --- 01: the flat kernel's index math ------------------------------------------------------

def _cases_01(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        total = tokens * hidden // 2
        case.inputs.update(n_pairs=np.uint64(hidden // 2), total_pairs=np.int64(total),
                           base=np.float32(BASE))
        case.grid, case.block = (_blocks(total),), (THREADS,)
    return _rope_cases("01-flat-index", big, fill)


# --- 02: block2d's stride loop -------------------------------------------------------------

BLOCK2D_THREADS = 32  # fewer threads than pairs (65 in the widest case): the loop must stride


def _cases_02(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        case.inputs.update(n_pairs=np.uint64(hidden // 2), base=np.float32(BASE))
        case.grid, case.block = (tokens,), ((256 if big else BLOCK2D_THREADS),)
    return _rope_cases("02-block2d-stride", big, fill)


# --- 03: pack4_scalar with its loads first -------------------------------------------------

def _cases_03(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        quads = (hidden // 2 + 1) // 2
        total = tokens * quads
        case.inputs.update(n_pairs=np.uint64(hidden // 2), quads_per_row=np.uint64(quads),
                           total_quads=np.int64(total), base=np.float32(BASE))
        case.grid, case.block = (_blocks(total),), (THREADS,)
    return _rope_cases("03-pack4-loads-first", big, fill)


# --- 04: the cos/sin cache lookup ----------------------------------------------------------

def _cases_04(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        cos_c, sin_c = freq_table.cos_sin_cache(_freqs(hidden), MAX_POSITION)
        total = tokens * hidden // 2
        case.inputs.update(cos_cache=cos_c, sin_cache=sin_c, n_pairs=np.uint64(hidden // 2),
                           total_pairs=np.int64(total))
        case.grid, case.block = (_blocks(total),), (THREADS,)
        case.bytes_moved += 2 * 4 * total  # one cos and one sin read per pair
    return _rope_cases("04-cache-lookup", big, fill)


# --- 05: strided slots, one pow per thread --------------------------------------------------

PAIRS_PER_THREAD = 4


def _first_slot_only(x, pos, hidden):
    """Every slot of a thread rotated with the frequency of the thread's first slot."""
    n_pairs = hidden // 2
    stride = -(-n_pairs // PAIRS_PER_THREAD)
    j = np.arange(n_pairs)
    freqs = _freqs(hidden)[j % stride]
    return [("every slot of this thread used the frequency of its first slot: multiply f by "
             "stride_ratio after each slot", reference.rope(x, pos, freqs=freqs))]


def _cases_05(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        n_pairs = hidden // 2
        stride = -(-n_pairs // PAIRS_PER_THREAD)
        step = -2.0 / hidden
        total = tokens * stride
        case.inputs.update(n_pairs=np.uint64(n_pairs), stride=np.uint64(stride),
                           total_threads=np.int64(total), base=np.float32(BASE),
                           exponent_step=np.float32(step),
                           stride_ratio=np.float32(BASE ** (step * stride)))
        case.grid, case.block = (_blocks(total),), (THREADS,)
    return _rope_cases("05-strided-recurrence", big, fill, _first_slot_only)


# --- 06: the shuffle butterfly of RMSNorm ---------------------------------------------------

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
    rng = _rng("06-shuffle-rms")
    cases = []
    for rows in ((4096 * 16,) if big else (1, 6)):
        x = rng.standard_normal((rows, ROW)).astype(np.float32)
        weight = rng.uniform(0.5, 1.5, ROW).astype(np.float32)
        eps = np.float32(1e-6)
        expected = reference.rms_norm(x, weight, float(eps))
        case = Case(
            label=f"{rows} row{'s' if rows > 1 else ''} of {ROW}",
            inputs={"x": x.ravel(), "weight": weight, "rows": np.int64(rows), "eps": eps},
            grid=(_blocks(rows, WARPS_PER_BLOCK),), block=(32 * WARPS_PER_BLOCK,),
            expected=expected,
            tol=tolerance(float(np.abs(expected).max()), 0.0),
            locate=lambda e: f"row {e // ROW}, element {e % ROW} (lane {(e % ROW) // 2})",
            unit=lambda e: [e],
            bytes_moved=2 * x.nbytes,
        )
        case.diagnose = _diagnose_rms(case)
        cases.append(case)
    return cases


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------

_ROPE_IN = ("x, out: float32[tokens * hidden] (rows one after the other); "
            "positions: int32[tokens]")
NO_F64 = Gate("f64", "<=", 0, "the fast-math build has {got} float64 instructions (the goal: "
              "{limit}): in Numba a bare literal (2.0) or an int / int division is a float64; "
              "wrap it in float32(...)")
_ONE_THREAD_HINT = ("a thread past the end ran the body: the grid is rounded up to whole "
                    "blocks, so guard with the number of work items")

EXERCISES = {ex.id: ex for ex in (
    Exercise(
        id="00-first-kernel", notebook="00_rope_in_one_notebook",
        title="A first kernel: one thread per float, with a bounds guard",
        kernel_name="rotate_elements",
        task="skip threads past the end, then write out[i] from x, cos_t and sin_t",
        arguments=("x", "out", "cos_t", "sin_t", "n"),
        contract=("x, out: float32[tokens * hidden] (rows one after the other); "
                  "cos_t, sin_t: float32[tokens * hidden / 2], the cos and sin of "
                  "each pair's angle, in pair order; n: int64, the number of floats"),
        launch_text=f"grid ceil(n / {THREADS}) blocks of {THREADS} threads",
        signature="void(float32[::1], float32[::1], float32[::1], float32[::1], int64)",
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=_signature(flat.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "ld_global", "st_global"),
        gates=(NO_F64,),
        make_cases=_cases_00,
        hint="an even i is the first float of pair i // 2: out[i] = x[i]*c - x[i+1]*s; an odd i "
             "is the second: out[i] = x[i-1]*s + x[i]*c",
        bounds_hint=_ONE_THREAD_HINT,
    ),
    Exercise(
        id="01-flat-index", notebook="01_flat_divmod",
        title="The flat kernel's index math and bounds guard",
        kernel_name="my_rope_flat",
        task="the guard, then the token and the pair of global thread idx, with one division",
        arguments=("x", "out", "positions", "n_pairs", "total_pairs", "base"),
        contract=(f"{_ROPE_IN}; n_pairs: uint64 = hidden / 2; total_pairs: int64 = tokens * "
                  "n_pairs; base: float32 = 10000"),
        launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
        signature=_signature(flat.VARIANT),
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=_signature(flat.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow"),
        gates=(NO_F64, Gate("int_divrem", "<=", 2, "the PTX has {got} integer div/rem "
                            "instructions (the goal: {limit}: one unsigned division, which the "
                            "compiler emits as a 64-bit and a 32-bit path): a signed int64 // or "
                            "% costs a division with sign fix-ups; use uint64 index math and take "
                            "the pair as i - token * n_pairs")),
        make_cases=_cases_01,
        hint="token = i // n_pairs and pair = i - token * n_pairs, with i = uint64(idx)",
        bounds_hint=_ONE_THREAD_HINT + " (idx < total_pairs)",
    ),
    Exercise(
        id="02-block2d-stride", notebook="02_block2d",
        title="block2d's stride loop: every pair of a row, whatever the block size",
        kernel_name="my_rope_block2d",
        task="the loop over this thread's pairs: tid, tid + blockDim, tid + 2 blockDim, ...",
        arguments=("x", "out", "positions", "n_pairs", "base"),
        contract=f"{_ROPE_IN}; n_pairs: uint64 = hidden / 2; base: float32 = 10000",
        launch_text=(f"grid: one block per token, {BLOCK2D_THREADS} threads per block (fewer than "
                     "the pairs of the widest row, as 1024 threads are for 2048 pairs)"),
        signature=_signature(block2d.VARIANT),
        reference=("ropelab.kernels.block2d", "rope_block2d", None),
        reference_signature=_signature(block2d.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow"),
        gates=(NO_F64, Gate("int_divrem", "<=", 0, "the PTX has {got} integer div/rem "
                            "instructions (the goal: {limit}): blockIdx.x is the token and "
                            "threadIdx.x the first pair, no division needed")),
        make_cases=_cases_02,
        hint="the loop runs while pair < n_pairs and steps by cuda.blockDim.x",
        bounds_hint="the loop ran past the row: stop while pair < n_pairs",
    ),
    Exercise(
        id="03-pack4-loads-first", notebook="03_pack4",
        title="pack4_scalar with every load before the first store",
        kernel_name="my_rope_pack4_scalar",
        task="reorder the body so both pairs are loaded before the first store to out",
        arguments=("x", "out", "positions", "n_pairs", "quads_per_row", "total_quads", "base"),
        contract=(f"{_ROPE_IN}; n_pairs: uint64 = hidden / 2; quads_per_row: uint64 = "
                  "ceil(n_pairs / 2); total_quads: int64 = tokens * quads_per_row; base: float32"),
        launch_text=f"grid ceil(total_quads / {THREADS}) blocks of {THREADS} threads",
        signature=_signature(pack4_scalar.VARIANT),
        reference=("ropelab.kernels.pack4", "rope_pack4_scalar", None),
        reference_signature=_signature(pack4_scalar.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "ld_global", "st_global",
                  "loads_after_store"),
        gates=(NO_F64, Gate("loads_after_store", "<=", 0, "{got} global loads come after the "
                            "first store (the goal: {limit}): out may be x itself, so the second "
                            "pair's loads wait for the first pair's stores; load all four floats "
                            "first")),
        make_cases=_cases_03,
        hint="both pairs of a quad: elements i, i+1 and, when pair + 1 < n_pairs, i+2, i+3",
        bounds_hint=("the second pair of a row with an odd number of pairs does not exist: "
                     "load and store it only when pair + 1 < n_pairs"),
    ),
    Exercise(
        id="04-cache-lookup", notebook="04_freq_table_cache",
        title="The cos/sin cache lookup",
        kernel_name="my_rope_cache",
        task="read this pair's cos and sin from the caches at the token's position",
        arguments=("x", "out", "positions", "cos_cache", "sin_cache", "n_pairs", "total_pairs"),
        contract=(f"{_ROPE_IN}; cos_cache, sin_cache: float32[{MAX_POSITION}, n_pairs], "
                  "cos/sin of position x frequency built in float64; n_pairs: uint64; "
                  "total_pairs: int64"),
        launch_text=f"grid ceil(total_pairs / {THREADS}) blocks of {THREADS} threads",
        signature=("void(float32[::1], float32[::1], int32[::1], float32[:, ::1], "
                   "float32[:, ::1], uint64, int64)"),
        reference=("ropelab.kernels.freq_table", "rope_cos_sin_cache", None),
        reference_signature=_signature(freq_table.VARIANT, {"cache": True, "max_positions": 16}),
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
    Exercise(
        id="05-strided-recurrence", notebook="05_pair_sincos",
        title="Strided slots with one pow per thread",
        kernel_name="my_rope_strided",
        task="the loop over slots j, j + stride, ...: rotate, then step f and j",
        arguments=("x", "out", "positions", "n_pairs", "stride", "total_threads", "base",
                   "exponent_step", "stride_ratio"),
        contract=(f"{_ROPE_IN}; n_pairs: uint64; stride: uint64 = ceil(n_pairs / "
                  f"{PAIRS_PER_THREAD}), threads per row; total_threads: int64 = tokens * stride; "
                  "base: float32; exponent_step: float32 = -2 / hidden; stride_ratio: float32 = "
                  "base ** (exponent_step * stride)"),
        launch_text=f"grid ceil(total_threads / {THREADS}) blocks of {THREADS} threads",
        signature=("void(float32[::1], float32[::1], int32[::1], uint64, uint64, int64, float32, "
                   "float32, float32)"),
        reference=("ropelab.kernels.pair_sincos", "rope_pair_sincos", None),
        reference_signature=_signature(pair_sincos.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "pow", "pow_in_loop"),
        gates=(NO_F64, Gate("pow", "<=", 1, "the PTX has {got} pow (the goal: {limit} per "
                            "thread): after the first slot, f = f * stride_ratio"),
               Gate("pow_in_loop", "<=", 0, "math.pow runs inside the loop, once per slot "
                    "(the goal: once per thread, before the loop): step the frequency with "
                    "f = f * stride_ratio")),
        make_cases=_cases_05,
        hint="slot j has frequency f_j; slot j + stride has f_j * stride_ratio",
        bounds_hint="a slot past the row: loop while j < n_pairs",
    ),
    Exercise(
        id="06-shuffle-rms", notebook="06_fused_qknorm_rope",
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
        reference_signature=_signature(fused_qknorm_rope.VARIANT, {"heads_per_warp": 1}, FusedProblem(
            1, 1, 1, 1, ROW, ROW, True, "float32", 1e-6, 1e4, inv_freq=np.ones(ROW // 2))),
        counters=("instructions", "f64", "shfl", "ld_global", "st_global", "local_bytes"),
        gates=(NO_F64, Gate("shfl", ">=", 1, "the PTX has no warp shuffle: the exercise is "
                            "the shuffle butterfly (cuda.shfl_xor_sync)")),
        make_cases=_cases_06,
        hint="ss += cuda.shfl_xor_sync(0xFFFFFFFF, ss, m) for m = 16, 8, 4, 2, 1",
        bounds_hint=("a warp past the last row ran: return (the whole warp) when row >= rows"),
    ),
)}


def get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are "
                       f"{', '.join(EXERCISES)}") from None


def check(kernel, exercise_id: str) -> Verdict:
    """Grade ``kernel`` against exercise ``exercise_id``; print and return the verdict.

    An unknown id is a programming error and raises KeyError; a wrong kernel never raises.
    """
    return get(exercise_id).check(kernel)


def listing() -> str:
    """Every exercise with its notebook, launch contract and census counters."""
    lines = []
    for ex in EXERCISES.values():
        lines += [f"{ex.id:<24} notebooks/{ex.notebook}.ipynb", f"    {ex.title}",
                  f"    kernel:   {ex.kernel_name}({', '.join(ex.arguments)})",
                  f"    contract: {ex.contract}", f"    launch:   {ex.launch_text}",
                  f"    compared with {ex.reference_label} on: {', '.join(ex.counters)}",
                  f"    solution: notebooks/solutions/{ex.notebook}.py"]
    return "\n".join(lines)

