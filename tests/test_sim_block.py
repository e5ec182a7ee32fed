"""The simulator's block scheduler (ropelab.sim.block): barriers, early returns, the ``_count``
family and failures behave as in the simulator's own polling manager, and nothing hangs.

These kernels mean the same on a GPU, so they run there too (except the failure cases, which
rely on the simulator's bounds checks).  Budget: a second or two.
"""

import threading

import numpy as np
import pytest
from numba import cuda, float32, int32

import ropelab
from ropelab.sim import block

sim_only = pytest.mark.skipif(not ropelab.SIMULATED, reason="tests the simulator's scheduler")


def reverse_through_shared(src, dst):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    buf[t] = src[cuda.blockIdx.x * 64 + t]
    cuda.syncthreads()  # without it a thread may read a slot not yet written
    dst[cuda.blockIdx.x * 64 + t] = buf[63 - t]


def tree_sum(src, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    buf[t] = src[t]
    cuda.syncthreads()
    step = 32
    while step > 0:  # six barriers in a row: the barrier is reusable
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[0] = buf[0]


def half_return_then_barrier(out):
    t = cuda.threadIdx.x
    if t >= 16:
        return  # these threads never reach the barrier below
    out[t] = 1
    cuda.syncthreads()  # released once the 16 threads still running have all arrived
    out[t] = 2


def counts(values, out):
    t = cuda.threadIdx.x
    v = values[t]
    c = cuda.syncthreads_count(v)
    a = cuda.syncthreads_and(v)
    o = cuda.syncthreads_or(v)
    if t == 0:
        out[0], out[1], out[2] = c, a, o


def one_thread_reads_out_of_bounds(src, dst):
    t = cuda.threadIdx.x
    v = src[t + 1000] if t == 5 else src[t]  # thread 5 fails; the others wait at the barrier
    cuda.syncthreads()
    dst[t] = v


def test_a_barrier_orders_shared_memory_in_every_block(rng):
    src = rng.standard_normal(3 * 64).astype(np.float32)
    dst = np.zeros_like(src)
    cuda.jit(reverse_through_shared)[3, 64](src, dst)
    np.testing.assert_array_equal(dst, src.reshape(3, 64)[:, ::-1].ravel())


def test_a_tree_reduction_passes_six_barriers(rng):
    src = rng.integers(-50, 50, 64).astype(np.float32)  # integers: the sum is exact
    out = np.zeros(1, np.float32)
    cuda.jit(tree_sum)[1, 64](src, out)
    assert out[0] == src.sum()


@sim_only
def test_threads_that_returned_do_not_hold_the_barrier():
    out = np.zeros(32, np.int32)
    cuda.jit(half_return_then_barrier)[1, 32](out)
    np.testing.assert_array_equal(out, [2] * 16 + [0] * 16)


@pytest.mark.parametrize("pattern", ["none", "some", "all"])
def test_syncthreads_count_and_or(pattern):
    values = {"none": np.zeros(40), "some": np.arange(40) % 3 == 0, "all": np.ones(40)}[pattern]
    values = values.astype(np.int32)
    out = np.zeros(3, np.int32)
    cuda.jit(counts)[1, 40](values, out)
    assert list(out) == [values.sum(), int(values.all()), int(values.any())]


@sim_only
def test_a_failing_thread_raises_with_its_place_and_frees_the_waiting_ones():
    src, dst = np.ones(32, np.float32), np.zeros(32, np.float32)
    before = threading.active_count()
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\] ctaid=\[0, 0, 0\]"):
        cuda.jit(one_thread_reads_out_of_bounds)[1, 32](src, dst)
    # the 31 threads parked in the barrier were woken (they raise "abort flag set") and end
    for t in threading.enumerate():
        if getattr(t, "_manager", None) is not None:
            t.join(timeout=10)
    assert threading.active_count() <= before
    assert not dst.any()  # nobody got past the barrier


@sim_only
def test_the_scheduler_is_installed_once():
    from numba.cuda.simulator import kernel

    assert block.install() is True and block.install() is True
    assert kernel.BlockManager.run is block._manager_run
    assert kernel.BlockThread.syncthreads is block._syncthreads
    assert getattr(kernel.BlockThread.run, "_ropelab_block", False)
