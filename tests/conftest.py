"""Shared fixtures.  Tests run on whatever target ropelab picks: the simulator without a GPU."""

import json
import os
import signal
import subprocess
import sys
import zlib
from pathlib import Path

os.environ.setdefault("ROPELAB_QUIET", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import ropelab  # noqa: E402,F401  (selects the target before anything imports numba.cuda)


@pytest.fixture
def rng(request):
    # A fresh, reproducible stream per test: a failure can be replayed from its name alone.
    seed = zlib.crc32(request.node.nodeid.encode())  # hash() of a str changes per process
    return np.random.default_rng(seed)


@pytest.fixture
def launches(monkeypatch):
    """Count kernel launches, so each test can prove that none happened.

    Every launch goes through ropelab.kernels.launch: the simulator's dispatcher call or a
    bound cuLaunchKernel on a GPU; both are wrapped.
    """
    from ropelab.kernels import launch as _launch

    calls = []
    real_sim = _launch._launch_simulated
    real_fire = _launch.Bound.fire
    monkeypatch.setattr(_launch, "_launch_simulated",
                        lambda *a, **k: (calls.append(1), real_sim(*a, **k)))
    monkeypatch.setattr(_launch.Bound, "fire",
                        lambda self, *a, **k: (calls.append(1), real_fire(self, *a, **k)))
    return calls


# The determinism check compiles the shipped (fast-math) builds of the census once, fresh, in its
# own interpreter, and compares them with the stored census.  In a plain run the compile starts
# as soon as the tests are collected and runs on the second core while the simulator tests keep
# the first busy; the fixture that needs it waits for it.  Under pytest-xdist every worker
# collects every test and the workers already fill the cores, so the compile starts in the
# fixture, in the one worker that runs the check.
_FRESH_CENSUS = (
    "import json, sys\n"
    "from ropelab.measure import census as ptx\n"
    "from ropelab.measure.census import engine\n"
    "rows = engine.run_child('ropelab.measure.census.registered', {'fastmath': [True]})\n"
    "json.dump({'key': ptx.cache_key(), 'rows': rows}, sys.stdout)\n"
)
_fresh = {}


def _start_fresh_census():
    env = dict(os.environ, ROPELAB_QUIET="1")
    _fresh["proc"] = subprocess.Popen([sys.executable, "-c", _FRESH_CENSUS],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env, start_new_session=True)


def pytest_collection_finish(session):
    if hasattr(session.config, "workerinput"):  # an xdist worker: see above
        return
    if any("fresh_census" in getattr(item, "fixturenames", ()) for item in session.items):
        _start_fresh_census()


def pytest_unconfigure(config):
    proc = _fresh.get("proc")
    if proc is not None and proc.poll() is None:  # a run stopped early (-x): do not leave it
        os.killpg(proc.pid, signal.SIGKILL)  # its own group: the compiling child goes too
        proc.wait()


@pytest.fixture(scope="session")
def census_doc():
    """The census of the registered kernels as every reader gets it: ``ptx.census()``, served
    from data/census/census.json when its key is current (else compiled once, into the user
    cache)."""
    from ropelab.measure import census as ptx

    return ptx.census()


@pytest.fixture(scope="session")
def fresh_census():
    """``{"key", "rows"}``: the shipped builds of the census, compiled once, fresh (no cache is
    read), in a fresh interpreter."""
    if "proc" not in _fresh:
        _start_fresh_census()
    proc = _fresh["proc"]
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)
