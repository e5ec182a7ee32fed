"""Notebook 00's ladder (00_rope_in_one_notebook.ipynb): from a copy to the first RoPE kernel.

00.1 map (one thread per float, the grid exactly the array) -> 00.2 guard (the grid rounded up
to whole blocks) -> 00.3 rotate one pair per thread with given cos and sin -> 00.4 the launch of
that kernel, written by the learner -> 00.5 one thread per float (the notebook's old
exercise).  Solutions and recorded wrong attempts:
``notebooks/solutions/00_rope_in_one_notebook.py``.
"""

from __future__ import annotations

import numpy as np

from ... import reference
from ...kernels import flat
from ..grading import Case
from .base import Step
from .cases import (NO_F64, ONE_THREAD_HINT, THREADS, blocks, freqs, owner_of, rope_cases,
                    signature_of)
from .contracts import threads_multiple_of
from ...cuda_limits import WARP

NOTEBOOK = "00_rope_in_one_notebook"


def _copy_case(n: int, label_rng, *, exact: bool) -> Case:
    """Copy ``n`` floats: exact=True launches n / 32 whole blocks, False rounds up."""
    x = label_rng.standard_normal(n).astype(np.float32)
    inputs = {"x": x} if exact else {"x": x, "n": np.int64(n)}
    return Case(
        label=f"{n} float{'s' if n > 1 else ''}", inputs=inputs,
        grid=(blocks(n, WARP),), block=(WARP,),
        expected=x.astype(np.float64),
        tol=0.0,  # a copy is exact
        locate=lambda e: f"float {e} (block {e // WARP}, thread {e % WARP})",
        unit=lambda e: [e],
        bytes_moved=2 * x.nbytes,
        owner=owner_of(n, 1),  # thread i copies float i
    )


def _cases_copy(big: bool) -> list[Case]:
    rng = np.random.default_rng(1)
    return [_copy_case(n, rng, exact=True) for n in ((1 << 22,) if big else (32, 64, 160))]


def _cases_guard(big: bool) -> list[Case]:
    rng = np.random.default_rng(2)
    return [_copy_case(n, rng, exact=False) for n in (((1 << 22) + 7,) if big else (1, 33, 100))]


def _with_tables(case: Case, tokens: int, hidden: int) -> None:
    """cos_t and sin_t of every pair's angle (float64 on the host, stored as float32)."""
    theta = reference.angles(case.inputs["positions"], freqs(hidden))
    case.inputs.update(cos_t=np.cos(theta).astype(np.float32).ravel(),
                       sin_t=np.sin(theta).astype(np.float32).ravel())
    # 00 has no positions argument: the angles come ready-made.  The positions stay among the
    # case's inputs, unlaunched, so that the grader knows the array and leaves out the hints
    # that name it ("read positions[token]").
    case.bytes_moved += 2 * case.inputs["cos_t"].nbytes - tokens * 4  # no positions read


