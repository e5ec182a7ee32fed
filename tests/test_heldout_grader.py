"""The grader on work nobody here wrote: every function of the held-out sets (``data/heldout``,
loaded by :mod:`ropelab.grader.heldout` from the files as their learners wrote them).

* ``probes_a``: each probe gets the verdict its learner expected, and where the learner named
  the cause of a wrong one, the verdict names it too (:data:`CAUSES`, words per probe);
* ``set_a``: every kernel its learner handed in as passing passes, but for the ones
  ``heldout.OVERRULED`` lists (they break a rule the step's text states), which fail with the
  words of that rule.

Graded in this process as a notebook grades them (``grading.grade``; the fork of
``steps.check`` adds nothing here but its cost), with the census from the committed
``data/census/heldout.json`` beside ``exercises.json``: no compile when they are current, which
the last test checks (``python -m ropelab exercises --heldout --save-census`` rewrites the
file).  Budget: the simulator's runs, about 20 s of CPU for the 120 functions.
"""

import pytest

import ropelab
from ropelab.grader import grading, heldout, kernel_census, steps

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's verdicts")

ENTRIES = heldout.entries()

# The words each wrong verdict must hold: its cause as the learner named it (the probe's last
# field), in the grader's terms.
CAUSES = {
    # 00
    "uninit_out_accumulate": ["out is read before it is written", "`out[i] += ...` adds to"],
    "guard_le_off_by_one": ["out of bounds", "guard with the number of work items (i < n)"],
    "pair_index_not_doubled": ["x0 = x[2p], x1 = x[2p+1]"],
    "launch_block_not_warp_multiple": ["100 threads per block, not a multiple of 32"],
    "elements_even_thread_writes_pair": ["the values are right, but thread 0 of block 0 wrote "
                                         "out[1]", "thread i writes out[i] alone"],
    # 01
    "angles_guard_off_by_one": ["out of bounds", "for positions", "idx < total_pairs"],
    "launch_extra_idle_block": ["wholly idle", "round the grid up to whole blocks, not further"],
    "f64_int32_times_float32": ["float64 instructions", "positions[token] (int32) * inv_freq "
                                "(float32): an integer with a float32 gives a float64"],
    "signed_floor_division": ["signed integer div/rem", "make the index unsigned first"],
    # 02
    "rows_thread0_does_row": ["the values are right, but thread 0 of block 0 wrote out[2]",
                              "thread t of block token writes pair t of that token's row"],
    "rows_range_loop_division": ["although your code writes no // or %",
                                 "`range(cuda.threadIdx.x, n_pairs, cuda.blockDim.x)`",
                                 "trip count with an integer division"],
    "f64_float32_times_threadidx": ["float64 instructions", "a signed and an unsigned integer",
                                    "an integer with a float32 gives a float64"],
    "int32_threadidx_plus_uint64": ["pair (int32, cuda.threadIdx.x) < n_pairs (uint64): a "
                                    "signed and an unsigned integer"],
    "launch_block_over_1024": ["illegal launch", "block of 1312 threads: the limit is 1024"],
    # 03
    "tail_guard_off_by_one": ["out of bounds", "only when pair + 1 < n_pairs"],
    "launch_grid_from_pairs": ["wholly idle"],
    "loads_after_store_starter": ["global loads come after the first store",
                                  "load all four floats first"],
    # 04
    "table_step_still_pow": ["still computes 1 pow", "inv_freq[pair]"],
    "barrier_in_guard": ["barrier divergence", "thread 0 waits at the cuda.syncthreads()",
                         "returned without reaching it"],
    "barriers_in_both_arms": ["barrier divergence", "the threads wait at different barriers"],
    "shared_race_no_barrier": ["shared-memory race", "with no cuda.syncthreads() between"],
    "cache_row_by_token": ["read positions[token]"],
    "partner_ignored": ["b = a + partner"],
    # 05
    "f64_bare_literal": ["the literal -2.0 (float64)", "a bare float literal is a float64"],
    "frequency_never_stepped": ["used the frequency of its first slot"],
    # 06
    "butterfly_missing_step": ["a butterfly step is missing"],
    "f64_int_literal_mean": ["ss (float32) / the literal 64 (int64)"],
    "shuffle_in_divergent_branch": ["without reaching the shuffle"],
    "barrier_in_lane0_branch": ["shared-memory race", "cuda.syncthreads()"],
    "reduction_forgets_a_warp": ["off by the same factor", "wrong sum of squares"],
    "v_heads_normalized": ["V heads must be copied unchanged"],
    "launch_block_per_token_1280": ["illegal launch", "32+4+4 heads",
                                    "block of 1280 threads: the limit is 1024"],
    # 08
    "forward_turn_not_inverse": ["turned the forward way"],
    "f64_int32_times_float32_08": ["positions[row] (int32) * inv_freq[lane] (float32)"],
    "f64_bare_literal_08": ["s (float32) / the literal 64.0 (float64)"],
    "times_r_not_divide": ["multiplied by r"],
    "shared_race_no_barrier_dw": ["shared-memory race", "with no cuda.syncthreads() between"],
    "extra_barrier_thread0": ["thread 0 waits at the cuda.syncthreads()",
                              "threads 1-255 returned without reaching it"],
    "reduction_forgets_a_group": ["group 3's sum is missing"],
    "launch_block_per_row": ["more than the step's cap of ceil(rows / 4)"],
    "atomic_stage_two_unzeroed": ["_atomic_into_dw: 2 arguments, but the contract has 4",
                                  "the step gives any other"],
    # set_a, overruled: the rule the step's text states
    "block2d_chunked": ["the values are right, but thread 0 of block 0 wrote",
                        "thread t of block token writes pairs t, t + blockDim.x"],
    "launch_block2d_512_signed": ["64 threads per block", "the row's pairs rounded up to "
                                                          "whole warps, capped at 1024"],
    "rms256_warp0_final": ["the values are right, but a thread of a block read only 1 shared "
                           "element", "every thread to read the 4 warp sums itself"],
}

