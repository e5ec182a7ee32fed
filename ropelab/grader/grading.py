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

The pieces are separate because the learner's code must not see the answers: :func:`intake`
(1-2, before anything runs) and :func:`judge_case` (3-4) and :func:`finish` (5-6) run where
the learner's code does not, and :func:`run_outcome` is the one call that runs it.  The cases
run are the step's own, then one drawn for this check alone (:mod:`.unseen`).  :func:`grade`
puts them together in this process, building each case's answer only after the learner's run
and checking that the run left the grader as it found it (:mod:`.tamper`);
:func:`.runner.grade_safely`, what the notebooks call, runs the learner's code in a forked child
instead (:mod:`.carried` says what crosses).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..target import SIMULATED
from ..tolerance import rope_atol
from ..sim import intwrap
from . import carried, census_gates, judging, kernel_census, tamper, unseen, wire
# re-exported: the steps declare their gates, and the listing labels them, from here
from .census_gates import COUNTER_LABELS, Gate, census_lines, counter_value  # noqa: F401
from .grade_types import Case, CaseInputs, Verdict, tampered, verdict_of  # noqa: F401
from .intake import (blanks, empty_body, identify, intake,  # noqa: F401
                     numpy_calls, read_source)
from .recording import LaunchRejected
from .trial import SENTINEL, SLACK, run, unwritten, wrong_mask  # noqa: F401  (re-exported)

# Floats after ``out`` on a GPU, and the never-written sentinel: see :mod:`.trial`.
MESSAGE_CHARS = 20_000  # of an exception's message, the most a verdict reads


def tolerance(max_abs: float, max_angle: float) -> float:
    """How far a learner's float32 output may be from the float64 reference.

    The one place the grader asks :mod:`ropelab.tolerance`: the fast-math bound, since learners'
    kernels are compiled with ``fastmath=True`` on a GPU as ropelab's are.
    """
    return rope_atol(max_abs, max_angle, fastmath=True)


_verdict = verdict_of  # the one way a verdict's first line is worded


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
    """Flat index of the first wrong element (:func:`wrong_mask`), or None."""
    bad = wrong_mask(case, got)
    return int(np.argmax(bad)) if bad.any() else None


