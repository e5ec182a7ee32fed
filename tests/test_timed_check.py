"""The GPU timing's check of its last run (``grader.timed.last_run_problem``) judges an output
by the grader's rule: an element the case expects untouched (NaN: a cache slot no token maps to,
notebook 10) must still hold the sentinel, every other must be written and right.  Checked on
notebook 10's slot scatter's timing case, with the right answer built from the case and one
planted mistake of each kind."""

import numpy as np
import pytest

from ropelab.grader import steps
from ropelab.grader.timed import last_run_problem
from ropelab.grader.trial import SENTINEL


@pytest.fixture(scope="module")
def case_and_answer():
    step = steps.get("10.1")
    case = step.timing_case()
    expected = case.expected.ravel()
    answer = np.where(np.isnan(expected), np.float32(SENTINEL), expected).astype(np.float32)
    assert np.isnan(expected).any() and not np.isnan(expected).all()  # both kinds present
    return step, case, answer


def test_the_right_output_with_untouched_slots_passes(case_and_answer):
    step, case, answer = case_and_answer
    assert last_run_problem(step, answer, case) is None


def test_a_slot_written_that_no_token_maps_to_is_named(case_and_answer):
    step, case, answer = case_and_answer
    got = answer.copy()
    k = int(np.flatnonzero(np.isnan(case.expected.ravel()))[0])
    got[k] = 0.0
    assert "leaves untouched" in last_run_problem(step, got, case)


def test_a_mapped_slot_left_unwritten_is_named(case_and_answer):
    step, case, answer = case_and_answer
    got = answer.copy()
    k = int(np.flatnonzero(~np.isnan(case.expected.ravel()))[-1])
    got[k] = np.float32(SENTINEL)
    assert "1 of" in last_run_problem(step, got, case)


def test_a_wrong_value_is_named(case_and_answer):
    step, case, answer = case_and_answer
    got = answer.copy()
    k = int(np.flatnonzero(~np.isnan(case.expected.ravel()))[0])
    got[k] += 1.0
    assert "wrong at" in last_run_problem(step, got, case)
