"""pytest settings for the notebooks: nbval compares stored outputs after these sanitize rules,
and every notebook cell has a time limit.

``--nbval`` itself is switched on in pyproject.toml; here the sanitize file is given by its
absolute path, so ``python -m pytest`` works from any directory.  This file sits at the
repository root (not in notebooks/) so that notebooks/ shows the lessons and solutions only;
the notebook machinery is in scripts/notebooks/ (see its README.md).

Time limits (a learner on a 2-core machine must not wait in silence): no cell over
``ROPELAB_CELL_LIMIT_S`` seconds (30), and notebook 00 from its kernel's start to its last cell
in ``ROPELAB_NOTEBOOK00_LIMIT_S`` (60); a limit of 0 switches it off.  A census that compiles
during the suite shows its progress on the terminal, past pytest's output capture.
"""

import os
import sys
import time
from pathlib import Path

import pytest

# The notebooks' kernels inherit this environment: no target line on stderr.
os.environ.setdefault("ROPELAB_QUIET", "1")

CELL_LIMIT_S = float(os.environ.get("ROPELAB_CELL_LIMIT_S", "30"))
WHOLE_LIMITS_S = {"00_rope_in_one_notebook.ipynb":
                  float(os.environ.get("ROPELAB_NOTEBOOK00_LIMIT_S", "60"))}
_started: dict[str, float] = {}  # notebook file -> when its first cell's setup began
_last_cell: dict[str, str] = {}  # notebook file -> the nodeid of its last cell


def _notebook(item) -> str | None:
    path = Path(str(item.fspath))
    return path.name if path.suffix == ".ipynb" else None


def pytest_collection_modifyitems(config, items):
    """Notebook 09 needs the ``models`` extra (transformers): without it, its cells are skipped
    with the reason instead of failing on an ImportError."""
    for item in items:
        name = _notebook(item)
        if name is not None:
            _last_cell[name] = item.nodeid
    from ropelab.models import missing

    reason = missing()
    if reason is None:
        return
    for item in items:
        name = _notebook(item)
        if name is not None and name.startswith("09_"):
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_configure(config):
    option = config.option
    if getattr(option, "nbval_sanitize_with", "missing") is None:
        option.nbval_sanitize_with = str(Path(__file__).resolve().parent / "scripts" / "notebooks" / "nbval_sanitize.cfg")


class _PastCapture:
    """A text stream to the terminal that pytest's capture does not swallow (under xdist too:
    a worker's stderr is the terminal's)."""

    encoding = "utf-8"

    def __init__(self, capman):
        self._capman = capman

    def write(self, text: str) -> int:
        with self._capman.global_and_fixture_disabled():
            sys.stderr.write(text)
            sys.stderr.flush()
        return len(text)

    def flush(self) -> None:
        pass


def pytest_collection_finish(session):
    # A census that compiles in a test (no committed cache for this install) says so as it goes
    # instead of minutes of silence.  ropelab is imported by then (tests/conftest.py); a run of
    # notebooks alone compiles in the notebook kernels, whose output nbval reads.
    capman = session.config.pluginmanager.getplugin("capturemanager")
    if "ropelab" in sys.modules and capman is not None:
        from ropelab.measure.census import engine

        engine.PROGRESS_STREAM = _PastCapture(capman)


def _limit_failure(item, elapsed, limit, what):
    return (f"{what} took {elapsed:.1f} s, over its limit of {limit:g} s "
            f"({item.nodeid}); a learner waits that long on a 2-core machine")


def pytest_runtest_setup(item):
    name = _notebook(item)
    if name is not None:
        _started.setdefault(name, time.monotonic())



@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    name = _notebook(item)
    if name is None or call.when != "call":
        return
    report = outcome.get_result()
    if not report.passed:
        return
    whole = WHOLE_LIMITS_S.get(name, 0)
    if CELL_LIMIT_S and call.duration > CELL_LIMIT_S:
        report.outcome = "failed"
        report.longrepr = _limit_failure(item, call.duration, CELL_LIMIT_S, "this cell")
    elif whole and _last_cell.get(name) == item.nodeid and name in _started:
        elapsed = time.monotonic() - _started[name]
        if elapsed > whole:
            report.outcome = "failed"
            report.longrepr = _limit_failure(item, elapsed, whole,
                                             f"{name}, kernel start to last cell,")
