"""Warp shuffles: the simulator emulation in ropelab.sim.warp (and, on a GPU, the real instructions).

The kernels below state what each shuffle must return; the expectations are computed in NumPy
from the lane arithmetic, so the same tests check the hardware when a GPU is present.
Budget: a few seconds (blocks of at most 64 threads).
"""

import numpy as np
import pytest
from numba import cuda, int32

import ropelab
from ropelab.sim import warp

sim_only = pytest.mark.skipif(not ropelab.SIMULATED, reason="tests the simulator's emulation")
FULL = 0xFFFFFFFF


def shfl_kinds(out, arg):
    tid = cuda.threadIdx.x
    v = int32(tid * 10 + 1)
    out[0, tid] = cuda.shfl_xor_sync(FULL, v, arg)
    out[1, tid] = cuda.shfl_sync(FULL, v, arg)
    out[2, tid] = cuda.shfl_up_sync(FULL, v, arg)
    out[3, tid] = cuda.shfl_down_sync(FULL, v, arg)


def butterfly_sum(values, out):
    tid = cuda.threadIdx.x
    s = values[tid]
    for m in (16, 8, 4, 2, 1):
        s += cuda.shfl_xor_sync(FULL, s, m)
    out[tid] = s


def expected(threads: int, arg: int) -> np.ndarray:
    tid = np.arange(threads)
    lane, base = tid % 32, tid - tid % 32
    lanes = np.minimum(32, threads - base)  # a partial last warp has fewer lanes
    v = tid * 10 + 1

    def pick(src):
        ok = (src >= 0) & (src < lanes)
        return np.where(ok, (base + np.where(ok, src, 0)) * 10 + 1, v)

    return np.stack([pick(lane ^ arg), pick(np.full_like(lane, arg % 32)), pick(lane - arg),
                     pick(lane + arg)])


# 64 threads: two full warps; 48: a full warp and a partial one of 16 lanes.
@pytest.mark.parametrize("threads", [64, 48] if ropelab.SIMULATED else [64])
@pytest.mark.parametrize("arg", [1, 5, 16, 31])
def test_shuffles_match_lane_arithmetic(threads, arg):
    out = np.zeros((4, threads), np.int32)
    cuda.jit(shfl_kinds)[1, threads](out, arg)
    np.testing.assert_array_equal(out, expected(threads, arg))


def test_butterfly_leaves_the_warp_sum_in_every_lane(rng):
    values = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    cuda.jit(butterfly_sum)[1, 64](values, out)
    for w in range(2):
        np.testing.assert_allclose(out[32 * w: 32 * w + 32], values[32 * w: 32 * w + 32].sum(),
                                   rtol=1e-5)


def xor_global(out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_xor_sync(FULL, int32(i), 3)


def test_each_block_has_its_own_warps():
    out = np.zeros(3 * 64, np.int32)
    cuda.jit(xor_global)[3, 64](out)
    i = np.arange(3 * 64)
    np.testing.assert_array_equal(out, i ^ 3)  # never a value from another block


@sim_only
def test_install_is_idempotent_and_attaches_to_the_fake_module():
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    first = warp.install()
    assert warp.install() == first
    for name in ("shfl_sync", "shfl_xor_sync", "shfl_up_sync", "shfl_down_sync", "syncwarp"):
        assert callable(getattr(FakeCUDAModule, name))


def partial_mask(out):
    out[cuda.threadIdx.x] = cuda.shfl_xor_sync(0x0000FFFF, cuda.threadIdx.x, 1)


@sim_only
def test_partial_mask_is_refused_not_emulated_wrongly():
    with pytest.raises(NotImplementedError, match="every lane"):
        cuda.jit(partial_mask)[1, 32](np.zeros(32, np.int32))


def divergent(out):
    tid = cuda.threadIdx.x
    if tid < 16:
        return
    out[tid] = cuda.shfl_xor_sync(FULL, tid, 1)


@sim_only
def test_divergent_shuffle_reports_instead_of_hanging():
    with pytest.raises(warp.WarpDivergenceError, match=r"lane\(s\) \[0, 1, .*ended"):
        cuda.jit(divergent)[1, 32](np.zeros(32, np.int32))


def oob_in_one_lane(out):
    tid = cuda.threadIdx.x
    v = cuda.shfl_xor_sync(FULL, tid, 1)
    if tid == 5:
        out[100] = v  # out of bounds: the simulator raises IndexError in this lane
    v = cuda.shfl_xor_sync(FULL, v, 2)  # the other lanes wait here for lane 5
    out[tid] = v


@sim_only
def test_error_in_one_lane_surfaces_and_frees_the_warp():
    with pytest.raises(IndexError):
        cuda.jit(oob_in_one_lane)[1, 32](np.zeros(32, np.int32))


@sim_only
def test_shuffle_outside_a_kernel_is_an_error():
    with pytest.raises(RuntimeError, match="inside a simulated kernel"):
        warp.shfl_xor_sync(None, FULL, 1.0, 1)
