"""One run of a learner's function on one test case, and what it left behind.

On the simulator every array argument is a :class:`.recording.WatchedArray` over a copy of the
case's input (so out-of-bounds indices name their array, and :mod:`.show` can draw who touched
what), launches are intercepted (:func:`.launch_records.intercepted_launches`), shared arrays
report races (:mod:`ropelab.sim.shared_race`) and the step's arrays report threads that talk
through global memory with nothing ordering them (:mod:`.ordering`).  On a GPU the arrays are
device arrays and ``out`` is followed by :data:`SLACK` sentinel floats, since a GPU checks no
index.

``out`` starts filled with :data:`SENTINEL`, a NaN with a payload that arithmetic does not
produce (a computed NaN is the canonical quiet NaN), compared bit for bit: an element still
holding it was never written, and a kernel that writes NaN is told its value is wrong.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

import numpy as np

from ..target import SIMULATED, small_grids_quiet

SENTINEL_BITS = np.uint32(0x7FE5A5A5)
SENTINEL = SENTINEL_BITS.view(np.float32)
SLACK = 64  # floats after out on a GPU: a store past the end lands here


def unwritten(values: np.ndarray) -> np.ndarray:
    """True where ``values`` (float32) still holds the sentinel, bit for bit."""
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32) == SENTINEL_BITS


def wrong_mask(case, got: np.ndarray) -> np.ndarray:
    """True where ``got`` (flat, the expected size) is wrong: outside the tolerance (a NaN
    counts as wrong), or, where the expected value is NaN, written at all.  A NaN in
    ``expected`` means *left untouched*: a paged cache's slots that no token maps to keep what
    they held, and the grader's ``out`` holds the never-written sentinel there."""
    expected = case.expected.ravel()
    bad = ~(np.abs(got.astype(np.float64) - expected) <= case.tol)
    keep = np.isnan(expected)
    if keep.any():
        bad[keep] = ~unwritten(got[keep])
    return bad


@dataclass
class Trial:
    out: np.ndarray  # float32, the expected size (plus SLACK on a GPU)
    inputs_after: dict  # name -> host array after the run
    launches: list = field(default_factory=list)  # launch_records.Launch, simulator only
    watched: dict = field(default_factory=dict)  # name -> WatchedArray, simulator only
    # reads of a shared element another thread of the block wrote (simulator, shared steps)
    shared_meetings: int = 0
    # the fewest distinct shared elements a thread of a block read (0: some thread read none)
    shared_reads_fewest: int = 0


def run(step, case, fn) -> Trial:
    """Run ``fn`` on ``case`` by the step's contract; exceptions propagate to the grader."""
    if SIMULATED:
        return _run_simulated(step, case, fn)
    return _run_on_gpu(step, case, fn)


def host_scalar(step, value):
    """A scalar input as the learner's launch function gets it: a plain Python number, as a
    shape computation would give (numba-cuda on a GPU refuses a NumPy integer as a grid size).
    A kernel step keeps the NumPy type: it is the kernel argument's type (uint64, say)."""
    if step.kind == "launch" and isinstance(value, np.generic):
        return value.item()
    return value


def _run_simulated(step, case, fn) -> Trial:
    from ..sim import shared_race
    from .recording import WatchedArray, intercepted_launches

    size = case.out_size  # a Case or the CaseInputs the learner gets (no expected there)
    watched, args = {}, []
    for name in step.arguments:
        if name == "out":
            # A kernel step's cases say who owns each element on the grader's grid; a launch
            # step whose text gives every item its own thread (``ownership`` set) holds the
            # learner's grid to the same rule: the owner is a global thread number, whatever
            # the block size.
            owner = case.owner if step.kind == "kernel" or step.ownership else None
            arr = WatchedArray("out", np.full(size, SENTINEL, dtype=np.float32), owner)
        else:
            value = case.inputs[name]
            if not isinstance(value, np.ndarray):
                args.append(host_scalar(step, value))
                continue
            # an input the step says each thread reads only its own elements of
            reader = case.owner if name in step.reads_own else None
            arr = WatchedArray(name, value.copy(), reader=reader,
                               once_per_block=name in step.shared_copy)
        watched[name] = arr
        args.append(arr)
    # Every step: races are wrong code wherever they are (the threads' clocks also order the
    # global-memory accesses :class:`~.recording.WatchedArray` checks); only a ``shared`` step
    # also needs a meeting (judging.whole_check_problem).
    with intercepted_launches(step.launches_signature) as launches, \
            shared_race.watching(record_reads=bool(step.shared_reads_each)) as shared, \
            _threads_in_turn():
        if step.kind == "launch":
            fn(*args)
        else:
            fn[case.grid, case.block](*args)
    inputs_after = {n: w.data for n, w in watched.items() if n != "out"}
    return Trial(watched["out"].data, inputs_after, launches, watched, int(shared.meetings),
                 int(shared.fewest_reads))


# How long a simulated thread may hold the interpreter before another is let in.  Python's
# 5 ms would interrupt a thread in mid-kernel at a moment set by whatever ran before: a kernel
# whose threads race on one element of out would be judged by the luck of that moment, its
# verdict naming one element one run and another the next.  Waits (barriers, shuffles, the
# block's end) hand the interpreter over at once whatever this is.
TURN_S = 0.25


@contextlib.contextmanager
def _threads_in_turn():
    before = sys.getswitchinterval()
    sys.setswitchinterval(max(before, TURN_S))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _run_on_gpu(step, case, fn) -> Trial:
    from numba import cuda

    size = case.out_size  # a Case or the CaseInputs the learner gets (no expected there)
    out_buf = cuda.to_device(np.full(size + SLACK, SENTINEL, dtype=np.float32))
    device, args = {}, []
    for name in step.arguments:
        if name == "out":
            args.append(out_buf[:size])
            continue
        value = case.inputs[name]
        if isinstance(value, np.ndarray):
            device[name] = cuda.to_device(value)
            args.append(device[name])
        else:
            args.append(host_scalar(step, value))
    with small_grids_quiet():  # the cases are small on purpose; the learner's own launches warn
        if step.kind == "launch":
            fn(*args)
        else:
            fn[case.grid, case.block](*args)
    cuda.synchronize()
    inputs_after = {n: d.copy_to_host() for n, d in device.items()}
    return Trial(out_buf.copy_to_host(), inputs_after)
