"""The notebooks' time limits (conftest.py at the repository root): a cell over its limit fails,
and notebook 00 fails when its kernel start to last cell takes over its limit.

The hooks are driven with stand-ins for nbval's items and pytest's call info, so nothing runs a
notebook here; CI runs the real ones under these hooks."""

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def hooks(monkeypatch):
    spec = importlib.util.spec_from_file_location("root_conftest_under_test", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "CELL_LIMIT_S", 30.0)
    monkeypatch.setattr(module, "WHOLE_LIMITS_S", {"00_rope_in_one_notebook.ipynb": 60.0})
    return module


class _Outcome:
    def __init__(self, report):
        self._report = report

    def get_result(self):
        return self._report


def _report(hooks, item, duration, when="call", cpu=None):
    report = SimpleNamespace(passed=True, outcome="passed", longrepr=None)
    item.ropelab_cpu_s = cpu
    wrapper = hooks.pytest_runtest_makereport(item, SimpleNamespace(when=when, duration=duration))
    next(wrapper)
    with pytest.raises(StopIteration):
        wrapper.send(_Outcome(report))
    return report


def _cell(name, n):
    return SimpleNamespace(fspath=ROOT / "notebooks" / name, nodeid=f"notebooks/{name}::Cell {n}")


def test_a_cell_over_its_limit_fails_and_one_under_it_passes(hooks):
    item = _cell("03_pack4.ipynb", 4)
    assert _report(hooks, item, 29.0).outcome == "passed"
    slow = _report(hooks, item, 31.5)
    assert slow.outcome == "failed" and "31.5 s, over its limit of 30 s" in slow.longrepr
    # Where the kernel's CPU time is known, it is the measure: wall time on a loaded machine
    # is not what the cell costs.
    assert _report(hooks, item, 90.0, cpu=(12.0, 40.0)).outcome == "passed"
    busy = _report(hooks, item, 31.0, cpu=(30.5, 40.0))
    assert busy.outcome == "failed" and "30.5 s" in busy.longrepr and "31.0 s of wall" in busy.longrepr
    assert _report(hooks, item, 31.5, when="setup").outcome == "passed"  # the kernel's start
    test_item = SimpleNamespace(fspath=ROOT / "tests" / "test_x.py", nodeid="tests/test_x.py::t")
    assert _report(hooks, test_item, 300.0).outcome == "passed"  # tests have no such limit


def test_notebook_00_is_timed_whole_from_its_first_cell_to_its_last(hooks, monkeypatch):
    name = "00_rope_in_one_notebook.ipynb"
    first, last = _cell(name, 0), _cell(name, 9)
    hooks.pytest_collection_modifyitems(None, [first, last])
    clock = iter([100.0, 161.0])
    monkeypatch.setattr(hooks.time, "monotonic", lambda: next(clock))
    hooks.pytest_runtest_setup(first)  # t = 100
    assert _report(hooks, first, 1.0).outcome == "passed"  # not the last cell: not timed whole
    whole = _report(hooks, last, 1.0)  # t = 161, no CPU time known: the wall time
    assert whole.outcome == "failed" and "kernel start to last cell" in whole.longrepr
    monkeypatch.setattr(hooks.time, "monotonic", lambda: 161.0)
    assert _report(hooks, last, 1.0, cpu=(1.0, 35.0)).outcome == "passed"  # 35 s of CPU in all
    assert _report(hooks, last, 1.0, cpu=(1.0, 61.0)).outcome == "failed"


def test_the_kernels_cpu_time_is_read_from_proc(hooks):
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("no /proc here: the limits use wall time")
    me = SimpleNamespace(parent=SimpleNamespace(kernel=SimpleNamespace(
        km=SimpleNamespace(provisioner=SimpleNamespace(pid=os.getpid())))))
    t = os.times()
    assert 0 < hooks.kernel_cpu_s(me) <= t.user + t.system + t.children_user + t.children_system + 1
    assert hooks.kernel_cpu_s(SimpleNamespace()) is None
