"""The exercise grader: known answers (``--verify``), its parts, and that it never raises.

Budget: a few seconds with the committed census cache (data/census/exercises.json); the one
test that compiles a fresh kernel in the census child takes a few seconds more.
"""

import dataclasses
import linecache
import textwrap

import numpy as np
import pytest

import ropelab
from ropelab.__main__ import main
from ropelab.grader import grading, kernel_census, steps, verify

SIM_ONLY = pytest.mark.skipif(not ropelab.SIMULATED, reason="simulator bounds checks")


def _define(source: str, name: str, filename: str):
    """Define a kernel from source text as a notebook cell does (source kept in linecache)."""
    source = textwrap.dedent(source)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def test_verify_passes_solutions_rejects_wrong_attempts_and_starters_are_unsolved():
    # `python -m ropelab exercises --verify` as a user runs it, in its own interpreter: its ~175
    # graded children are forked from a small process (forked from this test process, which
    # holds torch and the rest of the suite, each fork copies far more pages: twice the time).
    done = verify.verify_in_child(capture=True, timeout=600)
    text = done.stdout
    assert done.returncode == 0, text[-3000:] + done.stderr[-2000:]
    assert text.rstrip().endswith(" 0 failed")
    for step in steps.STEPS.values():
        assert f"ok   {step.id:<8} solution" in text
        assert text.count(f"{step.id:<8} wrong:") >= 2  # at least two recorded wrong attempts
        assert f"ok   {step.id:<8} starter" in text


def test_cli_lists_every_step_under_its_notebook(capsys):
    assert main(["exercises"]) == 0
    text = capsys.readouterr().out
    for number in steps.notebooks():
        ladder = steps.for_notebook(number)
        assert f"notebook {number}: notebooks/{ladder[0].notebook}.ipynb" in text
        for step in ladder:
            assert f"  {step.id:<6} [{step.kind}] {step.title}" in text


@SIM_ONLY
def test_cli_time_refuses_on_the_simulator(capsys):
    assert main(["exercises", "--time"]) == 2
    assert "no GPU" in capsys.readouterr().err


def test_verify_fails_when_a_solution_is_wrong_or_a_message_is_not_the_expected_one(tmp_path):
    ex = steps.get("01-flat-index")
    ex_step = steps.get("01-flat-index")
    original = verify.solution_path(ex).read_text()
    broken = original + f"\nSOLUTIONS[{ex_step.id!r}] = pair_off_by_one\n"  # a wrong solution
    (tmp_path / f"{ex.notebook}.py").write_text(broken)
    outcomes = verify.verify_exercise(ex, tmp_path)
    assert [o.ok for o in outcomes if o.what == "solution"] == [False]
    misnamed = original.replace('"pair index off by one"', '"a sign is flipped"')
    (tmp_path / f"{ex.notebook}.py").write_text(misnamed)
    outcomes = verify.verify_exercise(ex, tmp_path)
    assert [o.ok for o in outcomes if o.what == "wrong: pair_off_by_one"] == [False]
    assert all(o.ok for o in outcomes if o.what != "wrong: pair_off_by_one")