_GRADED: dict = {}
_CENSUS_KEYS: set = set()  # the census rows (and float64 findings) the gradings looked up


def _graded(entry):
    if entry.id not in _GRADED:
        before = dict(kernel_census.USED)
        kernel_census.USED.clear()
        try:
            _GRADED[entry.id] = grading.grade(steps.get(entry.step), entry.fn)
            _CENSUS_KEYS.update(kernel_census.USED)
        finally:
            kernel_census.USED.update(before)
    return _GRADED[entry.id]


def test_the_sets_are_whole():
    """All of both sets is loaded (44 probes, 76 kernels), and every probe that must fail, or
    kernel overruled, has the words of its cause listed."""
    by_set = {name: [e for e in ENTRIES if e.set == name] for name in heldout.SETS}
    assert len(by_set["probes_a"]) == 44 and len(by_set["set_a"]) == 76
    failing = {e.label for e in ENTRIES if e.expected == "fail"}
    assert failing == set(CAUSES), sorted(failing ^ set(CAUSES))
    assert {(e.set, e.step, e.label) for e in ENTRIES if e.set == "set_a"} >= set(
        heldout.OVERRULED)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_a_held_out_function_gets_the_verdict_expected_naming_its_cause(entry):
    verdict = _graded(entry)
    text = str(verdict)
    if entry.expected == "pass":
        assert verdict.status == "PASS", f"{entry.cause}\n{text}"
        return
    assert verdict.status != "PASS", f"{entry.cause}\n{text}"
    missing = [words for words in CAUSES[entry.label] if words not in text]
    assert not missing, f"{missing} not in the verdict on {entry.id} ({entry.cause}):\n{text}"


def test_the_held_out_census_is_committed():
    """Grading every held-out function used census rows of the committed files only: when this
    install's compilers match the committed rows (the course's own rows are found), a missing
    held-out row means data/census/heldout.json is stale."""
    for entry in ENTRIES:
        _graded(entry)
    committed = kernel_census.committed()
    step = steps.get("05.1")  # the course's rows: is this install the one they were made on?
    reference = kernel_census.job_key(step.reference_job(), step.reference_signature)
    if reference not in committed:
        pytest.skip("this install's compiler versions are not the committed census's")
    missing = sorted(k for k in _CENSUS_KEYS if k not in committed)
    assert not missing, (f"{len(missing)} census rows of the held-out sets are not committed: "
                         "run python -m ropelab exercises --heldout --save-census")
