"""The notebooks' pre-ladder exercise ids, kept working on top of :mod:`.steps`.

Before the ladders each notebook 00-06 had one exercise, graded with::

    verdict = exercises.check(my_rope_flat, "01-flat-index")

That exercise is now the last step of its notebook's ladder (its ``alias``).  This module maps
the old ids onto those steps so stored notebooks keep grading; new cells call
``steps.check(fn, "01.2")``.
"""

from __future__ import annotations

from dataclasses import replace

from . import coach, steps
from .steps.base import NOTEBOOK_SOURCES, SOLUTIONS  # noqa: F401  (re-exported)

# The old id -> that step, under the old id (verdicts say "PASS 01-flat-index" as before).
EXERCISES = {s.alias: replace(s, id=s.alias) for s in steps.STEPS.values() if s.alias}


def get(exercise_id: str):
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"no exercise {exercise_id!r}; the exercises are "
                       f"{', '.join(EXERCISES)} (and the steps {', '.join(steps.STEPS)})") from None


def check(kernel, exercise_id: str, *, timeout_s: float = 30.0):
    """Grade ``kernel`` against exercise ``exercise_id``; print and return the verdict.

    An unknown id is a programming error and raises KeyError; a wrong kernel never raises.
    """
    verdict = get(exercise_id).check(kernel, timeout_s=timeout_s)
    return coach.after_check(steps.get(exercise_id).id, verdict)  # hints named, a pass kept


def listing() -> str:
    """Every step of every notebook (see :func:`.steps.listing`)."""
    return steps.listing()
