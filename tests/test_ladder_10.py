"""Notebook 10's ladder (serving): its shape, its references against torch and ropelab's serving
reference, the cases' built-in traps, and the grader's rule that an untouched cache slot must
stay untouched.

``exercises --verify`` (tests/test_exercises.py) grades every solution, wrong attempt and
starter of the whole course; here the two cheapest steps are graded in this process, so that a
change to this ladder fails fast.
"""

import numpy as np
import pytest

from ropelab import fp8
from ropelab.grader import grading, steps, verify
from ropelab.grader.steps import nb10_cases as c

LADDER = steps.for_notebook("10")


def _solutions():
    return verify.load_solution(verify.solution_path(LADDER[0]))


def test_ladder_climbs_scatter_fp8_kv_write_launch():
    assert [s.id for s in LADDER] == ["10.1", "10.2", "10.3", "10.4"]
    assert [s.kernel_name for s in LADDER] == ["scatter_rows", "e4m3_codes", "write_kv",
                                                "launch_kv_write"]
    assert [s.kind for s in LADDER] == ["kernel", "kernel", "kernel", "launch"]
    for step in LADDER:
        assert grading.empty_body(step.starter_source()), step.id
    assert all(any(g.counter == "f64" for g in s.gates) for s in LADDER)


def test_every_step_has_a_solution_and_two_to_six_wrong_attempts():
    module = _solutions()
    assert set(module.SOLUTIONS) == set(module.WRONG) == {s.id for s in LADDER}
    for step in LADDER:
        attempts = module.WRONG[step.id]
        assert 2 <= len(attempts) <= 6, step.id
        for _, fragment in attempts:  # a fragment of the general hint would match anything
            assert fragment and fragment not in step.hint, (step.id, fragment)


def test_fp8_reference_is_torchs_cast_of_the_scaled_float32_value():
    torch = pytest.importorskip("torch")
    for case in steps.get("10.2").cases():
        y = case.inputs["x"] * case.inputs["inv_scale"]  # the float32 product
        clamped = np.where(np.isnan(y), y, np.clip(y, -448, 448)).astype(np.float32)
        want = torch.from_numpy(clamped).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
        assert np.array_equal(case.expected, want.astype(np.float64)), case.label
    special = fp8.from_float32(c.SPECIAL)
    assert {0x7E, 0xFE, 0x7F, 0xFF, 0x00, 0x80} <= set(special.tolist())  # every rule is met
    assert int(fp8.from_float32(np.float32(1.0625))) == 0x38  # a tie goes to the even code


def test_kv_reference_is_ropelabs_serving_reference_and_the_mistakes_differ_from_it():
    differing, hints = set(), set()
    for case in steps.get("10.3").cases():
        args = (case.inputs["qkv"].reshape(-1, c.ROW), case.inputs["k_weight"],
                case.inputs["positions"], case.inputs["slot_mapping"], case.inputs["inv_freq"],
                int(case.inputs["num_slots"]))
        np.testing.assert_allclose(c.kv_mistake(*args), case.expected, rtol=1e-12, atol=1e-12)
        for hint, alt in case.alternatives:  # each mistake shows in some case (padding: not all)
            hints.add(hint)
            if not np.allclose(alt, case.expected, equal_nan=True):
                differing.add(hint)
    assert differing == hints


def test_cases_keep_the_traps_the_typical_mistakes_fall_into():
    """Rows below the batch's token count and the cache's last row are never mapped, no slot
    is mapped twice, and exactly the unmapped rows are NaN (untouched) in the reference."""
    for step in (s for s in LADDER if s.id != "10.2"):
        for case in step.cases():
            slots = case.inputs["slot_mapping"]
            used = slots[slots >= 0]
            if step.id == "10.1":
                row = int(case.inputs["heads"] * case.inputs["head_dim"])
                cache = case.expected.reshape(1, -1, row)
            else:
                cache = case.expected.reshape(2, -1, c.HEAD_DIM)
            num_slots = cache.shape[1]
            assert len(set(used.tolist())) == used.size, case.label
            assert used.min() >= slots.size and num_slots - 1 not in used, case.label
            mapped = np.zeros(num_slots, bool)
            mapped[used] = True
            assert np.array_equal(~np.isnan(cache).any(axis=(0, 2)), mapped), case.label


def test_ragged_positions_come_from_context_and_place_in_request():
    for case in steps.get("10.4").cases():
        q, ctx = case.inputs["query_lens"], case.inputs["context_lens"]
        assert all(type(v) is int for v in q + ctx)
        want = np.concatenate([np.arange(b, b + n) for n, b in zip(q, ctx)])
        got = np.repeat(ctx, q) + c.within_requests(q)
        assert np.array_equal(got, want)


def test_an_element_that_must_stay_untouched_is_wrong_once_written():
    expected = np.array([1.0, np.nan, 2.0])
    case = grading.Case("3", {}, (1,), (1,), expected, 0.0, lambda e: f"slot {e}",
                        lambda e: [e])
    untouched = np.array([1.0, grading.SENTINEL, 2.0], np.float32)
    assert grading.first_wrong(case, untouched) is None
    assert grading.first_wrong(case, np.array([1.0, 5.0, 2.0], np.float32)) == 1
    assert grading.first_wrong(case, np.array([1.0, np.nan, 2.0], np.float32)) == 1  # a NaN
    assert grading._values(expected, [1]) == "untouched"


@pytest.mark.parametrize("step_id", ["10.1", "10.2"])
def test_solution_passes_and_wrong_attempts_get_their_words(step_id):
    module = _solutions()
    step = steps.get(step_id)
    assert grading.grade(step, module.SOLUTIONS[step_id], fresh=False).passed
    for fn, fragment in module.WRONG[step_id]:
        verdict = grading.grade(step, fn, fresh=False)
        assert not verdict.passed and fragment in str(verdict), (fn.__name__, str(verdict))


from numba import cuda, float32, uint32  # noqa: E402

from ropelab.grader.steps.nb10 import float_bits  # noqa: E402


@cuda.jit
def _e4m3_wraps(x, out, inv_scale, n):
    """A held-out learner's 10.2 kernel, in short: its normal range adds the complement of the
    rebias and counts on the carry past bit 31 vanishing (the simulator's uint32 wraps; on a GPU
    Numba keeps the carry and every code is off by 4096)."""
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        bits = float_bits(v)
        a = bits & uint32(0x7FFFFFFF)
        res = uint32(0)
        if a > uint32(0x7F800000):
            res = uint32(0x7F)
        elif a >= uint32(0x43E00000):
            res = uint32(0x7E)
        elif a < uint32(0x3C800000):
            res = float_bits(abs(v) + float32(16384.0)) - uint32(0x46800000)
        else:
            odd = (a >> uint32(20)) & uint32(1)
            a += uint32(0xC4000000)
            a += uint32(0x7FFFF) + odd
            res = a >> uint32(20)
        out[i] = float32(res | ((bits >> uint32(31)) << uint32(7)))


def test_an_fp8_kernel_that_relies_on_the_simulators_uint32_wrap_is_refused():
    v = steps.check(_e4m3_wraps, "10.2")
    text = str(v)
    assert not v.passed and "wrapped" in text and "64 bits" in text
    assert "a += uint32(0xC4000000)" in text
