"""Hints on request, the learner's progress, and how much of each ladder the learner writes.

* every step has three hint levels, and the third is a key line, not the solution;
* a failing verdict of ``steps.check`` says that hints exist, a passing one does not;
* ``steps.check`` records a pass in a JSON file under ``$ROPELAB_PROGRESS`` (a temporary folder
  for the whole run: the repository's conftest.py), atomically, and survives a corrupt file;
  ``--verify`` and tests without the variable record nothing;
* at least two-thirds of all steps start from an empty body, and each skeleton says why.

Budget: a few graded on-ramp puzzles (one forked child each), no census.
"""

import ast
import dataclasses
import inspect
import json
import os
import sys
import tempfile
import types
from pathlib import Path

import pytest

from ropelab.__main__ import main
from ropelab.grader import coach, hints, kernel_census, progress, starters, steps, verify

REPO = Path(__file__).resolve().parents[1]
ALL = list(steps.STEPS.values())
LADDERS = {number: steps.for_notebook(number) for number in steps.notebooks()}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A progress folder of this test's own."""
    monkeypatch.setenv(progress.ENV, str(tmp_path / "learner"))
    progress._said.clear()
    return tmp_path / "learner" / progress.FILE


def _solutions() -> dict:
    modules = {}
    for step in ALL:
        path = verify.solution_path(step)
        if path not in modules:
            modules[path] = verify.load_solution(path)
    return {s.id: modules[verify.solution_path(s)].SOLUTIONS[s.id] for s in ALL}


def _body_lines(fn) -> list[str]:
    """The solution's body, one statement line each, without its docstring and comments."""
    source = inspect.getsource(kernel_census.python_function(fn) or fn)
    tree = ast.parse(source.lstrip() if source.startswith((" ", "\t")) else source)
    body = tree.body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    lines = ast.unparse(ast.Module(body=body, type_ignores=[])).splitlines()
    return [" ".join(line.split()) for line in lines if line.strip()]


# --- hints ---------------------------------------------------------------------------------

def test_every_step_has_three_levels_and_no_hint_names_a_step_that_does_not_exist():
    assert set(hints.HINTS) == set(steps.STEPS)
    for step in ALL:
        levels = hints.levels(step.id)
        assert len(levels) == hints.LEVELS == 3, step.id
        assert all(isinstance(t, str) and len(t.strip()) > 15 for t in levels), step.id
        assert len(set(levels)) == 3, step.id  # three different hints, not one said thrice


def test_the_key_line_is_shorter_than_the_solution_and_never_the_whole_of_it():
    for step_id, fn in _solutions().items():
        body = _body_lines(fn)
        key = hints.levels(step_id)[2]
        shown = [" ".join(line.split()) for line in key.splitlines() if line.strip()]
        assert len(shown) < len(body), (step_id, shown, body)
        flat = " ".join(shown)
        assert not all(line in flat for line in body), f"{step_id}: level 3 is the whole body"


def test_the_check_catches_a_key_line_that_pastes_the_solution(monkeypatch):
    fn = _solutions()["ramp.12"]
    pasted = "\n".join(_body_lines(fn))
    monkeypatch.setitem(hints.HINTS, "ramp.12", ("a", "b", pasted))
    shown = hints.levels("ramp.12")[2].splitlines()
    assert not len(shown) < len(_body_lines(fn))  # the test above would fail on it


def test_hints_come_one_level_more_each_call_and_an_explicit_level_never_lowers_it(store):
    got = [steps.hint("04.2").level for _ in range(4)]
    assert got == [1, 2, 3, 3]
    assert "hint 3 of 3 for step 04.2" in str(steps.hint("04.2"))
    assert steps.hint("04.3", level=2).level == 2
    assert steps.hint("04.3", level=1).level == 1
    assert steps.hint("04.3").level == 3  # the next after the highest seen
    assert json.loads(store.read_text())["hints"] == {"04.2": 3, "04.3": 3}


def test_a_hint_shows_its_level_names_the_next_and_the_last_points_to_the_solutions(store):
    first = str(steps.hint("ramp.11", level=1))
    assert first.startswith("hint 1 of 3 for step ramp.11") and "a direction" in first
    assert 'steps.hint("ramp.11") gives level 2, the structure' in first
    last = str(steps.hint("ramp.11", level=3))
    assert "cuda.shfl_xor_sync" in last and "notebooks/solutions/00_on_ramp.py" in last
    assert repr(steps.hint("ramp.11", level=3)) == last  # what Jupyter shows


