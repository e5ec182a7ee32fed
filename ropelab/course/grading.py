"""Grading a learner's kernel: run it, compare it, explain the first mistake, count its cost.

Nothing here knows a particular step; :mod:`.steps` declares them.  The steps of
:func:`grade`, each of which can end with a verdict:

1. *not solved yet*: the kernel's source still has a blank (``...``) to fill in;
2. *error*: it is not a ``@cuda.jit`` kernel, takes other arguments than the launch contract,
   or fails to compile or run;
3. *out of bounds*: the simulator raised ``IndexError`` (on a GPU: it wrote into the slack
   after ``out``), reported with the thread that did it; *race*, *barrier divergence*: a
   shared element touched by two threads with no barrier between, a barrier not every thread
   of the block reaches (:mod:`ropelab.sim`); *error*, an illegal launch or launch arguments
   of other types than the contract's;
4. *wrong*: a launch that breaks a rule its step states (:mod:`.steps.contracts`); then the
   first element, in memory order, farther from the float64 reference than the tolerance, as
   (token, pair) with expected and obtained values, and a hint that names the typical mistake
   whose output matches the learner's there (or that ``out`` was read before it was written);
   then a right value written by a thread the step does not give it to (:mod:`.judging`);
5. *not solved yet*, again: the values are right but the PTX census misses the exercise's
   point (a float64 instruction, named by the operations that widened; a second division, a
   load after a store ...), for a kernel step's kernel or the learner's kernels a launch step
   launched (:mod:`.census_gates`);
6. *PASS*, with the learner's census next to ropelab's kernel's.

A verdict is returned and printed, never raised: a wrong kernel must not stop a notebook.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..target import SIMULATED
from ..tolerance import rope_atol
from . import census_gates, judging, kernel_census
# re-exported: the steps declare their gates, and the listing labels them, from here
from .census_gates import COUNTER_LABELS, Gate, census_lines, counter_value  # noqa: F401
from .intake import (_parameters, blanks, empty_body, identify, numpy_calls,  # noqa: F401
                     read_source)
from .recording import LaunchRejected
from .trial import SENTINEL, run, unwritten  # noqa: F401  (SENTINEL re-exported)

# Floats after ``out`` on a GPU, and the never-written sentinel: see :mod:`.trial`.
SLACK = 64


def tolerance(max_abs: float, max_angle: float) -> float:
    """How far a learner's float32 output may be from the float64 reference.

    The one place the grader asks :mod:`ropelab.tolerance`: the fast-math bound, since learners'
    kernels are compiled with ``fastmath=True`` on a GPU as ropelab's are.
    """
    return rope_atol(max_abs, max_angle, fastmath=True)


# --------------------------------------------------------------------------------------------
# Test cases and census gates
# --------------------------------------------------------------------------------------------

@dataclass
class Case:
    """One launch of the learner's kernel and what it must produce.

    ``inputs`` maps each argument name of the launch contract to a host array or a NumPy
    scalar of the contract's type; ``out`` (the argument named so) is created by the grader.
    ``expected`` is the float64 reference output, ``alternatives`` are ``(hint, output)`` of
    typical mistakes, ``locate`` turns a flat index into words ("token 2, pair 17") and
    ``unit`` lists the flat indices shown together (a pair's two floats); ``diagnose``, if
    given, explains a wrong element in the exercise's own terms before the alternatives are
    tried.
    """

    label: str
    inputs: dict
    grid: tuple
    block: tuple
    expected: np.ndarray
    tol: float
    locate: Callable[[int], str]
    unit: Callable[[int], list]
    alternatives: list = field(default_factory=list)
    bytes_moved: int = 0
    diagnose: Callable[[np.ndarray, int], str | None] | None = None  # tried before alternatives
    # The global thread index (block * threads per block + thread) that must write each element
    # of out, -1 where any may; None: the step states no owner.  Kernel steps only: the grader
    # chooses their grid.
    owner: np.ndarray | None = None


# --------------------------------------------------------------------------------------------
# The verdict
# --------------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """What :func:`grade` found; ``str(verdict)`` is the text the notebook shows."""

    exercise: str
    # "PASS", "not solved yet", "wrong", "out of bounds", "race", "barrier divergence", "error",
    # "stopped"
    status: str
    lines: list
    timer: Callable[[int], str] | None = None  # set on PASS: times the kernel on a GPU
    census: dict | None = None  # the learner's PTX census row, when one was taken
    subject: tuple | None = None  # (step, function) graded; set by the runner, for show()

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return f"<Verdict {self.exercise}: {self.status}>"

    def time(self, repeats: int = 20) -> None:
        """Time the passing kernel on a GPU beside ropelab's and a device copy of the same
        bytes; with no GPU, print a predicted H200 time if a prediction model is installed,
        else say that nothing was timed.  Notebooks call this in a cell whose output nbval
        ignores.  See :mod:`.learner_time`."""
        from .learner_time import report
        print(report(self, repeats))

    def show(self):
        """Draw the graded kernel on a small shape: who read and wrote which element, accesses
        per thread, and its output beside the reference with wrong cells marked (passing and
        failing kernels alike).  Returns the matplotlib figure.  See :mod:`.show`."""
        from .show import show_verdict
        return show_verdict(self)


def _verdict(exercise: str, status: str, first: str, *more: str) -> Verdict:
    head = (first if status == "PASS" else f"{status} {first}" if first.startswith("at thread")
            else f"{status}: {first}")
    return Verdict(exercise, status, [head, *[m for m in more if m]])


# --------------------------------------------------------------------------------------------
# Step 3-4: run and compare
# --------------------------------------------------------------------------------------------

_THREAD = re.compile(r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]: ?(.*)")


def _coords(values) -> str:
    x, y, z = (int(v) for v in values)
    return str(x) if y == z == 0 else f"({x}, {y}, {z})" if z else f"({x}, {y})"


def out_of_bounds_text(message: str) -> str:
    """"at thread (block B, thread T): <what numpy said>" from a simulator IndexError."""
    m = _THREAD.search(message)
    if not m:
        return f"({message.strip()})"
    tid, cta, what = m.groups()[:3], m.groups()[3:6], m.group(7)
    what = re.sub(r"\s*\(lane \d+ failed; its warp-mates stopped waiting for it\)", "", what)
    what = re.sub(r"\s*\[array=\w+\]", "", what)
    return f"at thread (block {_coords(cta)}, thread {_coords(tid)}): {what.strip()}"


def array_of(message: str) -> str | None:
    """The argument an out-of-bounds message names (``[array=x]``, from :mod:`.recording`)."""
    m = re.search(r"\[array=(\w+)\]", message)
    return m.group(1) if m else None


def first_wrong(case: Case, got: np.ndarray) -> int | None:
    """Flat index of the first element outside the tolerance (NaN counts as wrong), or None."""
    err = np.abs(got.astype(np.float64) - case.expected.ravel())
    bad = ~(err <= case.tol)
    return int(np.argmax(bad)) if bad.any() else None


def _values(a: np.ndarray, idx: list) -> str:
    vals = [f"{float(a[i]):.6g}" for i in idx]
    return vals[0] if len(vals) == 1 else "(" + ", ".join(vals) + ")"


def diagnose(case: Case, got: np.ndarray, e: int, fallback: str, arguments=None,
             trial=None) -> str:
    """The hint for the first wrong element: a typical mistake whose output matches there.

    Only the wrong floats of the element's unit (its pair) are compared with each mistake's
    output: a kernel may get one float of a pair right and the other wrong.  ``trial`` (a
    simulated run's records) tells an element no thread wrote from one read uninitialised.
    """
    expected = case.expected.ravel()
    absent = [n for n in case.inputs if arguments is not None and n not in arguments]
    wrong = [i for i in case.unit(e) if not abs(float(got[i]) - expected[i]) <= case.tol]
    uninitialised = judging.read_before_written(trial, wrong)
    if uninitialised:
        return uninitialised
    if not any(judging.written(trial, got, wrong)):
        return ("this element was never written: no thread stored to it (a guard that stops "
                "too early, or a loop that does not reach every element?)")
    if case.diagnose is not None:
        found = case.diagnose(got, e)
        if found:
            return found
    for hint, alt in case.alternatives:
        if any(f"{name}[" in hint for name in absent):
            continue  # a hint about an array this step does not have
        flat = alt.ravel()
        if all(abs(float(got[i]) - float(flat[i])) <= case.tol for i in wrong):
            return hint
    x = case.inputs.get("x")
    if x is not None and x.size == expected.size and all(
            abs(float(got[i]) - float(x.ravel()[i])) <= case.tol for i in wrong):
        return "out holds x unchanged here: the rotation was not applied to this element"
    return fallback


# --------------------------------------------------------------------------------------------
# The whole check
# --------------------------------------------------------------------------------------------

def _run_error(ex, name: str, case: Case, exc: Exception) -> Verdict:
    """The verdict for an exception out of a run: out of bounds, a race, a refused launch,
    or an error shown with the useful lines of its message."""
    from ..sim.barrier import BarrierDivergence
    from ..sim.shared_race import SharedMemoryRace

    text = str(exc)
    if isinstance(exc, LaunchRejected):
        return _verdict(ex.id, "error", f"illegal launch [case {case.label}]: {text}")
    if isinstance(exc, BarrierDivergence):
        what, _, rule = text.partition(": every thread of a block")
        return _verdict(ex.id, "barrier divergence", f"{what.removeprefix('barrier divergence: ')} "
                        f"[case {case.label}]",
                        "hint: every thread of the block must reach each cuda.syncthreads() "
                        "(on a GPU, a barrier some threads skip can hang the block): put guards "
                        "such as `if idx < total` after the barrier or around the work between "
                        "barriers, never around the barrier itself")
    if isinstance(exc, SharedMemoryRace):
        race = re.sub(r"^tid=\[.*?\] ctaid=\[.*?\]: ?", "", text)
        return _verdict(ex.id, "race", f"{race} [case {case.label}]",
                        "hint: every thread must pass a cuda.syncthreads() between writing a "
                        "shared element and another thread reading or writing it")
    if isinstance(exc, IndexError) and "out of bounds" in text:
        array = array_of(text)
        named = f" ({array})" if array and array not in text.split("[array=")[0] else ""
        return _verdict(ex.id, "out of bounds", f"{out_of_bounds_text(text)}{named} "
                        f"[case {case.label}]", f"hint: {ex.hint_for(array)}")
    if isinstance(exc, IndexError):
        first = useful(f"IndexError: {text}")
        return _verdict(ex.id, "error", f"{name} did not run [case {case.label}]: {first}")
    return _verdict(ex.id, "error", f"{name} did not run [case {case.label}]: "
                    f"{useful(f'{type(exc).__name__}: {text}')}",
                    "" if SIMULATED else "hint: a GPU does not check indices; run the check on "
                    "the simulator (ROPELAB_TARGET=simulator), which does")


def useful(message: str) -> str:
    return kernel_census.useful_lines(message)


def _compare(ex, name: str, case: Case, trial) -> Verdict | None:
    """The first thing wrong with a finished run, or None."""
    size = case.expected.size
    got = trial.out
    if got.size > size and not unwritten(got[size:]).all():
        return _verdict(ex.id, "out of bounds", f"a thread wrote past the end of out "
                        f"[case {case.label}]", f"hint: {ex.hint_for('out')}")
    for arg, before in case.inputs.items():
        after = trial.inputs_after.get(arg)
        if after is None or not isinstance(before, np.ndarray):
            continue
        changed = np.flatnonzero(~((after == before) | (np.isnan(after) & np.isnan(before))))
        if changed.size:
            k = int(changed[0])
            return _verdict(ex.id, "wrong", f"{name} wrote into its input {arg} [case "
                            f"{case.label}]: element {k} was {float(before.ravel()[k]):.6g}, is "
                            f"{float(after.ravel()[k]):.6g} ({changed.size} element"
                            f"{'s' if changed.size > 1 else ''} changed)",
                            f"hint: {arg} is read-only in this step; write results to out only")
    if ex.kind == "launch" and trial.launches:
        broken = judging.launch_rule_problem(ex, case, trial)
        if broken:  # a launch that breaks the step's contract is wrong whatever it computed
            return _verdict(ex.id, "wrong", f"{broken[0]} [case {case.label}]",
                            f"hint: {broken[1]}")
    got = got[:size]
    e = first_wrong(case, got)
    if e is not None:
        idx = case.unit(e)
        shown = [f"{float(got[i]):.6g}" if stored else "never written"
                 for i, stored in zip(idx, judging.written(trial, got, idx))]
        got_text = shown[0] if len(shown) == 1 else "(" + ", ".join(shown) + ")"
        return _verdict(ex.id, "wrong", f"{case.locate(e)} [case {case.label}]: expected "
                        f"{_values(case.expected.ravel(), idx)}, got {got_text} "
                        f"(tolerance {case.tol:.1e})",
                        f"hint: {diagnose(case, got, e, ex.hint, ex.arguments, trial)}")
    foreign = judging.ownership_problem(ex, case, trial)
    if foreign:
        return _verdict(ex.id, "wrong", f"the values are right, but {foreign} [case "
                        f"{case.label}]", "hint: a thread writes only the elements the step "
                        "gives it; the others are other threads' work")
    if ex.kind == "launch" and trial.launches:
        return _launch_shape(ex, case, trial)
    return None


def _launch_shape(ex, case: Case, trial) -> Verdict | None:
    """A launch step's configuration: no wholly idle block (one that wrote nothing to out)."""
    out = trial.watched.get("out")
    if out is None:
        return None
    launch = trial.launches[-1]
    busy = set(np.unique(out.access.writer_block[out.access.writer_block >= 0]).tolist())
    idle = [b for b in range(launch.blocks) if b not in busy]
    if idle and len(trial.launches) == 1:
        return _verdict(ex.id, "wrong", f"block {idle[0]} of your {launch.text()} wrote "
                        f"nothing [case {case.label}]: {len(idle)} of {launch.blocks} blocks "
                        "were wholly idle",
                        "hint: round the grid up to whole blocks, not further: blocks = "
                        "(work + threads - 1) // threads")
    return None


def grade(exercise, kernel) -> Verdict:
    """Every step of the module docstring, for one :class:`~.steps.base.Step`."""
    ex = exercise
    fn, refused = identify(ex, kernel)
    if refused is not None:
        return _verdict(ex.id, "error", refused)
    name = fn.__name__
    source, unreadable = read_source(fn)
    if source is None:
        return _verdict(ex.id, "error", f"cannot grade {name}: {unreadable}")
    left = blanks(source)
    if left:
        shown = "; ".join(f"`{line}`" for line in left[:4]) + (" ..." if len(left) > 4 else "")
        return _verdict(ex.id, "not solved yet", f"{name} still has {len(left)} blank"
                        f"{'s' if len(left) > 1 else ''} (...) to fill in: {shown}",
                        f"task: {ex.task}")
    if empty_body(source):
        return _verdict(ex.id, "not solved yet", f"{name} has an empty body (pass): write it",
                        f"task: {ex.task}")
    for rule in ex.forbid:
        rows = rule.found_in(source)
        if rows:
            return _verdict(ex.id, "not solved yet", f"`{rule.what}` is not allowed in this "
                            f"step: {rule.message}",
                            f"  line {rows[0]}: `{source.splitlines()[rows[0] - 1].strip()}`")
    params = _parameters(fn)
    if len(params) != len(ex.arguments):
        return _verdict(ex.id, "error", f"{name} takes ({', '.join(params)}), but the step "
                        f"calls it with ({', '.join(ex.arguments)})")

    cases = ex.cases()
    for case in cases:
        try:
            trial = run(ex, case, kernel)
        except Exception as exc:  # a verdict, never an exception
            return _run_error(ex, name, case, exc)
        if ex.kind == "launch" and SIMULATED and not trial.launches:
            return _verdict(ex.id, "error", f"{name} launched no kernel [case {case.label}]: "
                            "it must compute grid and block and call kernel[grid, block](...)")
        found = _compare(ex, name, case, trial)
        if found is not None:
            return found
    shapes = ", ".join(c.label for c in cases) + (
        ", random positions" if "positions" in ex.arguments else "")
    passed = f"PASS {ex.id}: {name} matches the float64 reference on {shapes}"
    outcome = census_gates.judge(ex, kernel, trial)
    verdict = _verdict(ex.id, outcome.status, passed if outcome.first is None else outcome.first,
                       *outcome.lines)
    if outcome.status == "PASS":
        verdict.census = outcome.census
        verdict.timer = _timer(ex, kernel)
    return verdict


def _timer(ex, kernel):
    def timed(repeats: int) -> str:
        from .learner_time import time_on_gpu
        try:
            return time_on_gpu(ex, kernel, repeats)
        except Exception as exc:  # a verdict's time() reports, it never raises
            return f"not timed: {type(exc).__name__}: {exc}"
    return timed
