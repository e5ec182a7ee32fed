"""Shared fixtures.  Tests run on whatever target ropelab picks: the simulator without a GPU."""

import os
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
    from ropelab.kernels import launch as _launch

    calls = []
    real_sim = _launch._launch_simulated
    real_fire = _launch.Bound.fire
    monkeypatch.setattr(_launch, "_launch_simulated",
                        lambda *a, **k: (calls.append(1), real_sim(*a, **k)))
    monkeypatch.setattr(_launch.Bound, "fire",
                        lambda self, *a, **k: (calls.append(1), real_fire(self, *a, **k)))
    return calls


@pytest.fixture(scope="session")
def census_doc():
    """The census of the registered kernels as every reader gets it: ``ptx.census()``, served
    from data/census/census.json when its key is current (else compiled once, into the user
    cache)."""
    from ropelab.measure import census as ptx

    return ptx.census()
