"""``python -m ropelab exercises --verify``: the grader against known answers.

For every exercise:

* the solution in ``notebooks/solutions/NN_*.py`` (``SOLUTION``) must pass;
* each recorded wrong attempt (``WRONG = [(kernel, fragment), ...]``) must be rejected, with a
  verdict that contains ``fragment``;
* the notebook's starter (the cell of ``notebooks/src/NN_*.py`` that defines the exercise's
  kernel) must be graded "not solved yet", as the stored notebook shows it.

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
from .exercises import EXERCISES, SOLUTIONS, Exercise
from .grading import grade


@dataclass
class Outcome:
    exercise: str
    what: str  # "solution", "wrong: <kernel name>", "starter"
    ok: bool
    verdict: str  # the verdict's first line
    expected: str  # what was required


def solution_path(ex: Exercise, directory: Path | None = None) -> Path:
    return (directory or SOLUTIONS) / f"{ex.notebook}.py"


def load_solution(path: Path):
    """Import a solution file as a module (its kernels need a file for their source)."""
    name = f"ropelab_solution_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def starter_kernel(ex: Exercise):
    """Run the notebook's starter cell; return its kernel (None without a source checkout).

    The cell is registered in :mod:`linecache` under a made-up file name, as IPython does for
    notebook cells, so that ``inspect.getsource`` finds it.
    """
    source = ex.starter_source()
    if source is None:
        return None
    filename = f"<starter {ex.notebook}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"__name__": f"ropelab_starter_{ex.notebook}"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102  (our own notebook source)
    return namespace[ex.kernel_name]


def _first(verdict) -> str:
    return str(verdict).splitlines()[0]


def verify_exercise(ex: Exercise, directory: Path | None = None) -> list[Outcome]:
    out = []
    path = solution_path(ex, directory)
    if not path.is_file():
        return [Outcome(ex.id, "solution", False, f"no file {path.name}", "a solution file")]
    module = load_solution(path)
    if getattr(module, "EXERCISE", None) != ex.id:
        return [Outcome(ex.id, "solution", False, f"{path.name} declares EXERCISE = "
                        f"{getattr(module, 'EXERCISE', None)!r}", repr(ex.id))]
    verdict = grade(ex, module.SOLUTION)
    out.append(Outcome(ex.id, "solution", verdict.passed, _first(verdict), "PASS"))
    wrong = list(getattr(module, "WRONG", []))
    if len(wrong) < 2:
        out.append(Outcome(ex.id, "wrong attempts", False, f"{len(wrong)} recorded",
                           "at least two"))
    for kernel, fragment in wrong:
        verdict = grade(ex, kernel)
        ok = not verdict.passed and fragment in str(verdict)
        name = kernel_census.python_function(kernel).__name__
        out.append(Outcome(ex.id, f"wrong: {name}", ok, _first(verdict), f"rejected, {fragment!r}"))
    starter = starter_kernel(ex)
    if starter is None:
        out.append(Outcome(ex.id, "starter", False, f"no cell defining {ex.kernel_name} in "
                           f"notebooks/src/{ex.notebook}.py", "a starter cell"))
    else:
        verdict = grade(ex, starter)
        out.append(Outcome(ex.id, "starter", verdict.status == "not solved yet", _first(verdict),
                           "not solved yet"))
    return out


def _on_simulator(save_census: bool) -> bool:
    """Run ``python -m ropelab exercises --verify`` in a child forced onto the simulator."""
    env = dict(os.environ, ROPELAB_TARGET="simulator", ROPELAB_QUIET="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    cmd = [sys.executable, "-m", "ropelab", "exercises", "--verify"]
    done = subprocess.run(cmd + (["--save-census"] if save_census else []), env=env, check=False,
                          cwd=str(Path(__file__).resolve().parents[2]))
    return done.returncode == 0


def run(*, save_census: bool = False, directory: Path | None = None, stream=None) -> bool:
    """Verify every exercise, print one line per kernel; True when everything holds."""
    if not SIMULATED and directory is None and stream is None:
        print("on the simulator (it checks every index; the recorded messages are its own):",
              flush=True)
        return _on_simulator(save_census)
    stream = stream or sys.stdout
    outcomes = []
    for ex in EXERCISES.values():
        for o in verify_exercise(ex, directory):
            outcomes.append(o)
            mark = "ok  " if o.ok else "FAIL"
            print(f"{mark} {o.exercise:<24} {o.what:<28} {o.verdict[:110]}", file=stream)
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
    for ex in EXERCISES.values():
        verdict = grade(ex, load_solution(solution_path(ex)).SOLUTION)
        ok &= verdict.passed
        print(f"{'ok  ' if verdict.passed else 'FAIL'} {ex.id:<24} {_first(verdict)[:100]}")
        if verdict.passed:
            print(f"     {verdict.timer(repeats)}", flush=True)
    return ok