def test_cli_verify_exits_nonzero_on_failure(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(verify, "SOLUTIONS", tmp_path)  # no solution files at all
    assert main(["exercises", "--verify"]) == 1
    assert "no file" in capsys.readouterr().out


def test_a_wrong_kernel_is_a_verdict_never_an_exception(capsys):
    ex = steps.get("00-first-kernel")

    def plain(x, out, cos_t, sin_t, n):
        pass

    assert ex.check(plain).status == "error"  # not decorated
    too_few = _define("""
        from numba import cuda

        @cuda.jit
        def too_few(x, out):
            out[0] = x[0]
        """, "too_few", "<test too_few>")
    verdict = ex.check(too_few)
    assert verdict.status == "error" and "takes (x, out)" in str(verdict)
    crashes = _define("""
        from numba import cuda

        @cuda.jit
        def crashes(x, out, cos_t, sin_t, n):
            out[0] = x.no_such_attribute
        """, "crashes", "<test crashes>")
    assert ex.check(crashes).status == "error"
    assert "error" in capsys.readouterr().out
    with pytest.raises(KeyError, match="no step"):
        steps.check(plain, "99-nope")


def test_blanks_are_found_in_the_source_and_reported_before_anything_runs():
    src = "def k(x):\n    if ...:\n        y = ...\n    x[0] = 1  # ... in a comment is fine\n"
    assert grading.blanks(src) == ["if ...:", "y = ..."]
    # A fill-in-the-blank starter (the notebooks' ladders now start from empty bodies).
    blank = ("from numba import cuda\n\n\n@cuda.jit(fastmath=True)\n"
             "def my_rope_block2d(x, out, positions, n_pairs, base):\n"
             "    pair = cuda.threadIdx.x\n    while ...:\n        pair += ...\n")
    step = dataclasses.replace(steps.get("02-block2d-stride"), starter=blank)
    verdict = grading.grade(step, verify.starter_kernel(step))
    assert str(verdict).startswith("not solved yet: my_rope_block2d still has 2 blanks")


def test_out_of_bounds_text_names_block_and_thread():
    msg = "tid=[5, 0, 0] ctaid=[2, 0, 0]: index 10 is out of bounds for axis 0 with size 10"
    assert grading.out_of_bounds_text(msg) == ("at thread (block 2, thread 5): index 10 is out of "
                                               "bounds for axis 0 with size 10")
    two_d = ("tid=[1, 3, 0] ctaid=[0, 2, 0]: index 4 ... (lane 1 failed; its warp-mates stopped "
             "waiting for it)")
    assert grading.out_of_bounds_text(two_d) == ("at thread (block (0, 2), thread (1, 3)): "
                                                 "index 4 ...")


@SIM_ONLY
def test_out_of_bounds_is_reported_with_the_thread_and_never_raises():
    no_guard = _define("""
        from numba import cuda

        @cuda.jit
        def no_guard(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            out[i] = x[i]
        """, "no_guard", "<test no_guard>")
    verdict = grading.grade(steps.get("00-first-kernel"), no_guard)
    assert verdict.status == "out of bounds"
    assert str(verdict).startswith("out of bounds at thread (block 0, thread ")


def test_diagnosis_matches_only_the_wrong_floats_of_a_pair():
    expected = np.array([[1.0, 2.0, 3.0, 4.0]])
    sign = np.array([[1.0, -2.0, 3.0, 4.0]])
    case = grading.Case("1x4", {"x": np.zeros(4, np.float32)}, (1,), (1,), expected, 1e-6,
                        locate=lambda e: f"pair {e // 2}",
                        unit=lambda e: [e - e % 2, e - e % 2 + 1],
                        alternatives=[("a sign is flipped", sign)])
    got = np.array([1.0, -2.0, 3.0, 4.0], np.float32)  # first float right, second flipped
    assert grading.first_wrong(case, got) == 1
    assert grading.diagnose(case, got, 1, "fallback") == "a sign is flipped"
    got = np.array([1.0, 7.0, 3.0, 4.0], np.float32)
    assert grading.diagnose(case, got, 1, "fallback") == "fallback"
    got = np.array([1.0, grading.SENTINEL, 3.0, 4.0], np.float32)
    assert grading.first_wrong(case, got) == 1
    assert "never written" in grading.diagnose(case, got, 1, "fallback")
    got = np.array([1.0, np.nan, 3.0, 4.0], np.float32)  # a computed NaN: written, and wrong
    assert grading.first_wrong(case, got) == 1
    assert "never written" not in grading.diagnose(case, got, 1, "fallback")
    got = np.zeros(4, np.float32)  # out == x: nothing rotated
    assert "unchanged" in grading.diagnose(case, got, 0, "fallback")


PTX = """
.visible .entry k(
)
{
	ld.global.f32 	%f1, [%rd1];
$L__BB0_2:
	ex2.approx.ftz.f32 	%f2, %f1;
	st.global.f32 	[%rd2], %f2;
	ld.global.f32 	%f3, [%rd1+4];
	shfl.sync.bfly.b32	%r1, %r2, 16, 31, -1;
	@%p1 bra 	$L__BB0_2;
	lg2.approx.ftz.f32 	%f4, %f1;
	ex2.approx.ftz.f32 	%f5, %f4;
	sin.approx.ftz.f32 	%f6, %f5;
	cos.approx.ftz.f32 	%f7, %f5;
	bra.uni 	$L__BB0_9;
$L__BB0_9:
	ret;
}
"""


def test_extra_counts_on_hand_written_ptx():
    assert kernel_census.count_extras(PTX) == {"shfl": 1, "loads_after_store": 1, "sincos": 2,
                                               "pow_in_loop": 1}


def test_a_kernel_is_shipped_with_its_helpers_and_its_census_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path))
    monkeypatch.setattr(kernel_census, "DATA_FILE", tmp_path / "committed.json")
    kernel = _define("""
        import math
        from numba import cuda, float32

        SCALE = 3

        @cuda.jit(device=True, inline="always")
        def helper(v):
            return v * float32(SCALE)

        @cuda.jit(fastmath=True)
        def shipped(x, out, n):
            i = cuda.grid(1)
            if i < n:
                out[i] = math.sin(helper(x[i]))
        """, "shipped", "<test shipped>")
    job = kernel_census.ship_kernel(kernel)
    kinds = {g["name"]: g["kind"] for g in job["globals"]}
    assert kinds == {"cuda": "module", "helper": "source", "math": "module"}
    helper = next(g for g in job["globals"] if g["name"] == "helper")
    assert {g["name"]: g["kind"] for g in helper["globals"]} == {
        "SCALE": "value", "float32": "import", "cuda": "module"}  # cuda: for its decorator
    sig = "void(float32[::1], float32[::1], int64)"
    (row,) = kernel_census.census([(job, sig)])
    assert row["error"] is None and row["sincos"] == 1 and row["f64"] == 0
    assert row["ld_global"] == {"32": 1} and row["st_global"] == {"32": 1}

    def no_child(tasks):
        raise AssertionError("the second census of the same kernel must come from the cache")

    monkeypatch.setattr(kernel_census, "_compile_in_child", no_child)
    # Comments and the decorator's options do not change the key; the code does.
    plain = job["source"].replace("@cuda.jit(fastmath=True)", "@cuda.jit")
    job2 = dict(job, source=plain + "# note\n")
    assert kernel_census.census([(job2, sig)]) == [row]
    changed = dict(job, source=job["source"].replace("math.sin", "math.cos"))
    with pytest.raises(AssertionError, match="from the cache"):
        kernel_census.census([(changed, sig)])


