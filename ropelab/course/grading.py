"""Grading a learner's kernel: run it, compare it, explain the first mistake, count its cost.

Nothing here knows a particular step; :mod:`.steps` declares them.  The steps of
:func:`grade`, each of which can end with a verdict:

1. *not solved yet*: the kernel's source still has a blank (``...``) to fill in;
2. *error*: it is not a ``@cuda.jit`` kernel, takes other arguments than the launch contract,
   or fails to compile or run;
3. *out of bounds*: the simulator raised ``IndexError`` (on a GPU: it wrote into the slack
   after ``out``), reported with the thread that did it;
4. *wrong*: the first element, in memory order, farther from the float64 reference than the
   tolerance, as (token, pair) with expected and obtained values, and a hint that names the
   typical mistake whose output matches the learner's there;
5. *not solved yet*, again: the values are right but the PTX census misses the exercise's
   point (a float64 instruction, a second division, a load after a store ...);
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
from . import carried, kernel_census, tamper, unseen, wire
from .grade_types import Case, CaseInputs, Verdict, tampered, verdict_of  # noqa: F401
from .intake import (_parameters, blanks, empty_body, identify, intake,  # noqa: F401
                     numpy_calls, read_source)
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

@dataclass(frozen=True)
class Gate:
    """A census requirement: ``counter`` must satisfy ``op`` against ``limit`` (``<=``/``>=``)."""

    counter: str
    op: str
    limit: int
    message: str  # what is wrong, with {got} and {limit}; said after "the values are right, but"

    def holds(self, row: dict) -> bool:
        got = counter_value(row, self.counter)
        return got <= self.limit if self.op == "<=" else got >= self.limit


COUNTER_LABELS = {
    "instructions": "PTX instructions",
    "int_divrem": "integer div/rem",
    "signed_divrem": "signed integer div/rem (div.s, rem.s)",
    "f64": "float64 instructions",
    "sincos": "sin/cos (sin.approx, cos.approx)",
    "pow": "pow (one lg2.approx each)",
    "ld_global": "global loads by width (bits:count)",
    "st_global": "global stores by width (bits:count)",
    "ld_global_128": "128-bit global loads",
    "loads_after_store": "global loads after the first store",
    "shfl": "warp shuffles",
    "pow_in_loop": "pow inside a loop (ex2.approx)",
    "local_bytes": "local memory (bytes per thread)",
}


def counter_value(row: dict, name: str):
    """One census counter of a census row; width tables stay tables, the rest are ints."""
    if name == "pow":
        return row["sfu"].get("lg2", 0)
    if name == "signed_divrem":  # div.s64, rem.s32 ...: Python's // and % on signed ints
        ops = row.get("int_divrem_ops", {})
        return sum(n for op, n in ops.items() if op.split(".")[-1].startswith("s"))
    if name == "ld_global_128":
        return row["ld_global"].get("128", 0)
    return row[name]


def _fmt_counter(value) -> str:
    if isinstance(value, dict):
        by_width = sorted(value.items(), key=lambda kv: int(kv[0]))
        return " ".join(f"{k}:{v}" for k, v in by_width) or "-"
    return str(value)


# --------------------------------------------------------------------------------------------
# The verdict
# --------------------------------------------------------------------------------------------

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
    """Flat index of the first element outside the tolerance (NaN counts as wrong), or None."""
    err = np.abs(got.astype(np.float64) - case.expected.ravel())
    bad = ~(err <= case.tol)
    return int(np.argmax(bad)) if bad.any() else None


def _values(a: np.ndarray, idx: list) -> str:
    vals = [f"{float(a[i]):.6g}" for i in idx]
    return vals[0] if len(vals) == 1 else "(" + ", ".join(vals) + ")"


def diagnose(case: Case, got: np.ndarray, e: int, fallback: str, arguments=None) -> str:
    """The hint for the first wrong element: a typical mistake whose output matches there.

    Only the wrong floats of the element's unit (its pair) are compared with each mistake's
    output: a kernel may get one float of a pair right and the other wrong.
    """
    expected = case.expected.ravel()
    absent = [n for n in case.inputs if arguments is not None and n not in arguments]
    wrong = [i for i in case.unit(e) if not abs(float(got[i]) - expected[i]) <= case.tol]
    if all(unwritten(got[i:i + 1])[0] for i in wrong):
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
# Step 5-6: census
# --------------------------------------------------------------------------------------------

def census_lines(mine: dict, ref: dict | None, counters: tuple, ref_label: str) -> list[str]:
    """The learner's counts next to the reference kernel's, one counter a line."""
    width = max(len(COUNTER_LABELS[c]) for c in counters) + 2
    head = f"  {'PTX census (fast-math, cc 9.0)':<{width}} {'yours':>12}   {ref_label}"
    lines = [head]
    for c in counters:
        theirs = "?" if ref is None or ref.get("error") else _fmt_counter(counter_value(ref, c))
        lines.append(f"  {COUNTER_LABELS[c]:<{width}} {_fmt_counter(counter_value(mine, c)):>12}"
                     f"   {theirs}")
    return lines


# --------------------------------------------------------------------------------------------
# The whole check
# --------------------------------------------------------------------------------------------

def _run_error(ex, name: str, case: Case, exc: Exception) -> Verdict:
    """The verdict for an exception out of a run: out of bounds, a race, a refused launch,
    or an error shown with the useful lines of its message."""
    from ..sim.shared_race import SharedMemoryRace

    text = str(exc)
    if isinstance(exc, LaunchRejected):
        return _verdict(ex.id, "error", f"illegal launch [case {case.label}]: {text}")
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
    got = got[:size]
    e = first_wrong(case, got)
    if e is not None:
        idx = case.unit(e)
        shown = ["never written" if unwritten(got[i:i + 1])[0] else f"{float(got[i]):.6g}"
                 for i in idx]
        got_text = shown[0] if len(shown) == 1 else "(" + ", ".join(shown) + ")"
        return _verdict(ex.id, "wrong", f"{case.locate(e)} [case {case.label}]: expected "
                        f"{_values(case.expected.ravel(), idx)}, got {got_text} "
                        f"(tolerance {case.tol:.1e})",
                        f"hint: {diagnose(case, got, e, ex.hint, ex.arguments)}")
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


def run_outcome(ex, name: str, case: CaseInputs, kernel):
    """Run ``kernel`` on one case's inputs: ``(trial, None)``, or ``(None, verdict)`` when the
    run raised.  The one place the learner's code runs; it gets no answer to copy."""
    try:
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


