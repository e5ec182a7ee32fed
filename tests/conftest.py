"""Shared fixtures.  Tests run on whatever target ropelab picks: the simulator without a GPU."""

import os

os.environ.setdefault("ROPELAB_QUIET", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import ropelab  # noqa: E402,F401  (selects the target before anything imports numba.cuda)


@pytest.fixture
def rng(request):
    # A fresh, reproducible stream per test: a failure can be replayed from its name alone.
    seed = abs(hash(request.node.nodeid)) % (2**32)
    return np.random.default_rng(seed)
