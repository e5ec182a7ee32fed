"""The registry of graded steps: every notebook's ladder, in order.

A notebook grades a learner's function with::

    from ropelab.grader import steps
    verdict = steps.check(my_kernel, "01.2")

Step ids are ``"NN.k"``: notebook NN, k-th step of its ladder; the on-ramp before notebook 00
has ``"ramp.k"``.  Each ladder lives in its own module (:mod:`.onramp`, :mod:`.nb00` ...
:mod:`.nb10`, a list ``STEPS``); :mod:`.base` holds the record.

The ladders are data: each step is one ``Step(...)`` of keyword fields (its task, contract,
launch text, cases, gates).  Two steps of the same kind fill the same fields, so their
specs look alike line by line (``duplicates`` pairs them by shape) while no two say the
same thing; what they share as behaviour lives in :mod:`.base` and the grader.
"""

from __future__ import annotations

from .. import coach
from . import nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb08, nb10, onramp
from ..grading import COUNTER_LABELS
from .base import Case, Forbid, Gate, Step

__all__ = ["STEPS", "Case", "Forbid", "Gate", "Step", "UnknownStep", "check", "checked",
           "for_notebook", "get", "hint", "listing", "notebooks", "progress", "reset_progress"]

_LADDERS = (onramp, nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb08, nb10)

STEPS: dict = {}
for _module in _LADDERS:
    for _step in _module.STEPS:
        if _step.id in STEPS:
            raise ValueError(f"two steps with id {_step.id!r}")
        STEPS[_step.id] = _step


class UnknownStep(KeyError, ValueError):
    """A step id that names no step (a KeyError, as a dict lookup's, and a ValueError: a bad
    argument value)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def get(step_id: str) -> Step:
    """The step ``step_id`` ("01.2"), or the step a pre-ladder exercise id names."""
    if not isinstance(step_id, str):
        raise TypeError(f"a step id is a string such as '01.2', not {step_id!r} "
                        f"({type(step_id).__name__})")
    if step_id in STEPS:
        return STEPS[step_id]
    for step in STEPS.values():
        if step.alias and step.alias == step_id:
            return step
    raise UnknownStep(f"no step {step_id!r}; the steps are {', '.join(STEPS)}")


def for_notebook(number: str) -> list:
    """The ladder of notebook ``number`` ("01"), in order."""
    return [s for s in STEPS.values() if s.number == number]


def notebooks() -> list:
    """The notebook numbers that have steps ("ramp", "00", ...), in course order: the order of
    their notebooks' file names (00_on_ramp before 00_rope_in_one_notebook)."""
    stems = {s.number: s.notebook for s in STEPS.values()}
    return sorted(stems, key=stems.get)


def check(fn, step_id: str, *, timeout_s: float = 30.0, quiet: bool = False):
    """Grade ``fn`` against step ``step_id``; print the verdict and return it (``quiet=True``:
    return it only, for a script that grades many kernels).

    Bad arguments raise before anything runs: a step id that is not a string (TypeError) or
    names no step (:class:`UnknownStep`, a KeyError and a ValueError), an ``fn`` that cannot be
    called, a ``timeout_s`` that is not a finite number of seconds above 0 (TypeError or
    ValueError).  Whatever a callable ``fn`` does, it never raises: a wrong, runaway or
    cheating answer gets a verdict (a run longer than ``timeout_s`` seconds is stopped).  A
    failing verdict ends with a line saying that :func:`hint` exists; a pass is recorded in
    this learner's :func:`progress` (:mod:`..coach`).
    """
    from ..runner import checked_function, checked_timeout  # late: the runner imports the grader

    step = get(step_id)
    checked_function(fn)
    checked_timeout(timeout_s)
    if not isinstance(quiet, bool):
        raise TypeError(f"quiet must be True or False, got {quiet!r}")
    return coach.after_check(step.id, step.check(fn, timeout_s=timeout_s, quiet=quiet),
                             quiet=quiet)


# --- hints and progress: the learner's side of a step (:mod:`..coach`) ----------------------

def hint(step_id: str, level: int | None = None):
    """Hint ``level`` of step ``step_id`` (1 a direction, 2 the structure, 3 the key line);
    without a level, the next one this learner has not seen.  An unknown id raises KeyError."""
    return coach.hint(get(step_id), level)


def progress():
    """The steps this learner has passed, per notebook (kept on this machine: see
    :mod:`..progress`)."""
    return coach.report({number: for_notebook(number) for number in notebooks()})


def reset_progress() -> None:
    """Forget this learner's passes and hint levels, and say so (``python -m ropelab progress
    --reset``)."""
    print(coach.reset())


def checked(step: Step) -> list[str]:
    """The rules the grader holds ``step`` to beyond its values, in words (what ``listing``
    prints under "checked")."""
    rules = []
    if step.ownership:
        rules.append(f"each thread's writes: {step.ownership}")
    if step.reads_own:
        rules.append(f"each thread's reads of {', '.join(step.reads_own)}: its own elements "
                     "only (the others' reach it through the shuffles)")
    if step.shared_copy:
        rules.append(f"each block reads {', '.join(step.shared_copy)} once, its threads "
                     "sharing the copy; every later read is of the shared table")
    rules.append("no race: a thread reads what another stored (in shared memory or out) only "
                 "after a barrier both pass, never across blocks in one launch")
    rules += [rule.rule for rule in step.launch_rules]
    if step.launches_signature:
        rules.append(f"the launched kernel's argument types: {step.launches_signature}")
    forbid = step.forbid if step.kind == "kernel" else step.launched_forbid
    rules += [f"no `{f.what}` in the kernel" for f in forbid]
    rules += [f"census: {COUNTER_LABELS[g.counter]} {g.op} {g.limit}" for g in step.gates]
    if step.shared:
        rules.append("shared memory: used (some thread reads an element another thread of "
                     "its block wrote)")
    if step.kind == "launch":
        rules.append("the work is the kernel's (yours, not one of ropelab's): the launch "
                     "function reads no input and writes no out on the host, and no launch has "
                     "a block that writes nothing")
    return rules


def listing() -> str:
    """Every notebook's steps: id, kind, title, the function to write and its contract."""
    lines = []
    for number in notebooks():
        ladder = for_notebook(number)
        lines.append(f"notebook {number}: notebooks/{ladder[0].notebook}.ipynb, "
                     f"{len(ladder)} step{'s' if len(ladder) > 1 else ''}")
        for s in ladder:
            lines += [f"  {s.id:<6} [{s.kind}] {s.title}",
                      f"         write:    {s.kernel_name}({', '.join(s.arguments)})",
                      f"         contract: {s.contract}",
                      f"         launch:   {s.launch_text}"]
            lines += [f"         checked:  {rule}" for rule in checked(s)]
    return "\n".join(lines)
