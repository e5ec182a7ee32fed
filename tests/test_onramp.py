"""The on-ramp (notebooks/00_on_ramp.ipynb, ropelab.grader.steps.onramp): its shape, its cases,
and the sentence its verdicts add for someone on a first kernel.

That every solution passes, every recorded wrong attempt is rejected with its message and every
starter is "not solved yet" is ``--verify``'s job (tests/test_exercises.py); these tests hold
what --verify does not look at.  A handful of simulator runs of a few dozen threads each.
"""

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from ropelab.grader import grading, steps, verify
from ropelab.grader.steps import base, onramp

LADDER = steps.for_notebook("ramp")
SOURCE = (base.NOTEBOOK_SOURCES / f"{onramp.NOTEBOOK}.py").read_text()
SOLUTIONS = verify.load_solution(verify.solution_path(LADDER[0]))


def test_the_on_ramp_comes_first_with_twelve_to_fourteen_puzzles():
    assert steps.notebooks()[:2] == ["ramp", "00"]
    assert [s.id for s in LADDER] == [f"ramp.{k}" for k in range(1, len(LADDER) + 1)]
    assert 12 <= len(LADDER) <= 14
    assert all(isinstance(s, onramp.Puzzle) and s.notebook == "00_on_ramp" for s in LADDER)
    assert any(s.kind == "launch" for s in LADDER)


@pytest.mark.parametrize("step", LADDER, ids=lambda s: s.id)
def test_every_puzzle_starts_empty_with_its_contract_and_says_where_it_comes_back(step):
    starter = step.starter_source()
    assert grading.empty_body(starter)
    fn = next(n for n in ast.walk(ast.parse(starter)) if isinstance(n, ast.FunctionDef))
    assert len(ast.get_docstring(fn) or "") > 40, "the contract belongs in the docstring"
    # The puzzle's section: from its heading to the next one.
    section = SOURCE[SOURCE.index(f"### Puzzle {step.id} "):]
    section = section[:section.index("# ###", 5)] if "# ###" in section[5:] else section
    assert "**Comes back in**" in section
    assert f'steps.check({step.kernel_name}, "{step.id}")' in section


def test_solutions_and_two_to_three_wrong_attempts_for_every_puzzle():
    ids = [s.id for s in LADDER]
    assert list(SOLUTIONS.SOLUTIONS) == ids and list(SOLUTIONS.WRONG) == ids
    for step_id, attempts in SOLUTIONS.WRONG.items():
        assert 2 <= len(attempts) <= 3, step_id
        assert len({fn for fn, _ in attempts}) == len(attempts), step_id


def test_expected_answers_come_from_numpy_never_from_a_kernel():
    tree = ast.parse(Path(onramp.c.__file__).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if "kernels" in m or "numba" in m], imported


@pytest.mark.parametrize("step", LADDER, ids=lambda s: s.id)
def test_cases_are_small_and_their_tolerance_is_float32_rounding(step):
    cases = step.cases()
    assert len(cases) >= 2
    for case in cases:
        threads = int(np.prod(case.grid)) * int(np.prod(case.block))
        assert threads <= 256 or step.kind == "launch", (case.label, threads)
        assert case.expected.size <= 1501
        # The answer rounded to float32 passes: the tolerance leaves room for float32 ...
        assert grading.first_wrong(case, case.expected.ravel().astype(np.float32)) is None, case.label
        # ... and far less than any mistake a puzzle names: a planted error of ten times the
        # tolerance fails.
        scale = max(1.0, float(np.abs(case.expected).max()))
        assert case.tol <= 1e-4 * scale, case.label
        planted = case.expected.astype(np.float64).ravel().copy()
        planted[-1] += 10 * case.tol + onramp.c.EPS32 * scale
        assert grading.first_wrong(case, planted.astype(np.float32)) == planted.size - 1
    timing = step.timing_case()
    assert timing.bytes_moved > 0 and timing.alternatives == []


