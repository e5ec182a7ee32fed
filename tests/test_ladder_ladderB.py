"""The ladders of notebooks 04-06 have the shape the course asks for, read from the step registry,
the solution files and the notebook sources (no kernel runs here; ``exercises --verify``,
run by tests/test_exercises.py, grades every solution, wrong attempt and starter).
"""

import ast
import inspect
import textwrap

import pytest

from ropelab.grader import steps
from ropelab.grader import verify

# A step's recorded wrong attempts: at least the two typical ones, and one more for each refusal
# the grader learned since (a barrier, thread ownership, a launch rule, an argument type); each
# is one graded child in --verify, so a few, not a catalogue.
MOST_WRONG = 6

NOTEBOOKS = ("04", "05", "06")


def _body_is_empty(source: str) -> bool:
    """The function holds a docstring (optional) and ``pass``, nothing else."""
    fn = next(n for n in ast.walk(ast.parse(textwrap.dedent(source)))
              if isinstance(n, ast.FunctionDef))
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return len(body) == 1 and isinstance(body[0], ast.Pass)


def _starter_function(step) -> str:
    """The starter cell's text from the ``def`` of the step's function on."""
    cell = step.starter_source()
    assert cell is not None, f"{step.id}: no starter cell"
    start = cell.index(f"def {step.kernel_name}(")
    return cell[start:]


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_ladder_has_the_rungs_the_issue_asks_for(number):
    ladder = steps.for_notebook(number)
    assert len(ladder) >= 3
    assert [s.id for s in ladder] == [f"{number}.{k}" for k in range(1, len(ladder) + 1)]
    empty = [s.id for s in ladder if _body_is_empty(_starter_function(s))]
    assert len(empty) >= 2, f"steps starting from an empty body: {empty}"
    assert any(s.kind == "launch" for s in ladder)
    # The step the notebook had before the ladder is still reachable by its old id.
    assert sum(bool(s.alias) for s in ladder) == 1


@pytest.mark.parametrize("number", ("04", "06"))
def test_shared_memory_steps_are_race_checked(number):
    """04 and 06 each have a step where shared memory is the tool, graded with the race check;
    its solution stages through a shared array and waits at a barrier."""
    ladder = steps.for_notebook(number)
    module = verify.load_solution(verify.solution_path(ladder[0]))
    shared = [s for s in ladder if s.shared]
    assert shared, f"notebook {number} has no shared-memory step"
    for step in shared:
        source = inspect.getsource(module.SOLUTIONS[step.id].py_func)
        assert "cuda.shared.array(" in source and "cuda.syncthreads()" in source


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_every_step_has_a_solution_and_two_to_six_wrong_attempts(number):
    ladder = steps.for_notebook(number)
    module = verify.load_solution(verify.solution_path(ladder[0]))
    assert set(module.SOLUTIONS) == {s.id for s in ladder}
    assert set(module.WRONG) == {s.id for s in ladder}
    for step in ladder:
        attempts = module.WRONG[step.id]
        assert 2 <= len(attempts) <= MOST_WRONG, f"{step.id}: {len(attempts)} wrong attempts"
        assert all(isinstance(fragment, str) and fragment for _, fragment in attempts)
        if step.kind == "launch":  # a host function, not a kernel
            assert not hasattr(module.SOLUTIONS[step.id], "py_func")


@pytest.mark.parametrize("number", NOTEBOOKS)
def test_no_race_attempt_without_a_race_check(number):
    """A wrong attempt expected to be caught as a race belongs to a step that checks races."""
    ladder = steps.for_notebook(number)
    module = verify.load_solution(verify.solution_path(ladder[0]))
    for step in ladder:
        if any(fragment == "race" for _, fragment in module.WRONG[step.id]):
            assert step.shared, step.id


def test_launch_cases_give_host_values():
    """A launch step's caller passes Python ints (a numpy uint64 times an int is a float64)."""
    for number in NOTEBOOKS:
        for step in steps.for_notebook(number):
            if step.kind != "launch":
                continue
            for case in step.cases():
                for name in step.arguments:
                    value = case.inputs.get(name)
                    if name in ("tokens", "heads", "head_dim", "hidden", "heads_q", "heads_k",
                                "heads_v"):
                        assert type(value) is int, (step.id, name, type(value))
