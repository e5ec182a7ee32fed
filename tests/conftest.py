"""Shared fixtures.  Tests run on whatever target ropelab picks: the simulator without a GPU."""

import json
import os
import subprocess
import sys
import zlib

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
    import importlib

    # The module (``ropelab.kernels.launch`` as an attribute is the function it defines).
    _launch = importlib.import_module("ropelab.kernels.launch")

    calls = []
    real_sim = _launch._launch_simulated
    real_fire = _launch.Bound.fire
    monkeypatch.setattr(_launch, "_launch_simulated",
                        lambda *a, **k: (calls.append(1), real_sim(*a, **k)))
    monkeypatch.setattr(_launch.Bound, "fire",
                        lambda self, *a, **k: (calls.append(1), real_fire(self, *a, **k)))
    return calls


# The second compile of the census runs in its own interpreter, next to the first: the two are
# independent (different processes, different cache directories) and, on two cores, together
# take the wall time of one.
_SECOND_CENSUS = (
    "import json, sys\n"
    "from ropelab.measure import census as ptx\n"
    "json.dump(ptx.census(use_cache=False), sys.stdout)\n"
)


@pytest.fixture(scope="session")
def census_pair(tmp_path_factory):
    """Two fresh compiles of the PTX census (``census(use_cache=False)``), shared by the session.

    ``first`` is compiled in this process and, as ``census()`` always does, written to the user
    cache (``$ROPELAB_CACHE`` or ``~/.cache/ropelab``), so later ``census()`` calls (the ledger,
    the notebooks) are served from it.  ``second`` is compiled at the same time in a fresh
    interpreter whose ``ROPELAB_CACHE`` is the empty directory ``cache_dir``; the determinism test
    compares the two and checks what the second wrote there.
    """
    from ropelab.measure import census as ptx

    cache_dir = tmp_path_factory.mktemp("census-cache")
    env = dict(os.environ, ROPELAB_CACHE=str(cache_dir), ROPELAB_QUIET="1")
    proc = subprocess.Popen([sys.executable, "-c", _SECOND_CENSUS], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = ptx.census(use_cache=False)
    finally:
        out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-2000:]
    return {"first": first, "second": json.loads(out), "cache_dir": cache_dir}


@pytest.fixture(scope="session")
def fresh_census(census_pair):
    """A census compiled in this session (not read from a cache file)."""
    return census_pair["first"]
