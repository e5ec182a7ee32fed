"""Shared fixtures.  Tests run on whatever target ropelab picks: the simulator without a GPU."""

import os
import zlib

os.environ.setdefault("ROPELAB_QUIET", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import ropelab  # noqa: E402,F401  (selects the target before anything imports numba.cuda)
from ropelab import kernels  # noqa: E402


@pytest.fixture
def rng(request):
    # A fresh, reproducible stream per test: a failure can be replayed from its name alone.
    seed = zlib.crc32(request.node.nodeid.encode())  # hash() of a str changes per process
    return np.random.default_rng(seed)


@pytest.fixture
def launches(monkeypatch):
    """Count kernel launches, so each test can prove that none happened."""
    calls = []
    for module in kernels.VARIANTS.values():
        real = module.launch
        monkeypatch.setattr(module, "launch", lambda *a, _real=real, **k: (calls.append(1), _real(*a, **k)))
    return calls
