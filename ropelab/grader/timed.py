"""``verdict.time()`` on a GPU, where nothing the learner's function does can make it look
faster.

On a GPU the timing runs the learner's function in this process, many times, between the
timer's events (:func:`.learner_time.time_on_gpu`).  So:

* the function is handed the timing case's inputs only (:func:`timing_inputs`): the answer is
  built after the timing, to check the last timed run (:func:`last_run_problem`);
* ``out`` is reset to the never-written sentinel before every timed launch, outside the events
  (:func:`resetting_out`): a function that keeps its result from one call and skips the work
  on the next leaves the sentinel there, and is not timed;
* a time far below that of a device copy of the same bytes (:data:`IMPLAUSIBLE`) is not a
  faster kernel but work the events did not bracket (launched on a stream of its own, or not
  done): it is refused (:func:`implausible`);
* an inventory of the timer's clock, its events, NumPy and the grader's own functions is taken
  before the timing (:class:`.tamper.Guard`, in the verdict's timer :func:`.grading.verdict_timer`): a
  function that replaced any of them is not timed, and the originals are put back.
"""

from __future__ import annotations

import contextlib

import numpy as np

from . import unseen
from .trial import SENTINEL, unwritten, wrong_mask


def timing_inputs(step):
    """The step's timing case as the learner's function may see it: inputs, launch, size of
    out (a :class:`~.grade_types.CaseInputs`)."""
    case = step.timing_case()
    inputs = case.runnable()
    unseen.scrub([case])
    return inputs


@contextlib.contextmanager
def resetting_out(timer, out, sentinel):
    """Inside the block, ``timer`` copies ``sentinel`` (a device array of the sentinel) into
    ``out`` before the flush that precedes each timed launch: the copy lies outside the
    events."""
    flush = timer.flush

    def reset_then_flush():
        out.copy_to_device(sentinel)
        flush()

    timer.flush = reset_then_flush
    try:
        yield
    finally:
        timer.flush = flush


def sentinel_like(size: int) -> np.ndarray:
    return np.full(size, SENTINEL, dtype=np.float32)


def last_run_problem(step, got: np.ndarray, case=None) -> str | None:
    """Why the output of the last timed run is not the timing case's answer, or None.
    ``case``: the timing case, if the caller built it with its answer (a trusted caller, the
    prediction's GPU run); else the answer is built now, the learner's function finished."""
    if getattr(case, "expected", None) is None:
        case = step.timing_case()
    got = np.asarray(got, dtype=np.float32).ravel()[:case.out_size]
    # An element the case expects left untouched (NaN: a cache slot no token maps to) must
    # still hold the sentinel; every other must have been written, and be right.
    keep = np.isnan(case.expected.ravel())
    never = unwritten(got) & ~keep
    if never.any():
        return (f"{int(never.sum())} of {int((~keep).sum())} floats of out that the step writes "
                "were never written by the last timed run: out is reset before every timed "
                "launch, so a function that computes once and skips the work on later calls "
                "shows here")
    bad = wrong_mask(case, got)
    if bad.any():
        k = int(np.argmax(bad))
        if keep[k]:
            return (f"the last timed run wrote {case.locate(k)}, which the step leaves "
                    f"untouched (got {float(got[k]):.6g})")
        return (f"the last timed run's out is wrong at {case.locate(k)} (expected "
                f"{float(case.expected.ravel()[k]):.6g}, got {float(got[k]):.6g})")
    return None


# A kernel that moves a case's bytes cannot beat a device copy of those bytes by this factor
# (both cold, on one GPU): the recorded H200 kernels run at 40-110% of the copy's speed.
IMPLAUSIBLE = 3.0


def implausible(mine_us: float, copy_us: float) -> str | None:
    """Why a median of ``mine_us`` beside a copy's ``copy_us`` cannot be the kernel's time."""
    if not (mine_us > 0 and copy_us > 0) or mine_us * IMPLAUSIBLE < copy_us:
        return (f"{mine_us:.2f} us is over {IMPLAUSIBLE:g}x faster than a device copy of the "
                f"same bytes ({copy_us:.2f} us): the timed events did not bracket the work "
                "(a launch on a stream of its own, or work skipped)")
    return None
