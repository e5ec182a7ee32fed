"""pytest settings for the notebooks: nbval compares stored outputs after these sanitize rules,
and every notebook cell has a time limit.

``--nbval`` itself is switched on in pyproject.toml; here the sanitize file is given by its
absolute path, so ``python -m pytest`` works from any directory.  This file sits at the
repository root (not in notebooks/) so that notebooks/ shows the lessons and solutions only;
the notebook machinery is in scripts/notebooks/ (see its README.md).

Time limits (a learner on a 2-core machine must not wait in silence): no cell over
``ROPELAB_CELL_LIMIT_S`` seconds (30), and notebook 00 from its kernel's start to its last cell
in ``ROPELAB_NOTEBOOK00_LIMIT_S`` (60); a limit of 0 switches it off.  The time is the notebook
kernel's CPU time (its own and its finished children's: a census child, a grader's fork) where
Linux's /proc shows it: what the cell costs on a machine of its own.  The wall time on this
shared machine swings with everyone else's load (a 5-second import took 68 s at a load average
of 38), and a learner does not share their machine with eight agents.  Elsewhere it is the
wall time.  A census that compiles during the suite shows its progress on the terminal, past
pytest's output capture.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

# The notebooks' kernels inherit this environment: no target line on stderr.
os.environ.setdefault("ROPELAB_QUIET", "1")
# A learner's progress (steps.check records every pass) goes to a folder of this run, never to
# the real home: set here, before any notebook kernel starts, so the kernels inherit it too.
_PROGRESS = tempfile.TemporaryDirectory(prefix="ropelab-progress-")
os.environ["ROPELAB_PROGRESS"] = _PROGRESS.name

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


def kernel_cpu_s(item) -> float | None:
    """CPU seconds the notebook kernel of ``item`` has used since it started (with its finished
    children), or None where that cannot be read (no /proc, no local kernel)."""
    try:
        pid = item.parent.kernel.km.provisioner.pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime..cstime
    except (AttributeError, OSError, ValueError, IndexError):
        return None


def _limit_failure(item, spent, wall, limit, what):
    return (f"{what} took {spent:.1f} s, over its limit of {limit:g} s ({item.nodeid}; "
            f"{wall:.1f} s of wall time); a learner waits that long on a 2-core machine")


def pytest_runtest_setup(item):
    name = _notebook(item)
    if name is not None:
        _started.setdefault(name, time.monotonic())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = kernel_cpu_s(item) if _notebook(item) else None
    yield
    after = kernel_cpu_s(item) if before is not None else None
    item.ropelab_cpu_s = (after - before, after) if after is not None else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    name = _notebook(item)
    if name is None or call.when != "call":
        return
    report = outcome.get_result()
    if not report.passed:
        return
    cpu = getattr(item, "ropelab_cpu_s", None)  # (this cell, the kernel since its start)
    spent = cpu[0] if cpu else call.duration
    whole = WHOLE_LIMITS_S.get(name, 0)
    if CELL_LIMIT_S and spent > CELL_LIMIT_S:
        report.outcome = "failed"
        report.longrepr = _limit_failure(item, spent, call.duration, CELL_LIMIT_S, "this cell")
    elif whole and _last_cell.get(name) == item.nodeid and name in _started:
        wall = time.monotonic() - _started[name]
        spent = cpu[1] if cpu else wall
        if spent > whole:
            report.outcome = "failed"
            report.longrepr = _limit_failure(item, spent, wall, whole,
                                             f"{name}, kernel start to last cell,")