def test_an_alias_gets_its_steps_hints_and_an_unknown_step_or_level_is_a_clear_error(store):
    assert steps.hint("04-cache-lookup", level=1).step_id == "04.3"
    with pytest.raises(KeyError, match=r"no step '04\.9'; the steps are ramp\.1, .*10\.4"):
        steps.hint("04.9")
    for bad in (0, 4, "2", True):
        with pytest.raises(ValueError, match=r"the levels of step 04\.2 are 1 \(a direction\)"):
            steps.hint("04.2", level=bad)


# --- the verdict says that hints exist -----------------------------------------------------

def test_a_failing_verdict_ends_with_the_hint_line_and_a_passing_one_has_none(store, capsys):
    module = verify.load_solution(verify.solution_path(steps.get("ramp.2")))
    line = 'stuck? steps.hint("ramp.2") gives a hint (3 levels: a direction, the structure, ' \
           'the key line)'
    starter = verify.starter_kernel(steps.get("ramp.2"))
    for attempt in (starter, module.weigh_first):
        verdict = steps.check(attempt, "ramp.2")
        assert not verdict.passed and verdict.lines[-1] == line
        assert capsys.readouterr().out.rstrip().endswith(line)  # printed, and last
    verdict = steps.check(module.SOLUTIONS["ramp.2"], "ramp.2")
    assert verdict.passed and "stuck?" not in str(verdict)
    assert "stuck?" not in capsys.readouterr().out


def test_the_old_exercise_ids_say_it_too(store):
    from ropelab.grader import steps

    starter = verify.starter_kernel(steps.get("04.3"))
    verdict = steps.check(starter, "04-cache-lookup")
    assert verdict.status == "not solved yet"
    assert verdict.lines[-1].startswith('stuck? steps.hint("04.3") gives a hint')


# --- progress ------------------------------------------------------------------------------

def test_a_pass_is_recorded_and_shown_per_notebook_and_reset_forgets_it(store, capsys):
    module = verify.load_solution(verify.solution_path(steps.get("ramp.1")))
    steps.check(verify.starter_kernel(steps.get("ramp.1")), "ramp.1")
    assert not store.exists()  # a failing check records nothing
    steps.check(module.SOLUTIONS["ramp.1"], "ramp.1")
    assert list(json.loads(store.read_text())["passed"]) == ["ramp.1"]
    report = steps.progress()
    assert report.passed == ["ramp.1"]
    text = str(report)
    assert f"passed 1 of {len(ALL)} steps (kept in {store})" in text
    assert "ramp  00_on_ramp" in text and " 1 / 14  ramp.1" in text
    assert " 0 / 5   -" in text  # notebook 00: nothing yet
    capsys.readouterr()
    assert main(["progress"]) == 0
    assert "1 / 14  ramp.1" in capsys.readouterr().out
    assert main(["progress", "--reset"]) == 0
    assert f"progress reset: removed {store}" in capsys.readouterr().out
    assert not store.exists() and steps.progress().passed == []
    steps.reset_progress()
    assert "nothing was kept" in capsys.readouterr().out


def test_the_file_is_written_atomically_and_keeps_the_first_pass(store):
    progress.record_pass("01.2")
    first = json.loads(store.read_text())["passed"]["01.2"]
    progress.record_pass("01.2")
    progress.record_pass("02.1")
    data = json.loads(store.read_text())
    assert data["format"] == progress.FORMAT and data["passed"]["01.2"] == first
    assert sorted(p.name for p in store.parent.iterdir()) == [progress.FILE]  # no temp files


@pytest.mark.parametrize("content", ["{not json", '{"format": 1, "passed": [1, 2]}', "\xff\xfe",
                                     '{"format": 99, "passed": {}, "hints": {}}'])
def test_a_corrupt_file_is_moved_aside_said_once_and_progress_starts_over(store, capsys,
                                                                          content):
    store.parent.mkdir(parents=True)
    store.write_bytes(content.encode("latin-1"))
    assert steps.progress().passed == []
    err = capsys.readouterr().err
    assert "could not be read" in err and "progress starts over" in err
    assert (store.parent / (progress.FILE + ".corrupt")).read_bytes() == content.encode("latin-1")
    progress.record_pass("00.1")
    assert json.loads(store.read_text())["passed"].keys() == {"00.1"}


