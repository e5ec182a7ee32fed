"""``python -m ropelab exercises --verify``: the grader against known answers.

For every step of every notebook's ladder (:mod:`.steps`):

* its solution in ``notebooks/solutions/NN_*.py`` (``SOLUTIONS[step_id]``) must pass;
* each other right kernel it records (``ALSO_RIGHT[step_id] = [fn, ...]``: ways a learner
  writes it that the solution does not take, such as a grid-stride loop) must pass too;
* each recorded wrong attempt (``WRONG[step_id] = [(fn, fragment), ...]``) must be rejected,
  with a verdict that contains ``fragment``;
* its starter (``Step.starter``, or the cell of ``scripts/notebooks/src/NN_*.py`` that defines the
  step's function) must be graded "not solved yet", as the stored notebook shows it.

A grader that passes a wrong kernel, rejects a right one, or explains a mistake with the wrong
words fails here, and the command exits non-zero.  The recorded messages are the simulator's
(only it checks every index), so on a GPU host :func:`run` re-runs itself on the simulator in a
child process.  ``--time`` (:func:`time_solutions`) is the GPU's part: every solution graded on
the GPU and timed against a device copy.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..target import SIMULATED
from . import kernel_census
from . import steps as ladder
from .grading import grade
from .intake import empty_body
from .runner import grade_safely
from .steps.base import SOLUTIONS, Step


@dataclass
class Outcome:
    exercise: str
    what: str  # "solution", "wrong: <kernel name>", "starter"
    ok: bool
    verdict: str  # the verdict's first line
    expected: str  # what was required


def solution_path(ex: Step, directory: Path | None = None) -> Path:
    return (directory or SOLUTIONS) / f"{ex.notebook}.py"


def load_solution(path: Path):
    """Import a solution file as a module (its kernels need a file for their source)."""
    name = f"ropelab_solution_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _notebook_names() -> dict:
    """What a notebook has imported before its starter cells (a starter may use these bare)."""
    import math

    import numba
    import numpy as np
    from numba import cuda

    names = {"cuda": cuda, "math": math, "np": np, "numba": numba}
    for t in ("float32", "float64", "int32", "int64", "uint32", "uint64"):
        names[t] = getattr(numba, t)
    return names


def starter_kernel(ex: Step):
    """Run the notebook's starter cell; return its kernel (None without a source checkout).

    The cell is registered in :mod:`linecache` under a made-up file name, as IPython does for
    notebook cells, so that ``inspect.getsource`` finds it.
    """
    source = ex.starter_source()
    if source is None:
        return None
    filename = f"<starter {ex.notebook}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"__name__": f"ropelab_starter_{ex.notebook}", **_notebook_names()}
    try:
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102  (our own source)
    except NameError:  # a starter that uses names defined in earlier cells: run them first
        return None
    return namespace.get(ex.kernel_name)


def _first(verdict) -> str:
    return str(verdict).splitlines()[0]


def _name(fn) -> str:
    found = kernel_census.python_function(fn)
    return getattr(found or fn, "__name__", repr(fn))


def _graded(ex: Step, fn):
    """Graded as a notebook grades: in a child that a runaway attempt cannot hang."""
    return grade_safely(ex, fn, timeout_s=TIMEOUT_S)


TIMEOUT_S = 60.0  # per graded function; a recorded `while True` attempt is stopped by it


def verify_step(ex: Step, module, *, grade_fn=_graded) -> list[Outcome]:
    """The outcomes of one step: its solution, its wrong attempts, its starter."""
    solutions, wrong_all = getattr(module, "SOLUTIONS", {}), getattr(module, "WRONG", {})
    if ex.id not in solutions:
        return [Outcome(ex.id, "solution", False, f"no SOLUTIONS[{ex.id!r}]", "a solution")]
    out = []
    verdict = grade_fn(ex, solutions[ex.id])
    out.append(Outcome(ex.id, "solution", verdict.passed, _first(verdict), "PASS"))
    for fn in getattr(module, "ALSO_RIGHT", {}).get(ex.id, []):
        verdict = grade_fn(ex, fn)
        out.append(Outcome(ex.id, f"right: {_name(fn)}", verdict.passed, _first(verdict),
                           "PASS"))
    wrong = list(wrong_all.get(ex.id, []))
    if len(wrong) < 2:
        out.append(Outcome(ex.id, "wrong attempts", False, f"{len(wrong)} recorded",
                           "at least two"))
    for fn, fragment in wrong:
        verdict = grade_fn(ex, fn)
        ok = not verdict.passed and fragment in str(verdict)
        out.append(Outcome(ex.id, f"wrong: {_name(fn)}", ok, _first(verdict),
                           f"rejected, {fragment!r}"))
    starter = starter_kernel(ex)
    if starter is None:
        out.append(Outcome(ex.id, "starter", False, f"no starter defining {ex.kernel_name} "
                           f"(Step.starter or a cell of scripts/notebooks/src/{ex.notebook}.py)",
                           "a starter"))
    else:
        verdict = grade_fn(ex, starter)
        out.append(Outcome(ex.id, "starter", verdict.status == "not solved yet", _first(verdict),
                           "not solved yet"))
    return out


def verify_notebook(number: str, directory: Path | None = None, *,
                    grade_fn=_graded) -> list[Outcome]:
    """Every step of notebook ``number`` against its solution file."""
    ladder = ladder_of(number)
    path = solution_path(ladder[0], directory)
    if not path.is_file():
        return [Outcome(s.id, "solution", False, f"no file {path.name}", "a solution file")
                for s in ladder]
    module = load_solution(path)
    return [o for s in ladder for o in verify_step(s, module, grade_fn=grade_fn)]


def ladder_of(number: str) -> list:
    return ladder.for_notebook(number)


def verify_exercise(ex: Step, directory: Path | None = None) -> list[Outcome]:
    """One step against its notebook's solution file (the pre-ladder name)."""
    path = solution_path(ex, directory)
    if not path.is_file():
        return [Outcome(ex.id, "solution", False, f"no file {path.name}", "a solution file")]
    step = ladder.get(ex.id)
    return verify_step(step, load_solution(path))


