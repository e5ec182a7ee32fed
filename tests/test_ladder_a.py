"""The ladders of notebooks 00-03 (ropelab.grader.steps.nb00 ... nb03): their shape, their
solution files, and the rules only they carry.

Whether each solution passes, each wrong attempt is rejected with its message and each starter
is "not solved yet" is ``--verify``'s job (tests/test_exercises.py runs it for every step);
these tests hold what --verify does not look at.  They read sources and build cases only
(well under a second).
"""

import re

import numpy as np
import pytest

from ropelab.grader import grading, steps, verify
from ropelab.grader.steps import nb01, nb02

# A step's recorded wrong attempts: at least the two typical ones, and one more for each refusal
# the grader learned since (a barrier, thread ownership, a launch rule, an argument type); each
# is one graded child in --verify, so a few, not a catalogue.
MOST_WRONG = 6

NUMBERS = ("00", "01", "02", "03")
SECTION = "# ## Build it yourself"


def _solutions(number):
    return verify.load_solution(verify.solution_path(steps.for_notebook(number)[0]))


@pytest.mark.parametrize("number", NUMBERS)
def test_ladder_has_its_rungs(number):
    ladder = steps.for_notebook(number)
    assert [s.id for s in ladder] == [f"{number}.{k}" for k in range(1, len(ladder) + 1)]
    assert len(ladder) >= 3
    # The notebook's whole variant (the exercise it had before the ladder) is the last kernel
    # to write; only its own launch may come after it (02: the wide-row launch).
    aliased = [k for k, s in enumerate(ladder) if s.alias]
    assert len(aliased) == 1
    assert all(s.kind == "launch" for s in ladder[aliased[0] + 1:])
    assert any(s.kind == "launch" for s in ladder)
    empty = [s.id for s in ladder if grading.empty_body(s.starter_source())]
    assert len(empty) >= 2, empty


@pytest.mark.parametrize("number", NUMBERS)
def test_every_step_has_a_solution_and_two_to_six_wrong_attempts(number):
    module = _solutions(number)
    ids = [s.id for s in steps.for_notebook(number)]
    assert sorted(module.SOLUTIONS) == ids
    assert sorted(module.WRONG) == ids
    for step_id, attempts in module.WRONG.items():
        assert 2 <= len(attempts) <= MOST_WRONG, step_id
        assert all(fragment.strip() for _, fragment in attempts), step_id


@pytest.mark.parametrize("number", NUMBERS)
def test_starters_live_in_the_last_section_of_the_notebook(number):
    ladder = steps.for_notebook(number)
    source = (steps.base.NOTEBOOK_SOURCES / f"{ladder[0].notebook}.py").read_text()
    start = source.index(SECTION)
    # "Build it yourself" is the notebook's last top-level section.
    assert not re.search(r"^# ## ", source[start + len(SECTION):], re.M)
    for step in ladder:
        assert source.index(f"def {step.kernel_name}(") > start, step.id
        assert f'steps.check({step.kernel_name}, "{step.id}")' in source[start:], step.id


def test_the_02_launch_meets_a_row_wider_than_a_block():
    step = steps.get("02.3")
    widest = max(int(c.inputs["n_pairs"]) for c in step.cases())
    assert widest > 1024  # one thread per pair would need an illegal block
    assert step.kind == "launch"


def test_launch_steps_cover_more_work_than_one_block_holds_or_a_partial_block():
    for number in NUMBERS:
        for step in steps.for_notebook(number):
            if step.kind != "launch":
                continue
            sizes = [c.expected.size for c in step.cases()]
            # a size that no power-of-two block size divides: rounding down loses elements
            assert any(n % 64 for n in sizes), step.id


def test_the_01_and_03_flat_steps_refuse_signed_division_only():
    signed = {"int_divrem": 2, "int_divrem_ops": {"div.s64": 1, "div.u32": 1}}
    unsigned = {"int_divrem": 2, "int_divrem_ops": {"div.u64": 1, "div.u32": 1}}
    remainder = {"int_divrem": 2, "int_divrem_ops": {"rem.s32": 1, "div.u64": 1}}
    for step_id in ("01.1", "01.4", "03.2"):
        gate = [g for g in steps.get(step_id).gates if g.counter == "signed_divrem"]
        assert len(gate) == 1, step_id
        assert gate[0].holds(unsigned)
        assert not gate[0].holds(signed) and not gate[0].holds(remainder)


def test_modulo_is_found_in_source_but_not_in_comments_or_strings():
    rule = nb01.NO_MODULO
    assert rule.found_in("def k(i, n):\n    p = i % n\n") == [2]
    assert rule.found_in("def k(i, n):\n    p = i - (i // n) * n  # not i % n\n") == []


def test_copy_steps_are_exact_and_rope_steps_are_not_looser_than_needed():
    for case in steps.get("00.1").cases() + steps.get("00.2").cases():
        assert case.tol == 0.0
        assert np.array_equal(case.expected, case.inputs["x"].astype(np.float64))
    # 00 has no positions: no hint may tell the learner to read them (a copy, x unchanged,
    # matches "rotated by the row number" on token 0, whose row number is 0).
    for step_id in ("00.3", "00.4", "00.5"):
        step = steps.get(step_id)
        assert "positions" not in step.arguments
        for case in step.cases():
            got = case.inputs["x"].copy()
            e = grading.first_wrong(case, got)
            assert "positions" not in grading.diagnose(case, got, e, step.hint, step.arguments)


def test_block2d_steps_launch_with_fewer_threads_than_the_widest_row():
    cases = steps.get("02.2").cases()
    assert max(int(c.inputs["n_pairs"]) for c in cases) > max(c.block[0] for c in cases)
    assert nb02.NO_DIVISION in steps.get("02.1").gates


def test_01_3_names_each_frequency_mistake_by_the_whole_row():
    # At pair 1 of a 5-pair row the next pair's frequency and the one divided by n_pairs are
    # the same number; over the whole row they differ, and each gets its own name.
    base = 10000.0
    for case in steps.get("01.3").cases()[1:]:
        n = int(case.inputs["n_pairs"])
        p = np.arange(n, dtype=np.float64)
        outputs = {"next pair": base ** (-2.0 * (p + 1) / (2 * n)),
                   "reciprocal is missing": base ** (2.0 * p / (2 * n)),
                   "divided by n_pairs": base ** (-2.0 * p / n)}
        for words, output in outputs.items():
            got = output.astype(np.float32)
            assert words in case.diagnose(got, 1), (case.label, words)
        assert case.diagnose(case.expected.astype(np.float32) * 2, 1) is None