def _run_and_judge(ex, kernel, name: str, salt, k: int, inputs: CaseInputs) -> Verdict | None:
    """Case ``k`` in this process: the run, the inventory around it, then its answer built
    and judged.  A function of its own so that no answer outlives it in a frame the next
    run could walk."""
    guard = tamper.Guard(extra=(("the step", ex),))
    trial, failed = run_outcome(ex, name, inputs, kernel)
    changed = guard.restore()
    if changed:
        return tampered(ex.id, f"{name} replaced {tamper.said(changed)} while it ran (put "
                        "back now)")
    if failed is not None:
        return failed
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
    return found


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
    for k, inputs in enumerate(runnable):
        found = _run_and_judge(ex, kernel, name, salt, k, inputs)
        if found is not None:
            return found
    return finish(ex, kernel, name, source, labels)


def finish(ex, kernel, name: str, source: str, labels: list) -> Verdict:
    """Steps 5-6 once every case ran right: the census and its gates, then PASS."""
    shapes = ", ".join(labels) + (", random positions" if "positions" in ex.arguments else "")
    passed = f"PASS {ex.id}: {name} matches the float64 reference on {shapes}"
    if ex.signature is None or ex.kind == "launch":
        verdict = _verdict(ex.id, "PASS", passed)
        verdict.timer = _timer(ex, kernel)
        return verdict
    try:
        mine, ref = kernel_census.census([(kernel_census.ship_kernel(kernel), ex.signature),
                                          (ex.reference_job(), ex.reference_signature)])
    except kernel_census.CensusError as exc:
        return _verdict(ex.id, "PASS", passed, f"census: not available ({exc}); the cost "
                        "requirements of this step are unchecked")
    except Exception as exc:  # noqa: BLE001  (shipping a kernel with odd globals)
        return _verdict(ex.id, "error", f"{name} is right on the simulator, but its census "
                        f"failed: {useful(f'{type(exc).__name__}: {exc}')}")
    if mine.get("error"):
        return _verdict(ex.id, "error", *_compile_error(name, mine["error"], source))
    for gate in ex.gates:
        if not gate.holds(mine):
            got_value = _fmt_counter(counter_value(mine, gate.counter))
            return _verdict(ex.id, "not solved yet", "the values are right, but "
                            + gate.message.format(got=got_value, limit=gate.limit),
                            *census_lines(mine, ref, ex.counters, ex.reference_label))
    verdict = _verdict(ex.id, "PASS", passed,
                       *census_lines(mine, ref, ex.counters, ex.reference_label))
    verdict.census = mine
    verdict.timer = _timer(ex, kernel)
    return verdict


def _compile_error(name: str, error: str, source: str) -> tuple:
    """The lines of a census compile failure.  Without a GPU the census compiles with no
    driver; a call that numba-cuda compiles as a driver-bound helper (NumPy allocations such
    as np.zeros are) fails there with "Error at driver init", which says nothing about the
    kernel: name the call instead."""
    if "Error at driver init" in error:
        calls = numpy_calls(source)
        what = ", ".join(calls) if calls else "a call"
        return (f"{name} is right on the simulator, but the census cannot compile it here: "
                f"numba-cuda compiles {what} inside a kernel as a helper that needs a CUDA "
                "driver, and this machine has none",
                "hint: for a small per-thread scratch array write cuda.local.array(n, float32) "
                "(a per-block one: cuda.shared.array), which compiles anywhere")
    return (f"{name} is right on the simulator but does not compile for a GPU:\n{error}",)


def _timer(ex, kernel):
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