def test_a_folder_that_cannot_be_written_is_said_and_never_raises(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(progress.ENV, str(blocker / "below"))
    progress._said.clear()
    from ropelab.grader.grading import Verdict
    passed = Verdict("ramp.1", "PASS", ["PASS ramp.1"])
    assert coach.after_check("ramp.1", passed) is passed
    assert steps.hint("ramp.1").level == 1  # shown although its level cannot be kept
    assert "ropelab progress: not saved" in capsys.readouterr().err


def test_progress_is_never_written_inside_the_repository_or_the_package(monkeypatch, capsys):
    for inside in (REPO / "scratch-progress", REPO / "ropelab" / "progress-here"):
        monkeypatch.setenv(progress.ENV, str(inside))
        progress._said.clear()
        progress.record_pass("ramp.1")
        assert not inside.exists()
        assert "progress belongs to the learner" in capsys.readouterr().err


def test_under_pytest_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(progress.ENV)
    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path / "cache"))
    assert progress.folder() is None
    progress.record_pass("ramp.1")
    progress.record_hint("ramp.1", 2)
    assert not (tmp_path / "cache").exists()
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # a learner's own process: the cache folder
    assert progress.folder() == tmp_path / "cache"


def test_verify_records_nothing(store):
    step = steps.get("ramp.1")
    outcomes = verify.verify_step(step, verify.load_solution(verify.solution_path(step)))
    assert any(o.what == "solution" and o.ok for o in outcomes)
    assert not store.exists()


def test_the_test_run_and_the_notebook_build_point_progress_at_a_temporary_folder(monkeypatch):
    temp = Path(tempfile.gettempdir()).resolve()
    assert temp in Path(os.environ[progress.ENV]).resolve().parents  # the repository's conftest
    seen = {}

    class Client:
        def __init__(self, nb, **kwargs):
            pass

        def execute(self):
            seen["folder"] = Path(os.environ[progress.ENV])
            seen["existed"] = seen["folder"].is_dir()

    monkeypatch.setitem(sys.modules, "nbclient", types.SimpleNamespace(NotebookClient=Client))
    sys.path.insert(0, str(REPO / "scripts" / "notebooks"))
    try:
        import build
    finally:
        sys.path.remove(str(REPO / "scripts" / "notebooks"))
    before = os.environ[progress.ENV]
    build.execute(types.SimpleNamespace(cells=[]))
    assert seen["existed"] and temp in seen["folder"].resolve().parents
    assert not seen["folder"].exists()  # removed after the build
    assert os.environ[progress.ENV] == before


# --- how much the learner writes -----------------------------------------------------------

def test_two_thirds_of_all_steps_start_from_an_empty_body_and_each_skeleton_says_why():
    counts = starters.census(LADDERS)
    shapes = {shape for per in counts.values() for shape in per}
    assert shapes <= {starters.EMPTY, starters.SKELETON}, counts  # no starter without contract
    assert starters.empty_share(LADDERS) >= starters.SHARE, counts
    for per in counts.values():
        for step_id in per.get(starters.SKELETON, []):
            why = starters.reason(steps.get(step_id))
            assert why and len(why) > len(starters.REASON_MARK) + 30, step_id


def test_the_share_and_the_reason_checks_can_fail():
    table_step = steps.get("04.1")
    skeleton = dataclasses.replace(table_step, kernel_name="given", starter='''
        @cuda.jit
        def given(x, out, positions, inv_freq, n_pairs, total_pairs):
            i = cuda.grid(1)
            ...
        ''')
    assert starters.shape(skeleton) == starters.SKELETON
    assert starters.reason(skeleton) is None  # no notebook cell says why
    bare = dataclasses.replace(table_step, starter="def f(x):\n    pass\n")
    assert starters.shape(bare) == starters.NO_CONTRACT
    assert starters.empty_share({"04": [skeleton, skeleton, table_step]}) < starters.SHARE
    assert starters.reason(steps.get("04.1")) is None  # an empty starter gives no reason


def test_printing_a_step_shows_its_task_and_never_its_hints():
    """Two independent learners printed ``steps.get(id)`` to read a step and saw its hints."""
    from ropelab.grader import steps

    for step in (steps.STEPS.values() if isinstance(steps.STEPS, dict) else steps.STEPS):
        shown = repr(step)
        assert step.task in shown, step.id
        secrets = [step.hint, step.bounds_hint, *step.bounds_hints.values(),
                   getattr(step, "unwritten", "")]
        leaked = [s for s in secrets if s and s in shown]
        assert not leaked, (step.id, leaked)