def _cases_pairs(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        _with_tables(case, tokens, hidden)
        n_pairs = tokens * hidden // 2
        case.inputs["n_pairs"] = np.int64(n_pairs)
        case.grid, case.block = (blocks(n_pairs),), (THREADS,)
        case.owner = owner_of(2 * n_pairs, 2)  # thread p writes floats 2p and 2p + 1
    return rope_cases("00.3", big, fill)


def _cases_elements(big: bool) -> list[Case]:
    def fill(case, tokens, hidden):
        _with_tables(case, tokens, hidden)
        n = tokens * hidden
        case.inputs["n"] = np.int64(n)
        case.grid, case.block = (blocks(n),), (THREADS,)
        case.owner = owner_of(n, 1)  # thread i writes out[i] alone
    return rope_cases("00-first-kernel", big, fill)


_TABLES = ("cos_t, sin_t: float32[tokens * hidden / 2], the cos and sin of each pair's angle, "
           "in pair order")
_PAIR_SIGNATURE = "void(float32[::1], float32[::1], float32[::1], float32[::1], int64)"

ROTATE_PAIRS = Step(
    id="00.3", notebook=NOTEBOOK, kind="kernel",
    title="Rotate: one thread per pair, cos and sin given",
    kernel_name="rotate_pairs",
    task="thread p rotates floats 2p and 2p + 1 by cos_t[p] and sin_t[p]",
    arguments=("x", "out", "cos_t", "sin_t", "n_pairs"),
    contract=f"x, out: float32[2 * n_pairs]; {_TABLES}; n_pairs: int64",
    launch_text=f"grid ceil(n_pairs / {THREADS}) blocks of {THREADS} threads",
    signature=_PAIR_SIGNATURE,
    reference=("ropelab.kernels.flat", "rope_flat", None),
    reference_signature=signature_of(flat.VARIANT),
    counters=("instructions", "f64", "sincos", "ld_global", "st_global"),
    gates=(NO_F64,),
    make_cases=_cases_pairs,
    ownership="thread p writes the two floats of pair p, out[2p] and out[2p + 1]",
    hint="out[2p] = x0*c - x1*s and out[2p+1] = x0*s + x1*c with x0 = x[2p], x1 = x[2p+1]",
    bounds_hint=ONE_THREAD_HINT + " (p < n_pairs)",
)

STEPS = [
    Step(
        id="00.1", notebook=NOTEBOOK, kind="kernel",
        title="Map: one thread copies one float",
        kernel_name="copy",
        task="out[i] = x[i] for this thread's global index i",
        arguments=("x", "out"),
        contract="x, out: float32[n], n a whole number of blocks of 32",
        launch_text=f"grid n / {WARP} blocks of {WARP} threads: exactly one thread per float",
        signature="void(float32[::1], float32[::1])",
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=signature_of(flat.VARIANT),
        counters=("instructions", "ld_global", "st_global"),
        make_cases=_cases_copy,
        ownership="thread i copies float i, and only it",
        hint="i = cuda.grid(1) is blockIdx.x * blockDim.x + threadIdx.x: unique in the grid",
        bounds_hint="every thread has a float here: read and write element i, nothing else",
    ),
    Step(
        id="00.2", notebook=NOTEBOOK, kind="kernel",
        title="Guard: the grid rounded up to whole blocks",
        kernel_name="copy_guarded",
        task="the same copy, but only threads with i < n touch memory",
        arguments=("x", "out", "n"),
        contract="x, out: float32[n]; n: int64, any size",
        launch_text=f"grid ceil(n / {WARP}) blocks of {WARP} threads: the last block "
                    "usually has threads past the end",
        signature="void(float32[::1], float32[::1], int64)",
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=signature_of(flat.VARIANT),
        counters=("instructions", "ld_global", "st_global"),
        make_cases=_cases_guard,
        ownership="thread i copies float i, and only it",
        hint="if i < n: out[i] = x[i]",
        bounds_hint=ONE_THREAD_HINT + " (i < n)",
    ),
    ROTATE_PAIRS,
    Step(
        id="00.4", notebook=NOTEBOOK, kind="launch",
        title="Launch: grid and block from the number of pairs",
        kernel_name="launch_rotate_pairs",
        task="launch rotate_pairs (step 00.3) with enough blocks that every pair has a thread",
        arguments=("x", "out", "cos_t", "sin_t", "n_pairs"),
        contract=f"x, out: float32[2 * n_pairs] (device arrays); {_TABLES}; n_pairs: int64",
        launch_text="yours: threads per block a multiple of 32, at most 1024; every pair "
                    "covered, no block wholly idle",
        make_cases=_cases_pairs,
        launch_rules=(threads_multiple_of(WARP),),
        **ROTATE_PAIRS.launching(owned=True),  # "every pair has a thread": its own
        hint="blocks = (n_pairs + threads - 1) // threads: the grid rounded up, not down",
        bounds_hint="a thread past the last pair ran rotate_pairs' body: the launch rounds "
                    "up, so the kernel (step 00.3) must guard with p < n_pairs",
    ),
    Step(
        id="00.5", alias="00-first-kernel", notebook=NOTEBOOK, kind="kernel",
        title="One thread per float: each float finds its pair",
        kernel_name="rotate_elements",
        task="skip threads past the end, then write out[i] from x, cos_t and sin_t",
        arguments=("x", "out", "cos_t", "sin_t", "n"),
        contract=f"x, out: float32[tokens * hidden] (rows one after the other); {_TABLES}; "
                 "n: int64, the number of floats",
        launch_text=f"grid ceil(n / {THREADS}) blocks of {THREADS} threads",
        signature=_PAIR_SIGNATURE,
        reference=("ropelab.kernels.flat", "rope_flat", None),
        reference_signature=signature_of(flat.VARIANT),
        counters=("instructions", "int_divrem", "f64", "sincos", "ld_global", "st_global"),
        gates=(NO_F64,),
        make_cases=_cases_elements,
        ownership="thread i writes out[i] alone (its pair's other float is thread i ^ 1's)",
        hint="an even i is the first float of pair i // 2: out[i] = x[i]*c - x[i+1]*s; an odd i "
             "is the second: out[i] = x[i-1]*s + x[i]*c",
        bounds_hint=ONE_THREAD_HINT,
    ),
]
