"""A learner's progress through the ladders, kept on the learner's machine.

One small JSON file, ``progress.json``::

    {"format": 1, "passed": {"04.2": "2026-12-03T10:15:00Z"}, "hints": {"04.2": 2}}

``passed`` maps a step id to when :func:`.steps.check` first returned PASS for it; ``hints``
maps a step id to the highest hint level the learner has seen (so the next
``steps.hint("04.2")`` gives the level after it).  Nothing else writes here: ``--verify`` and
the grader's own calls (:func:`.runner.grade_safely`) record nothing.

Where it lives: the folder ``$ROPELAB_PROGRESS`` when set, else ropelab's user cache folder
(``$ROPELAB_CACHE``, else ``$XDG_CACHE_HOME/ropelab``, else ``~/.cache/ropelab``: the census
cache's convention, :func:`ropelab.measure.census.engine.user_cache_dir`).  Never inside the
repository or the installed package: such a folder is refused.  The test suite and the notebook
build point ``ROPELAB_PROGRESS`` at a temporary folder; under pytest without it, nothing is
written at all.

The file is written atomically (a temporary file in the same folder, then ``os.replace``), so
a crash never leaves half a file.  A file that cannot be read as progress is moved aside to
``progress.json.corrupt`` (nothing lost), said in one line, and progress starts over; a folder
that cannot be written is said in one line, once.  No call here raises into a notebook.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from .. import resources
from ..measure.census.engine import user_cache_dir

ENV = "ROPELAB_PROGRESS"
FILE = "progress.json"
FORMAT = 1

_said: set = set()  # the notices already given in this process (one line each, once)


class ProgressError(RuntimeError):
    """The progress folder is one ropelab must not write into."""


def notice(text: str) -> None:
    if text not in _said:
        _said.add(text)
        print(f"ropelab progress: {text}", file=sys.stderr)


def folder() -> Path | None:
    """The progress folder, or None when nothing may be recorded (under pytest without
    ``$ROPELAB_PROGRESS``: a test must never write to the real home)."""
    chosen = os.environ.get(ENV)
    if chosen:
        return Path(chosen).expanduser()
    if "PYTEST_CURRENT_TEST" in os.environ:
        return None
    return user_cache_dir()


def path() -> Path | None:
    """The progress file (it may not exist yet), or None (see :func:`folder`)."""
    where = folder()
    return None if where is None else where / FILE


def _refuse_inside_ropelab(where: Path) -> None:
    """Raise :class:`ProgressError` when ``where`` is inside the package or the checkout."""
    here = where.resolve()
    package = Path(__file__).resolve().parents[1]
    roots = [package]
    if resources.in_checkout():
        roots.append(resources.root().resolve())
    for root in roots:
        if here == root or root in here.parents:
            raise ProgressError(f"{where} is inside {root}; progress belongs to the learner, "
                                f"not to ropelab: set {ENV} to a folder of your own")


def empty() -> dict:
    return {"format": FORMAT, "passed": {}, "hints": {}}


def _valid(data) -> bool:
    return (isinstance(data, dict) and data.get("format") == FORMAT
            and isinstance(data.get("passed"), dict) and isinstance(data.get("hints"), dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in data["passed"].items())
            and all(isinstance(k, str) and type(v) is int for k, v in data["hints"].items()))


def load() -> dict:
    """The stored progress; an empty record when there is none, or when the file is corrupt
    (moved aside, with one line saying so)."""
    file = path()
    if file is None or not file.is_file():
        return empty()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        why = None if _valid(data) else "not a ropelab progress record"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        data, why = None, f"{type(exc).__name__}: {exc}"
    if why is None:
        return data
    aside = file.with_name(FILE + ".corrupt")
    try:
        os.replace(file, aside)
        kept = f"moved to {aside}"
    except OSError as exc:
        kept = f"left in place ({exc})"
    notice(f"{file} could not be read ({why}); it was {kept}, and progress starts over")
    return empty()


def save(data: dict) -> bool:
    """Write ``data`` atomically; False (said once) when the folder cannot be written."""
    where = folder()
    if where is None:
        return False
    try:
        _refuse_inside_ropelab(where)
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".progress-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, where / FILE)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, ProgressError) as exc:
        notice(f"not saved ({exc})")
        return False
    return True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def record_pass(step_id: str) -> None:
    """Note that ``step_id`` passed (its first pass is kept)."""
    data = load()
    if step_id not in data["passed"]:
        data["passed"][step_id] = _now()
        save(data)


def passed() -> dict:
    """Step id -> when it first passed."""
    return dict(load()["passed"])


def hint_seen(step_id: str) -> int:
    """The highest hint level shown for ``step_id`` (0: none)."""
    return load()["hints"].get(step_id, 0)


def record_hint(step_id: str, level: int) -> None:
    data = load()
    if level > data["hints"].get(step_id, 0):
        data["hints"][step_id] = level
        save(data)


def reset() -> Path | None:
    """Forget everything; the file that was removed, or None when there was none."""
    file = path()
    if file is None or not file.is_file():
        return None
    try:
        file.unlink()
    except OSError as exc:
        notice(f"could not reset ({exc})")
        return None
    return file
