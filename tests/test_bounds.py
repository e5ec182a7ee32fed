"""The simulator raises IndexError on any out-of-bounds access: a free memory checker.

Each kernel is launched with far more threads than there is work (whole blocks past the end),
on arrays sized exactly to the problem.  Under the simulator a missing guard is an IndexError;
a control kernel without a guard shows that the check really fires.
"""

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import kernels
from ropelab.kernels.launch import launch
from ropelab.kernels.plan import jitted
from ropelab.problem import RopeProblem

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="uses the simulator's bounds checks")


def seed_rope_without_guard(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    token = idx // n_pairs
    x0 = x[2 * idx]  # no `if idx < total_pairs`: the seed's kernel
    out[2 * idx] = x0 + positions[token] * base * 0


def test_the_simulator_catches_an_unguarded_kernel():
    x = cuda.to_device(np.ones(6, np.float32))
    out = cuda.device_array(6, np.float32)
    pos = cuda.to_device(np.arange(1, dtype=np.int32))
    with pytest.raises(IndexError):
        jitted(seed_rope_without_guard)[1, 32](x, out, pos, 3, 3, np.float32(1e4))


@pytest.mark.parametrize("variant", list(kernels.VARIANTS))
@pytest.mark.parametrize("threads", [32, 128])
@pytest.mark.parametrize("head_dim", [10, 12])  # 12: whole quads, so pack4 takes float4
def test_guards_hold_when_the_grid_overshoots(variant, threads, head_dim):
    problem = RopeProblem(tokens=3, heads=1, head_dim=head_dim, rotary_dim=head_dim)
    plan = kernels.get(variant).plan(problem, threads=threads)
    assert plan.grid[0] * plan.block[0] > problem.tokens * problem.n_pairs or variant == "block2d"
    rng = np.random.default_rng(1)
    host = rng.standard_normal(problem.elements).astype(np.float32)
    x = cuda.to_device(host)
    out = cuda.to_device(np.full(problem.elements, np.nan, np.float32))
    pos = cuda.to_device(np.array([0, 5, 9], np.int32))
    launch(plan, (x, out, pos))  # IndexError if unguarded
    assert np.isfinite(out.copy_to_host()).all(), "every output element must be written"
