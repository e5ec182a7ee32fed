"""Grading a learner's function so that it can neither hang, crash, nor fool the caller.

:func:`grade_safely` is what :func:`.steps.check` calls.  On the simulator the learner's code
runs in a forked child (:mod:`.child`) and the judging stays in this process, the parent:

1. the parent checks its own arguments, then what it was handed (:func:`.grading.intake`: is it
   a kernel, has it blanks, its parameters); nothing of the learner's runs yet;
2. it forks, and only then builds the cases (:mod:`.unseen`: the step's own and one drawn for
   this check), so the child, a copy of the parent from before that moment, holds no answer
   anywhere: not in a frame, a global, the garbage collector's lists or a case object;
3. it sends the child one case's inputs at a time (:class:`~.grade_types.CaseInputs`); the
   child runs the learner's function and answers with data, never a verdict that could pass
   (:mod:`.carried`); the parent decodes it with a closed format (:mod:`.wire`, no pickle),
   checks its shape against its own case, and judges it (:func:`.grading.judge_case`);
4. when every case is right the parent takes the census and decides PASS
   (:func:`.grading.finish`).

The child inherits the notebook's kernel objects and globals as they are (nothing shipped or
re-imported, so a pass costs what it costs in-process).  A child that runs past ``timeout_s``
seconds (the simulator's threads ignore Jupyter's Interrupt), exits, is killed, writes junk or
floods the pipe ends the check with a verdict that says so; it is killed with its process
group, and the caller's process, its kernel object and its notebook state are untouched.

Without ``os.fork`` (Windows) or on a GPU (a CUDA context does not survive a fork), grading runs
in this process (:func:`.grading.grade`) and cannot be stopped; the verdict is the same
otherwise.
"""

from __future__ import annotations

import math
import numbers

from . import carried, unseen
from .child import Child, ChildEnded, can_fork, exit_text
from .grading import verdict_timer, finish, grade, intake, judge_case, run_outcome
from .grade_types import Verdict, tampered


def checked_timeout(timeout_s) -> float:
    """``timeout_s`` as a float, or a clear TypeError/ValueError: a real number of seconds,
    finite and above zero (a check without a limit could hang on the simulator)."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real):
        raise TypeError(f"timeout_s must be a number of seconds, not {timeout_s!r} "
                        f"({type(timeout_s).__name__})")
    value = float(timeout_s)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"timeout_s must be a finite number of seconds above 0, not "
                         f"{timeout_s!r}")
    return value


def checked_function(fn) -> None:
    """A TypeError unless ``fn`` can be called: the function (kernel or launch function) the
    learner wrote, not its name or its result."""
    if not callable(fn):
        raise TypeError(f"check() grades a function: the @cuda.jit kernel or the launch "
                        f"function you wrote, not a {type(fn).__name__} ({_short(fn)})")


def _short(value) -> str:
    try:
        text = repr(value) if type(value).__module__ == "builtins" else type(value).__qualname__
    except Exception:  # noqa: BLE001
        text = type(value).__qualname__
    return text if len(text) <= 40 else text[:37] + "..."


def stopped(step_id: str, timeout_s: float) -> Verdict:
    return Verdict(step_id, "stopped", [
        f"stopped after {timeout_s:g} s: does a loop never end? (the limit is check(..., "
        "timeout_s=...); the simulator runs about 13,000 simple threads a second)",
        "hint: a while loop whose condition never turns false, or a counter that is never "
        "stepped, keeps its thread running for ever"])


def ended(step, name: str, case, end: ChildEnded, timeout_s: float) -> Verdict:
    """The verdict for a child that gave no answer about ``case``."""
    if end.how == "stopped":
        return stopped(step.id, timeout_s)
    if end.how == "exited":
        return Verdict(step.id, "error", [
            f"error: the grading process ended before {name} handed back case {case.label} "
            f"({exit_text(end.status)})",
            "hint: a graded function must return; os._exit, os.kill of its own process, or "
            "closing the grader's pipe ends the grading, and the check with it"])
    what = {"junk": "sent bytes that are not a result",
            "flood": "sent more than the grader reads"}.get(end.how, end.how)
    return tampered(step.id, f"the grading process {what} [case {case.label}]: "
                            f"{end.detail}")


def _serve(step, kernel, name):
    """The child's side: run each case it is sent, answer with its trial (or the failure)."""
    def serve(receive, send):
        while True:
            message = receive()
            if not (type(message) is tuple and len(message) == 3 and message[0] == "case"):
                return
            _, k, inputs = message
            trial, failed = run_outcome(step, name, inputs, kernel)
            if failed is None:
                send(("ran", k, carried.portable(trial)))
            else:
                send(("failed", k, failed.status, [str(line) for line in failed.lines]))
    return serve


