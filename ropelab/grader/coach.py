"""What :mod:`.steps` says around a verdict: hints on request, and the learner's progress.

* :func:`after_check`: a failing verdict gets one more line saying that hints exist; a pass
  is recorded in the learner's progress (:mod:`.progress`).  :func:`.steps.check` calls it,
  and only it: ``--verify`` and the tests grade through :func:`.runner.grade_safely`, which
  records nothing.
* :func:`hint`: level 1 a direction, level 2 the structure, level 3 the key line
  (:mod:`.hints`); without a level, the level after the highest this learner has seen.
* :func:`report`: passed / total per notebook, with the ids.

Nothing here imports :mod:`.steps` (which calls in): the steps are handed over.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from . import hints as texts
from . import progress as store

NAMES = dict(zip(range(1, texts.LEVELS + 1), texts.LEVEL_NAMES))


def stuck_line(step_id: str) -> str:
    """The line a failing verdict ends with."""
    return (f'stuck? steps.hint("{step_id}") gives a hint ({texts.LEVELS} levels: '
            f"{', '.join(texts.LEVEL_NAMES)})")


def after_check(step_id: str, verdict, quiet: bool = False):
    """Print the stuck line under a failing verdict (unless ``quiet``) and add it to the
    verdict's lines, or record a pass; return the verdict.  Never raises: a notebook must not
    stop here."""
    if verdict.passed:
        try:
            store.record_pass(step_id)
        except Exception as exc:  # noqa: BLE001  (progress is a convenience, never a failure)
            store.notice(f"not recorded ({type(exc).__name__}: {exc})")
        return verdict
    line = stuck_line(step_id)
    if not quiet:
        print(line)
    verdict.lines.append(line)
    return verdict


@dataclass(frozen=True)
class Hint:
    """One hint; Jupyter and the REPL show its text (``str`` and ``repr`` alike)."""

    step_id: str
    level: int
    text: str

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


def hint(step, level: int | None = None) -> Hint:
    """Hint ``level`` (1-3) of ``step``, or the next one this learner has not seen."""
    levels = texts.levels(step.id)
    seen = _quiet(store.hint_seen, step.id, default=0)
    if level is None:
        level = min(seen + 1, texts.LEVELS)
    elif isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= texts.LEVELS:
        raise ValueError(f"hint level {level!r}: the levels of step {step.id} are 1 "
                         f"({NAMES[1]}), 2 ({NAMES[2]}) and 3 ({NAMES[3]})")
    _quiet(store.record_hint, step.id, level)
    text = levels[level - 1]
    # Levels 1 and 2 are prose, wrapped here; level 3 is code, shown line for line.
    rows = text.splitlines() if level == texts.LEVELS else textwrap.wrap(text, 88)
    lines = [f"hint {level} of {texts.LEVELS} for step {step.id} ({step.title}): "
             f"{NAMES[level]}", *("  " + row for row in rows)]
    if level < texts.LEVELS:
        lines.append(f'more: steps.hint("{step.id}") gives level {level + 1}, '
                     f"{NAMES[level + 1]}")
    else:
        lines.append(f"that is the last level; the whole answer is in "
                     f"notebooks/solutions/{step.notebook}.py")
    return Hint(step.id, level, "\n".join(lines))


def _quiet(fn, *args, default=None):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001  (a hint is shown even when progress fails)
        store.notice(f"hint level not kept ({type(exc).__name__}: {exc})")
        return default


@dataclass(frozen=True)
class Report:
    """Passed steps per notebook; its text is what ``steps.progress()`` shows."""

    rows: tuple  # (notebook number, notebook stem, passed ids, total) in course order
    hints: dict  # step id -> highest level seen
    where: str

    @property
    def passed(self) -> list:
        return [i for _, _, ids, _ in self.rows for i in ids]

    def __str__(self) -> str:
        total = sum(n for *_, n in self.rows)
        lines = [f"passed {len(self.passed)} of {total} steps (kept in {self.where})"]
        for number, stem, ids, n in self.rows:
            lines.append(f"  {number:<5} {stem:<26} {len(ids):>2} / {n:<2}  "
                         f"{' '.join(ids) or '-'}")
        if self.hints:
            seen = ", ".join(f"{k} ({v} of {texts.LEVELS})" for k, v in self.hints.items())
            lines.append(f"hints seen: {seen}")
        lines.append("reset: python -m ropelab progress --reset (or steps.reset_progress())")
        return "\n".join(lines)

    __repr__ = __str__


def report(ladders: dict) -> Report:
    """``ladders``: notebook number -> its steps, in course order."""
    data = store.load()
    file = store.path()
    rows, known = [], set()
    for number, ladder in ladders.items():
        ids = [s.id for s in ladder if s.id in data["passed"]]
        known |= {s.id for s in ladder}
        rows.append((number, ladder[0].notebook, ids, len(ladder)))
    hints_seen = {k: v for k, v in data["hints"].items() if k in known}
    where = str(file) if file is not None else "nowhere: under pytest without $" + store.ENV
    return Report(tuple(rows), hints_seen, where)


def reset() -> str:
    """Forget this learner's progress and hint levels; say what was removed."""
    removed = store.reset()
    return f"progress reset: removed {removed}" if removed else "progress reset: nothing was kept"
