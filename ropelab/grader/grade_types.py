"""The grader's records: a test case, what the learner's code may see of it, and the verdict.

:class:`Case` holds the answer (``expected``) and the typical mistakes; it lives only where
the learner's code does not run (the grading parent), or, when grading runs in one process,
only after that code has finished.  The learner's function is handed a :class:`CaseInputs`:
the case's inputs and launch, copied, and nothing it could copy an answer from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import wire


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
    # chooses their grid.  Part of the contract, not of the answer: it crosses to the child.
    owner: np.ndarray | None = None

    @property
    def out_size(self) -> int:
        """Floats of ``out`` (the size of the expected output)."""
        return int(self.expected.size)

    def runnable(self, label: str | None = None) -> CaseInputs:
        """What the learner's function is run with: copies of the inputs, the launch, the size
        of ``out``; nothing derived from the answer."""
        inputs = {k: v.copy() if isinstance(v, (np.ndarray, np.generic)) else v
                  for k, v in self.inputs.items()}
        owner = None if self.owner is None else np.array(self.owner, dtype=np.int64)
        return CaseInputs(label or self.label, inputs, tuple(self.grid), tuple(self.block),
                          self.out_size, int(self.bytes_moved), owner)


@dataclass
class CaseInputs:
    """One case as the learner's code gets it (see the module docstring); it has what
    :func:`.trial.run` reads of a case and no ``expected``."""

    label: str
    inputs: dict
    grid: tuple
    block: tuple
    out_size: int
    bytes_moved: int = 0
    owner: np.ndarray | None = None  # as Case.owner


wire.register(CaseInputs)  # the parent sends these to the grading child


@dataclass
class Verdict:
    """What :func:`.grading.grade` found; ``str(verdict)`` is the text the notebook shows."""

    exercise: str
    # "PASS", "not solved yet", "wrong", "out of bounds", "race", "barrier divergence", "error",
    # "stopped"
    status: str
    lines: list
    timer: Callable[[int], str] | None = None  # set on PASS: times the kernel on a GPU
    census: dict | None = None  # the learner's PTX census row, when one was taken
    subject: tuple | None = None  # (step, function) graded; set by the runner, for show()
    timeout_s: float = 30.0  # the check's time limit; show() records under the same one

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def __str__(self) -> str:
        return "\n".join(str(line) for line in self.lines)

    def __repr__(self) -> str:
        return f"<Verdict {self.exercise}: {self.status}>"

    def time(self, repeats: int = 20) -> None:
        """Time the passing kernel on a GPU beside ropelab's and a device copy of the same
        bytes; with no GPU, print a predicted H200 time if a prediction model is installed,
        else say that nothing was timed.  Notebooks call this in a cell whose output nbval
        ignores.  Prints why when it cannot time; never raises on a verdict.  See
        :mod:`.learner_time`."""
        if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) \
                or repeats < 1:
            raise ValueError(f"repeats must be a whole number >= 1, not {repeats!r}")
        try:
            from .learner_time import report
            text = report(self, int(repeats))
        except Exception as exc:  # noqa: BLE001  (a verdict's time() says, it never raises)
            text = f"nothing timed: timing failed ({type(exc).__name__}: {exc})"
        print(text)

    def show(self):
        """Draw the graded kernel on a small shape: who read and wrote which element, accesses
        per thread, and its output beside the reference with wrong cells marked (passing and
        failing kernels alike).  Returns the matplotlib figure, or None with a sentence saying
        why there is nothing to draw; never raises on a verdict.  See :mod:`.show`."""
        try:
            from .show import show_verdict
            return show_verdict(self, self.timeout_s)
        except Exception as exc:  # noqa: BLE001
            print(f"nothing to show: drawing failed ({type(exc).__name__}: {exc})")
            return None


def verdict_of(exercise: str, status: str, first: str, *more: str) -> Verdict:
    """A verdict whose first line is ``first`` after its status ("wrong: ..."); empty extra
    lines are dropped."""
    head = (first if status == "PASS" else f"{status} {first}" if first.startswith("at thread")
            else f"{status}: {first}")
    return Verdict(exercise, status, [head, *[m for m in more if m]])


def tampered(step_id: str, what: str) -> Verdict:
    return Verdict(step_id, "error", [
        f"error: the grader could not trust this run: {what}",
        "hint: a graded function gets its arguments and writes out; anything else it does to "
        "the grader (its pipe, its process, its objects) ends the grading"])
