"""The simulator's block scheduler (ropelab.sim.block): barriers, the ``_count`` family and
failures behave as in the simulator's own polling manager, nothing hangs, and a barrier that not
every thread of the block reaches fails the launch (ropelab.sim.barrier) where the simulator as
shipped let it pass.

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
    cuda.syncthreads()  # the simulator as shipped releases it: the 16 still running arrived
    out[t] = 2


def barrier_inside_the_guard(out, n):
    i = cuda.grid(1)
    if i < n:  # the last block's threads past n skip the barrier
        cuda.syncthreads()
        out[i] = 1


def a_barrier_in_each_arm(out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()
    else:
        cuda.syncthreads()  # another barrier: on a GPU the two halves wait for each other
    out[t] = 1


def an_extra_barrier_for_thread_0(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 0:
        cuda.syncthreads()
    out[t] = 1


def uneven_trips(out):
    t = cuda.threadIdx.x
    for _ in range(1 + t % 2):  # odd threads pass the barrier twice, even threads once
        cuda.syncthreads()
    out[t] = 1


def a_count_some_threads_skip(out):
    t = cuda.threadIdx.x
    if t < 8:
        out[t] = cuda.syncthreads_count(t)


def barrier_in_a_uniform_branch(out, flag):
    t = cuda.threadIdx.x
    if flag > 0:  # the same for the whole block: allowed
        cuda.syncthreads()
    for _ in range(3):  # the same trip count everywhere: three barriers, all threads
        cuda.syncthreads()
    out[t] = 1


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


# (kernel, grid, block, arguments, fragments of the error): barriers not every thread reaches.
# A new probe is one entry here.
DIVERGENT = [
    (half_return_then_barrier, 1, 32, (), ["threads 0-15 wait at the cuda.syncthreads() on line",
                                           "threads 16-31 returned without reaching it"]),
    (barrier_inside_the_guard, 2, 32, (40,), ["in block 1, threads 0-7 wait at",
                                              "threads 8-31 returned without reaching it"]),
    (a_barrier_in_each_arm, 1, 32, (), ["the threads wait at different barriers",
                                        "threads 0-15 at the cuda.syncthreads() on line",
                                        "threads 16-31 at the cuda.syncthreads() on line"]),
    (an_extra_barrier_for_thread_0, 1, 32, (), ["thread 0 waits at", "threads 1-31 returned"]),
    (uneven_trips, 1, 32, (), ["threads 1, 3, 5, 7, ... wait at", "they passed it 1 time",
                               "the others are there for the 2nd time"]),
    (a_count_some_threads_skip, 1, 32, (), ["threads 0-7 wait at the cuda.syncthreads_count()",
                                            "threads 8-31 returned"]),
]


@sim_only
@pytest.mark.parametrize("kernel, grid, threads, args, fragments", DIVERGENT,
                         ids=[d[0].__name__ for d in DIVERGENT])
def test_a_barrier_not_every_thread_reaches_fails_naming_them_and_its_line(kernel, grid, threads,
                                                                            args, fragments):
    out = np.zeros(grid * threads, np.int32)
    with pytest.raises(block.BarrierDivergence) as caught:
        cuda.jit(kernel)[grid, threads](out, *args)
    text = str(caught.value)
    missing = [f for f in fragments if f not in text]
    assert not missing, f"{missing} not in: {text}"
    assert f"of {kernel.__name__} (`" in text  # the line is named with its source
    # the block was stopped, the pool is intact: the next launch runs
    good = np.zeros(64, np.float32)
    cuda.jit(reverse_through_shared)[1, 64](np.arange(64, dtype=np.float32), good)
    assert good[0] == 63


@sim_only
def test_barriers_every_thread_reaches_pass_in_uniform_branches_and_loops():
    out = np.zeros(32, np.int32)
    cuda.jit(barrier_in_a_uniform_branch)[1, 32](out, 1)
    cuda.jit(barrier_in_a_uniform_branch)[1, 32](out, 0)
    assert out.all()


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
    # the threads parked in the barrier were ended where they waited: the next launch finds
    # the worker free and runs normally
    assert not dst.any()  # nobody got past the barrier
    out = np.zeros(64, np.float32)
    cuda.jit(reverse_through_shared)[1, 64](np.arange(64, dtype=np.float32), out)
    assert out[0] == 63 and threading.active_count() >= before


def one_thread_fails_first(out):
    t = cuda.threadIdx.x
    if t == 0:
        out[out.size] = 1  # out of bounds at once
    acc = 0
    for k in range(3000):  # the others are still busy when thread 0 fails
        acc += k
    out[t] = acc


@sim_only
def test_a_failed_launch_returns_only_once_its_other_threads_have_ended():
    # A thread still running after its launch raised would run on into the next launch (with
    # that launch's `cuda` module and shared arrays): the launch waits for the others first.
    out = cuda.to_device(np.zeros(32, np.int64))  # no copy back to skip when it raises
    with pytest.raises(IndexError, match=r"tid=\[0, 0, 0\]"):
        cuda.jit(one_thread_fails_first)[1, 32](out)
    assert (out.copy_to_host()[1:] == sum(range(3000))).all()  # every other one had finished


@sim_only
def test_the_scheduler_is_installed_once():
    from numba.cuda.simulator import kernel

    assert block.install() is True and block.install() is True
    assert kernel.BlockManager.run is block._manager_run
    assert kernel.BlockThread.syncthreads is block.syncthreads
    assert kernel.BlockThread.syncthreads_count is block.syncthreads_count


def who_am_i(out):
    t = cuda.threadIdx.x
    out[cuda.blockIdx.x, t, 0] = cuda.threadIdx.x
    out[cuda.blockIdx.x, t, 1] = cuda.blockIdx.x
    out[cuda.blockIdx.x, t, 2] = cuda.laneid if hasattr(cuda, "laneid") else t % 32


@sim_only
def test_one_pooled_thread_runs_a_block_and_is_reused():
    out = np.full((3, 40, 3), -1, np.int32)
    kernel = cuda.jit(who_am_i)
    kernel[3, 40](out)
    np.testing.assert_array_equal(out[..., 0], np.tile(np.arange(40), (3, 1)))
    np.testing.assert_array_equal(out[..., 1], np.repeat(np.arange(3), 40).reshape(3, 40))
    cuda.jit(tree_sum)[1, 64](np.ones(64, np.float32), np.zeros(1, np.float32))  # together
    pooled = {id(t) for t in threading.enumerate() if t.name == "ropelab-sim-thread"}
    kernel[3, 40](out)  # a second launch runs on the same workers: none is created
    cuda.jit(tree_sum)[1, 64](np.ones(64, np.float32), np.zeros(1, np.float32))
    assert {id(t) for t in threading.enumerate() if t.name == "ropelab-sim-thread"} == pooled
    # a block whose 64 threads meet at barriers runs them as greenlets of one worker, not as
    # 64 OS threads (the other tests' launches may have left a second worker idle)
    assert 1 <= len(pooled) <= 2


def _launch_in_child(conn):
    try:
        out = np.zeros(64, np.float32)
        cuda.jit(reverse_through_shared)[1, 64](np.arange(64, dtype=np.float32), out)
        conn.send(out.tolist())
    except BaseException as exc:  # reported, so a failure is not a silent hang
        conn.send(repr(exc))


@sim_only
def test_a_forked_child_launches_on_its_own_threads():
    """The grader forks: the child must not hand work to the parent's pooled workers, which do
    not exist as threads there (it would wait for them forever)."""
    import multiprocessing

    cuda.jit(tree_sum)[1, 64](np.ones(64, np.float32), np.zeros(1, np.float32))  # fill the pool
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_launch_in_child, args=(child,))
    proc.start()
    assert parent.poll(60), "the forked child's launch did not finish"
    assert parent.recv() == list(range(63, -1, -1))
    proc.join(10)


def one_thread_exits(dst):
    t = cuda.threadIdx.x
    if t == 3:
        raise SystemExit("thread 3 left")  # not an Exception: the block must end all the same
    dst[t] = 1


@sim_only
def test_a_thread_raising_a_base_exception_ends_the_launch_instead_of_hanging():
    dst = np.zeros(8, np.int32)
    with pytest.raises(SystemExit, match=r"tid=\[3, 0, 0\]"):
        cuda.jit(one_thread_exits)[1, 8](dst)


def test_a_pooled_thread_that_runs_two_threads_of_a_block_is_two_threads_to_the_race_detector():
    """A pooled simulator thread runs one simulated thread after another, often two of one
    block (the first ended before the second was handed out).  The race detector records the
    simulated thread, not the OS thread: a write by the first and a read by the second, with
    no barrier between, is a race however the pool scheduled them (it was missed, depending on
    the machine's load, when the OS thread stood for both)."""
    from types import SimpleNamespace

    from ropelab.sim import shared_race

    me = threading.current_thread()
    data = np.zeros(4, np.float32)
    row = shared_race.RaceArray(data, "a test array")

    def become(tid):  # what block.Worker._begin does between two simulated threads
        for name in ("_race_who", "_race_epoch", "_race_warp_epoch"):
            me.__dict__.pop(name, None)
        me.threadIdx, me.blockIdx, me.thread_id = SimpleNamespace(x=tid, y=0, z=0), (0, 0, 0), tid

    try:
        become(2)
        row[2] = 1.0
        become(0)
        with pytest.raises(shared_race.SharedMemoryRace, match="thread 2 wrote it and thread 0 "
                                                              "read it"):
            _ = row[2]
        become(1)
        row[1] = 1.0
        _ = row[1]  # one simulated thread reading its own write: no race
    finally:
        for name in ("_race_who", "_race_epoch", "_race_warp_epoch", "threadIdx", "blockIdx",
                     "thread_id"):
            me.__dict__.pop(name, None)


def shuffle_beside_a_barrier(out):
    t = cuda.threadIdx.x
    if t < 16:
        out[t] = cuda.shfl_xor_sync(0xFFFFFFFF, t, 1)  # waits for lanes 16-31 of its warp
    else:
        cuda.syncthreads()  # lanes 16-31 (and warp 1) wait for lanes 0-15 here
    out[t] += 1


@sim_only
def test_threads_that_all_wait_for_each_other_fail_at_once_not_after_a_timeout():
    import time

    from ropelab.sim import warp

    start = time.monotonic()
    with pytest.raises(warp.WarpDivergenceError, match=r"threads 0-63 of this block all wait"):
        cuda.jit(shuffle_beside_a_barrier)[1, 64](np.zeros(64, np.int32))
    assert time.monotonic() - start < 5


def lanes_meet_in_shuffles_and_barriers(out):
    t = cuda.threadIdx.x
    v = t
    for k in range(3):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, 1 << k)
        cuda.syncthreads()
    out[t] = v


@sim_only
def test_shuffles_and_barriers_in_one_kernel_give_a_warps_prefix_sums():
    out = np.zeros(64, np.int64)
    cuda.jit(lanes_meet_in_shuffles_and_barriers)[1, 64](out)
    expect = np.arange(64)
    for k in range(3):
        lane = np.arange(64) % 32
        src = np.where(lane + (1 << k) < 32, np.arange(64) + (1 << k), np.arange(64))
        expect = expect + expect[src]
    np.testing.assert_array_equal(out, expect)
