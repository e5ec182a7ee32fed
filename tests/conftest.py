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

    Every launch goes through ropelab.kernels._launch: the simulator's dispatcher call or a
    bound cuLaunchKernel on a GPU; both are wrapped.
    """
    from ropelab.kernels import _launch

    calls = []
    real_sim = _launch._launch_simulated
    real_fire = _launch.Bound.fire
    monkeypatch.setattr(_launch, "_launch_simulated",
                        lambda *a, **k: (calls.append(1), real_sim(*a, **k)))
    monkeypatch.setattr(_launch.Bound, "fire",
                        lambda self, *a, **k: (calls.append(1), real_fire(self, *a, **k)))
    return calls