def graded_in_child(step, kernel, name: str, source: str, timeout_s: float) -> Verdict:
    """Steps 2-4 of the module docstring; OSError when no child can be forked."""
    with Child(_serve(step, kernel, name), timeout_s=timeout_s,
               limit=carried.MESSAGE_LIMIT) as child:
        cases = unseen.cases(step, unseen.new_salt())  # built after the fork: see step 2
        trials = []
        for k, case in enumerate(cases):
            try:
                child.send(("case", k, case.runnable()))
                answer = child.receive()
            except ChildEnded as end:
                return ended(step, name, case, end, timeout_s)
            trial, verdict = reply(step, case, k, answer)
            if verdict is None:
                verdict = judge_case(step, name, case, trial)
            if verdict is not None:
                return verdict
            trials.append(trial)
    return finish(step, kernel, name, source, [c.label for c in cases if not unseen.is_fresh(c)],
                  trials)


def reply(step, case, k: int, message, slack: int = 0):
    """``(trial, None)`` or ``(None, verdict)`` from the child's answer about case ``k``."""
    tag = message[0] if type(message) is tuple and message and type(message[0]) is str \
        else None
    if tag in ("ran", "failed") and not (len(message) > 1 and type(message[1]) is int
                                         and message[1] == k):
        tag = None  # an answer about another case than the one asked
    if tag == "ran" and len(message) == 3:
        trial = message[2]
        problem = carried.trial_problem(step, case, trial, slack)
        if problem is None:
            return trial, None
        return None, tampered(step.id, f"its results did not fit case {case.label}: {problem}")
    if tag == "failed" and len(message) == 4:
        status, lines = message[2], message[3]
        if _worded_failure(status, lines):
            return None, Verdict(step.id, status, [x[:carried.LINE_CHARS] for x in lines])
        return None, tampered(step.id, "the grading process sent a verdict; it may send only "
                              "results, which the grader judges itself")
    if tag == "crashed" and len(message) == 2 and type(message[1]) is str:
        return None, Verdict(step.id, "error", [
            f"error: grading stopped with {message[1][:carried.LINE_CHARS]} [case {case.label}]"])
    return None, tampered(step.id, f"the grading process answered case {case.label} with "
                          "something that is not an answer")


def _worded_failure(status, lines) -> bool:
    """A failure as the child words one (:func:`.grading.verdict_of`): a status that is not
    PASS, lines that start with it, none that reads as a pass."""
    return (type(status) is str and 0 < len(status) <= carried.STATUS_CHARS
            and status.strip().upper() != "PASS" and type(lines) is list
            and 0 < len(lines) <= carried.LINES and all(type(x) is str for x in lines)
            and lines[0].startswith(status)
            and not any(x.lstrip().upper().startswith("PASS") for x in lines))


def _in_process(step, fn) -> Verdict:
    try:
        return grade(step, fn)
    except Exception as exc:  # noqa: BLE001  (a verdict, never an exception)
        return Verdict(step.id, "error", [f"error: the grader could not grade {fn!r}: "
                                          f"{type(exc).__name__}: {exc}"])


def grade_safely(step, fn, *, timeout_s: float = 30.0) -> Verdict:
    """:func:`.grading.grade` of ``fn`` against ``step``, with the learner's code in a child
    on the simulator (see the module docstring).  Raises TypeError/ValueError, before
    anything runs, for arguments that are not a function and a time limit; whatever the
    function does, it gets a verdict, never an exception, and never hangs on the simulator."""
    checked_function(fn)
    timeout_s = checked_timeout(timeout_s)
    if not can_fork():
        verdict = _in_process(step, fn)
    else:
        taken = intake(step, fn)
        if isinstance(taken, Verdict):
            verdict = taken
        else:
            _, name, source = taken
            try:
                verdict = graded_in_child(step, fn, name, source, timeout_s)
            except OSError as exc:  # no fork possible (resources): grade here, unstoppable
                verdict = _in_process(step, fn)
                verdict.lines.append(f"(graded in this process: {exc})")
            except Exception as exc:  # noqa: BLE001  (the grader's own failure: a verdict)
                verdict = Verdict(step.id, "error", [f"error: the grader could not grade "
                                                     f"{name}: {type(exc).__name__}: {exc}"])
    if verdict.passed and verdict.timer is None:
        verdict.timer = verdict_timer(step, fn)
    verdict.subject = (step, fn)
    verdict.timeout_s = timeout_s
    return verdict
