"""Progressive hints for every graded step: ``steps.hint("04.2")``.

Each step has three levels: 1 a direction (what to think about), 2 the structure (the body in
outline, the crux left out), 3 the key line (the one or two lines that are the step's point,
as code, never the whole body).  The texts are written from each step's contract and its
notebook's teaching, one module per ladder; :mod:`..coach` shows them and keeps the level a
learner has reached.
"""

from __future__ import annotations

from . import nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb08, nb10, ramp

LEVELS = 3
LEVEL_NAMES = ("a direction", "the structure", "the key line")

HINTS: dict = {}
for _module in (ramp, nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb08, nb10):
    for _id, _levels in _module.HINTS.items():
        if _id in HINTS:
            raise ValueError(f"two hint entries for step {_id!r}")
        HINTS[_id] = _levels


def levels(step_id: str) -> tuple:
    """The three hint texts of ``step_id`` (a registered step's id: :func:`.steps.get`
    resolves aliases and refuses unknown ids first)."""
    try:
        return HINTS[step_id]
    except KeyError:
        raise KeyError(f"step {step_id!r} has no hints; ropelab/grader/hints/ holds those of "
                       f"{', '.join(HINTS)}") from None