def _values(a: np.ndarray, idx: list) -> str:
    # A NaN of the reference is an element that must stay untouched (see wrong_mask).
    vals = ["untouched" if np.isnan(a[i]) else f"{float(a[i]):.6g}" for i in idx]
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
    bad = wrong_mask(case, got)
    wrong = [i for i in case.unit(e) if bad[i]]
    uninitialised = judging.read_before_written(trial, wrong)
    if uninitialised:
        return uninitialised
    if not any(judging.written(trial, got, wrong)):
        return ("this element was never written: no thread stored to it (a guard that stops "
                "too early, or a loop that does not reach every element?)")
    twice = judging.stored_twice(trial, wrong)
    if twice is not None:
        # An element two threads stored to holds whichever store the schedule put last: no
        # typical mistake can be matched against it (the hint would change from run to run).
        return (f"{fallback} (besides, two threads stored to out[{twice}]: what it holds "
                "depends on which store came last)")
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
    from .ordering import GlobalMemoryRace

    text = str(exc)[:MESSAGE_CHARS]  # a message of megabytes is read no further
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
    race = re.sub(r"^tid=\[.*?\] ctaid=\[.*?\]: ?", "", text)  # the simulator's prefix
    if isinstance(exc, GlobalMemoryRace):
        return _verdict(ex.id, "race", f"{race} [case {case.label}]",
                        "hint: a thread may read what another thread of its block stored only "
                        "after a cuda.syncthreads() both pass, and never what a thread of another "
                        "block stored in the same launch; give each thread the inputs it needs "
                        "(or a second launch) instead")
    if isinstance(exc, SharedMemoryRace):
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
    broken = judging.host_problem(ex, trial)
    if not broken and ex.kind == "launch" and trial.launches:
        # a launch that breaks the step's contract is wrong whatever it computed
        broken = judging.launch_rule_problem(ex, case, trial)
    if broken:
        return _verdict(ex.id, "wrong", f"{broken[0]} [case {case.label}]", f"hint: {broken[1]}")
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
    read = None if foreign else judging.foreign_read_problem(ex, case, trial)
    if read:
        return _verdict(ex.id, "wrong", f"the values are right, but {read} [case "
                        f"{case.label}]", "hint: each lane loads only its own floats; the "
                        "shuffle butterfly brings it the sum of everyone else's")
    copied = None if foreign else judging.shared_copy_problem(ex, case, trial)
    if copied:
        return _verdict(ex.id, "wrong", f"the values are right, but {copied} [case "
                        f"{case.label}]", "hint: the block's threads share the copy, the "
                        "block waits, and then the frequency comes from the shared table")
    few = None if foreign else judging.shared_reads_problem(ex, trial)
    if few:
        return _verdict(ex.id, "wrong", f"the values are right, but {few} [case "
                        f"{case.label}]", f"hint: {ex.shared_reads_each[2]}")
    if foreign:
        return _verdict(ex.id, "wrong", f"the values are right, but {foreign} [case "
                        f"{case.label}]", "hint: a thread writes only the elements the step "
                        "gives it; the others are other threads' work")
    out = trial.watched.get("out") if trial.watched else None
    if out is not None and out.unordered_store:
        return _verdict(ex.id, "race", f"the values are right here, but {out.unordered_store} "
                        f"[case {case.label}]", "hint: every element of out has one writer; "
                        "a thread stores only the elements the step gives it")
    if ex.kind == "launch" and trial.launches:
        borrowed = judging.borrowed_problem(ex, trial)
        if borrowed:
            return _verdict(ex.id, "wrong", f"{borrowed[0]} [case {case.label}]",
                            f"hint: {borrowed[1]}")
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
    broken = judging.idle_launch_problem(ex, trial)  # every launch, however many follow
    if broken:
        return _verdict(ex.id, "wrong", f"{broken[0]} [case {case.label}]", f"hint: {broken[1]}")
    return None


def run_outcome(ex, name: str, case: CaseInputs, kernel):
    """Run ``kernel`` on one case's inputs: ``(trial, None)``, or ``(None, verdict)`` when the
    run raised.  The one place the learner's code runs; it gets no answer to copy."""
    try:
        with intwrap.refusing():  # a sum that wraps here and not on a GPU fails the run
            return run(ex, case, kernel), None
    except Exception as exc:  # a verdict, never an exception
        try:
            return None, _run_error(ex, name, case, exc)
        except Exception as inner:  # noqa: BLE001  (an exception whose message raises)
            return None, _verdict(ex.id, "error", f"{name} did not run [case {case.label}]: "
                                  f"{type(exc).__name__} (its message could not be read: "
                                  f"{type(inner).__name__})")
    except BaseException as exc:  # noqa: BLE001  (SystemExit, KeyboardInterrupt ...)
        return None, _verdict(ex.id, "error", f"{name} raised {type(exc).__name__} [case "
                              f"{case.label}]",
                              "hint: a graded function must return: SystemExit, "
                              "KeyboardInterrupt and other BaseExceptions stop a program, and "
                              "are not a way to hand back a result")


def judge_case(ex, name: str, case: Case, trial) -> Verdict | None:
    """Steps 3-4 for one finished run: the verdict of its first mistake, or None."""
    if ex.kind == "launch" and SIMULATED and not trial.launches:
        return _verdict(ex.id, "error", f"{name} launched no kernel [case {case.label}]: "
                        "it must compute grid and block and call kernel[grid, block](...)")
    try:
        found = _compare(ex, name, case, trial)
    except Exception as exc:  # noqa: BLE001  (results the judging cannot read)
        return _verdict(ex.id, "error", f"the grader could not judge case {case.label}: "
                        f"{type(exc).__name__}: {exc}")
    if found is not None and unseen.is_fresh(case):
        found.lines.insert(1, f"note: {unseen.FRESH_HINT}")
    return found