def verify_in_child(*, save_census: bool = False, notebooks=None, capture: bool = False,
                    timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m ropelab exercises --verify`` in a child forced onto the simulator; its
    output goes to this process's, or is captured (``capture``, as text)."""
    env = dict(os.environ, ROPELAB_TARGET="simulator", ROPELAB_QUIET="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    cmd = [sys.executable, "-m", "ropelab", "exercises", "--verify"]
    cmd += [arg for number in notebooks or () for arg in ("--notebook", number)]
    return subprocess.run(cmd + (["--save-census"] if save_census else []), env=env, check=False,
                          cwd=str(Path(__file__).resolve().parents[2]), capture_output=capture,
                          text=True, timeout=timeout)


def _on_simulator(save_census: bool, notebooks=None) -> bool:
    return verify_in_child(save_census=save_census, notebooks=notebooks).returncode == 0


LADDER_MIN_STEPS = 3  # at least 3 graded steps per notebook,
LADDER_MIN_EMPTY = 2  # at least 2 of them from an empty body (signature, docstring, pass),
LADDER_MIN_LAUNCH = 1  # at least one where the learner writes the launch


def ladder_outcomes(number: str, ladder_steps: list | None = None) -> list[Outcome]:
    """The shape rules of notebook ``number``'s ladder, as outcomes.

    A notebook with one step has no ladder yet (its pre-ladder exercise): reported, not failed.
    Once it has more, every rule holds or ``--verify`` fails.
    """
    found = ladder_steps if ladder_steps is not None else ladder_of(number)
    if len(found) <= 1:
        return [Outcome(f"{number}", "ladder", True, "not a ladder yet (one step): rules "
                        "apply from its second step", "")]
    empty = []
    for s in found:
        source = s.starter_source()
        try:
            if source is not None and empty_body(source):
                empty.append(s.id)
        except SyntaxError:
            pass
    launch = [s.id for s in found if s.kind == "launch"]
    rules = [(len(found) >= LADDER_MIN_STEPS, f"{len(found)} steps",
              f"at least {LADDER_MIN_STEPS} steps"),
             (len(empty) >= LADDER_MIN_EMPTY, f"{len(empty)} from an empty body "
              f"({', '.join(empty) or 'none'})", f"at least {LADDER_MIN_EMPTY} from an empty body"),
             (len(launch) >= LADDER_MIN_LAUNCH, f"{len(launch)} launch step(s) "
              f"({', '.join(launch) or 'none'})", f"at least {LADDER_MIN_LAUNCH} launch step")]
    return [Outcome(number, "ladder", ok, got, want) for ok, got, want in rules]


def run(*, save_census: bool = False, directory: Path | None = None, stream=None,
        notebooks=None) -> bool:
    """Verify every exercise (of ``notebooks`` only, e.g. ``["01"]``, when given), print one
    line per kernel; True when everything holds."""
    if not SIMULATED and directory is None and stream is None:
        print("on the simulator (it checks every index; the recorded messages are its own):",
              flush=True)
        return _on_simulator(save_census, notebooks)
    stream = stream or sys.stdout
    outcomes = []
    for number in [n for n in ladder.notebooks() if notebooks is None or n in notebooks]:
        for o in ladder_outcomes(number) + verify_notebook(number, directory):
            outcomes.append(o)
            mark = "ok  " if o.ok else "FAIL"
            print(f"{mark} {o.exercise:<8} {o.what:<28} {o.verdict[:110]}", file=stream)
            if not o.ok:
                print(f"     expected: {o.expected}", file=stream)
    failed = sum(not o.ok for o in outcomes)
    print(f"{len(outcomes)} checks, {failed} failed", file=stream)
    if save_census:
        path = kernel_census.save_used()
        print(f"census cache: {len(kernel_census.USED)} entries written to "
              f"{path.relative_to(path.parents[2])}", file=stream)
    return failed == 0


def time_solutions(repeats: int = 20) -> bool:
    """On a GPU: grade every solution there and time it against a device copy of its bytes.

    True when every solution passes on the GPU (fast-math sin/cos, real float32 hardware).
    """
    ok = True
    for ex in ladder.STEPS.values():
        solutions = getattr(load_solution(solution_path(ex)), "SOLUTIONS", {})
        if ex.id not in solutions:
            ok = False
            print(f"FAIL {ex.id:<8} no solution")
            continue
        verdict = grade(ex, solutions[ex.id])
        ok &= verdict.passed
        print(f"{'ok  ' if verdict.passed else 'FAIL'} {ex.id:<8} {_first(verdict)[:100]}")
        if verdict.passed:
            print(f"     {verdict.timer(repeats)}", flush=True)
    return ok