def test_the_shapes_leave_a_partial_block_where_the_puzzle_is_the_guard():
    for step_id in ("ramp.3", "ramp.4", "ramp.6", "ramp.7", "ramp.12"):
        cases = steps.get(step_id).cases()
        covered = [int(np.prod(c.grid)) * int(np.prod(c.block)) for c in cases]
        assert any(t > c.expected.size for t, c in zip(covered, cases)), step_id


def test_the_scores_show_rope_relative_position_property():
    """Puzzle ramp.13's answer: constant query and key vectors, rotated by their positions,
    give a score matrix whose every diagonal holds one value (and unrotated ones would not be
    told apart at all)."""
    case = steps.get("ramp.13").cases()[1]
    scores = case.expected
    n = scores.shape[0]
    spread = max(np.ptp(np.diagonal(scores, k)) for k in range(1 - n, n))
    assert spread < 1e-6 < np.ptp(scores)


def _note(step_id, fn):
    step = steps.get(step_id)
    return step.first_kernel_note(grading.grade(step, fn))


@pytest.mark.parametrize("step_id, attempt, words", [
    ("ramp.3", "scale_guard_short", "i < n, not i < n - 1"),
    ("ramp.4", "scale_blocks_thread_only", "block b's threads own floats 8b"),
    ("ramp.5", "launch_scale_rounded_down", "round the number of blocks up"),
    ("ramp.6", "weigh_rows_swapped", "cuda.grid(2) returns (x, y)"),
    ("ramp.9", "rotate_half_no_barrier", "only after both have passed cuda.syncthreads()"),
    ("ramp.14", "seq_offsets_unguarded", "the simulator checks every index"),
    ("ramp.5", "launch_scale_too_wide", "a GPU refuses such a launch"),
])
def test_a_failing_verdict_says_what_it_means_for_a_first_kernel(step_id, attempt, words):
    step = steps.get(step_id)
    verdict = grading.grade(step, getattr(SOLUTIONS, attempt))
    assert words in step.first_kernel_note(verdict), f"{verdict.status}: {verdict}"


def test_a_pass_an_unsolved_starter_and_a_self_explaining_verdict_get_no_note():
    assert _note("ramp.1", SOLUTIONS.square) == ""
    assert _note("ramp.2", SOLUTIONS.square) == ""  # "takes (x, out), but the step calls it ..."
    step = steps.get("ramp.1")
    assert step.first_kernel_note(grading.grade(step, verify.starter_kernel(step))) == ""


def test_check_prints_the_note_after_the_verdict(capsys):
    verdict = steps.check(SOLUTIONS.scale_blocks_thread_only, "ramp.4")
    printed = capsys.readouterr().out
    # The note, then steps.check's line that hints exist (tests/test_hints.py).
    assert verdict.status == "wrong" and verdict.lines[-2].startswith("first kernel? ")
    assert re.search(r"never written.*\n.*\nfirst kernel\? with cuda\.threadIdx\.x alone",
                     printed), printed


TWO_TILES = '''
from numba import cuda, float32


@cuda.jit
def qk_two_arrays(q, k, out, tokens):
    qs = cuda.shared.array((8, 8), float32)
    ks = cuda.shared.array((8, 8), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    qs[ty, tx] = q[(cuda.blockIdx.y * 8 + ty) * 8 + tx]
    ks[ty, tx] = k[(cuda.blockIdx.x * 8 + ty) * 8 + tx]
    cuda.syncthreads()
    total = float32(0)
    for i in range(8):
        total += qs[ty, i] * ks[tx, i]
    out[(cuda.blockIdx.y * 8 + ty) * tokens + cuda.blockIdx.x * 8 + tx] = total
'''


def test_two_shared_arrays_stay_apart_under_the_race_detector():
    """Two ``cuda.shared.array`` calls of one kernel are two arrays under the race detector
    (numba keys a block's arrays by the calling line; the detector's wrapper keys them by the
    kernel's own line)."""
    import linecache

    filename = "<test qk_two_arrays>"
    linecache.cache[filename] = (len(TWO_TILES), None, TWO_TILES.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(TWO_TILES, filename, "exec"), namespace)
    step = steps.get("ramp.13")
    assert step.shared  # the race detector is on for this puzzle
    assert grading.grade(step, namespace["qk_two_arrays"]).passed