def _run_and_judge(ex, kernel, name: str, salt, k: int, inputs: CaseInputs):
    """Case ``k`` in this process: the run, the inventory around it, then its answer built
    and judged: ``(verdict or None, the trial as judged)``.  A function of its own so that no
    answer outlives it in a frame the next run could walk."""
    guard = tamper.Guard(extra=(("the step", ex),))
    trial, failed = run_outcome(ex, name, inputs, kernel)
    changed = guard.restore()
    if changed:
        return tampered(ex.id, f"{name} replaced {tamper.said(changed)} while it ran (put "
                        "back now)"), None
    if failed is not None:
        return failed, None
    built = unseen.cases(ex, salt)  # the answers, built after the learner's code ran
    case = built[k]
    unseen.scrub(built[:k] + built[k + 1:])
    try:
        trial = carried.sanitized(trial)
        problem = carried.trial_problem(ex, case, trial, 0 if SIMULATED else SLACK)
    except wire.WireError as exc:
        problem = f"its results are not plain arrays ({exc})"
    found = (tampered(ex.id, f"case {case.label}: {problem}") if problem is not None
             else judge_case(ex, name, case, trial))
    unseen.scrub([case])
    return found, trial


def grade(exercise, kernel, *, fresh: bool = True) -> Verdict:
    """Every step of the module docstring in this process, for one
    :class:`~.steps.base.Step` (``fresh=False``: the step's fixed cases only)."""
    ex = exercise
    taken = intake(ex, kernel)
    if isinstance(taken, Verdict):
        return taken
    fn, name, source = taken
    salt = unseen.new_salt() if fresh else None
    built = unseen.cases(ex, salt)
    labels = [c.label for c in built if not unseen.is_fresh(c)]
    runnable = [c.runnable() for c in built]
    unseen.scrub(built)
    del built
    trials = []
    for k, inputs in enumerate(runnable):
        found, trial = _run_and_judge(ex, kernel, name, salt, k, inputs)
        if found is not None:
            return found
        trials.append(trial)
    return finish(ex, kernel, name, source, labels, trials)


def finish(ex, kernel, name: str, source: str, labels: list, trials: list) -> Verdict:
    """Steps 5-6 once every case ran right (``trials``: their records, in order): the rules
    read from every case's records, then the census and its gates on what the last case ran,
    then PASS."""
    shapes = ", ".join(labels) + (", random positions" if "positions" in ex.arguments else "")
    passed = f"PASS {ex.id}: {name} matches the float64 reference on {shapes}"
    broken = judging.whole_check_problem(ex, trials)
    if broken is not None:
        return _verdict(ex.id, "not solved yet", f"the values are right, but {broken[0]}",
                        f"hint: {broken[1]}")
    outcome = census_gates.judge(ex, kernel, trials[-1] if trials else None)
    verdict = _verdict(ex.id, outcome.status, passed if outcome.first is None else outcome.first,
                       *outcome.lines)
    if outcome.status == "PASS":
        verdict.census = outcome.census
        verdict.timer = verdict_timer(ex, kernel)
    return verdict


def verdict_timer(ex, kernel):
    """The verdict's timer: ``timed(repeats)``, the text ``verdict.time()`` prints on a GPU
    (:func:`.learner_time.time_on_gpu`, made safe by :mod:`.timed`); it never raises, and a
    function that replaced the timer's clock or the grader's functions while timed is not
    timed (the originals are put back)."""
    def timed(repeats: int) -> str:
        from .learner_time import time_on_gpu

        guard = tamper.Guard(extra=(("the step", ex),))
        try:
            text = time_on_gpu(ex, kernel, repeats)
        except Exception as exc:  # noqa: BLE001  (a verdict's time() reports, it never raises)
            text = f"not timed: {type(exc).__name__}: {exc}"
        changed = guard.restore()
        if changed:
            return (f"not timed: your function replaced {tamper.said(changed)} while it was "
                    "timed (put back now); a time measured that way could not be trusted")
        return text
    return timed