def test_unshippable_globals_are_a_census_error():
    thing = object()
    with pytest.raises(kernel_census.CensusError, match="cannot be shipped"):
        kernel_census._ship_global("thing", thing, 0)


def test_time_says_why_nothing_is_timed(capsys):
    v = grading.Verdict("00-first-kernel", "wrong", ["wrong: ..."])
    v.time()
    assert capsys.readouterr().out.startswith("nothing timed: the kernel has not passed")
    if ropelab.SIMULATED:
        v = grading.Verdict("00-first-kernel", "PASS", ["PASS"], timer=lambda repeats: "timed")
        v.time()
        assert "no GPU in this process" in capsys.readouterr().out


def test_every_exercise_has_a_notebook_a_solution_and_uneven_cases():
    for ex in (s for s in steps.STEPS.values() if s.alias):
        assert (steps.base.NOTEBOOK_SOURCES / f"{ex.notebook}.py").is_file()
        assert verify.solution_path(ex).is_file()
        assert ex.starter_source() is not None
        cases = ex.cases()
        assert len(cases) >= 2
        for case in cases:
            threads = int(np.prod(case.grid)) * int(np.prod(case.block))
            assert threads > 0 and case.tol > 0
        # Shapes that fill no whole number of blocks: a missing guard shows.
        assert any(c.expected.size % (2 * int(np.prod(c.block))) for c in cases)


def test_verify_reruns_itself_on_the_simulator_from_a_gpu_process():
    # What `--verify` does on a GPU host; here the child is a second simulator process.  One
    # notebook is enough to test the re-run (every notebook is verified in-process above).
    assert verify._on_simulator(save_census=False, notebooks=["00"])


def test_time_solutions_times_exactly_the_solutions_that_pass(monkeypatch, capsys):
    """The wiring of ``exercises --time``: every step's solution is graded, the passing ones are
    timed with the repeats asked for, a failing one is reported and makes the run fail.  (That
    every solution passes is the verify test's job; grading them again here would only repeat
    it.)"""
    graded = []

    def fake_grade(step, fn):
        graded.append((step.id, fn.__name__))
        if step.id == "03.2":
            return grading.Verdict(step.id, "wrong", ["wrong: planted"])
        return grading.Verdict(step.id, "PASS", [f"PASS {step.id}"],
                               timer=lambda repeats: f"timed {step.id} x{repeats}")

    monkeypatch.setattr(verify, "grade", fake_grade)
    assert verify.time_solutions(repeats=3) is False
    text = capsys.readouterr().out
    assert [g[0] for g in graded] == list(steps.STEPS)
    for step_id, name in graded:  # each step was given its own solution
        assert name == steps.STEPS[step_id].kernel_name
    assert "FAIL 03.2     wrong: planted" in text and "timed 03.2" not in text
    assert text.count("ok   ") == len(steps.STEPS) - 1
    assert text.count(" x3") == len(steps.STEPS) - 1


def test_a_passing_verdict_times_the_graded_kernel_on_the_steps_timing_case(monkeypatch):
    from ropelab.grader import learner_time

    seen = []
    monkeypatch.setattr(learner_time, "time_on_gpu",
                        lambda step, fn, repeats: seen.append((step.id, fn, repeats)) or "t")
    for step_id, label in (("02.1", "4096x1024"), ("06.1", "65536 rows of 64")):
        step = steps.STEPS[step_id]
        solution = verify.load_solution(verify.solution_path(step)).SOLUTIONS[step_id]
        verdict = grading.grade(step, solution)
        assert verdict.passed and verdict.timer(7) == "t"
        assert seen[-1][0] == step_id and seen[-1][2] == 7
        assert kernel_census.python_function(seen[-1][1]) is kernel_census.python_function(solution)
        assert step.timing_case().label == label
