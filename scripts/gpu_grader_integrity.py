"""The grader's defences where the learner's code runs in the grader's own process: a GPU.

On a GPU a check cannot fork (a CUDA context does not survive it), so ``grading.grade`` runs
the learner's function in this process and ``verdict.time()`` times it there.  Each row below
grades (and, on a GPU, times) one function and says whether the outcome is the one the grader
must give:

* honest kernel and launch functions pass and are timed (no false alarm of the inventory);
* a function that hunts the grader's frames for ``.expected`` finds none;
* one that replaces the grader's judging, or the timer's clock, is refused and undone;
* one that computes once and skips the work on later calls, and one that launches on a
  non-blocking stream the timer's events do not see, are not timed.

Run: ``python scripts/gpu_grader_integrity.py`` (exit 0 when every row is as expected).  On the
simulator the grading rows run and the timing rows are skipped.
"""

from __future__ import annotations

import linecache
import sys
import textwrap

import ropelab  # noqa: F401  (picks the target before numba.cuda is imported)
from ropelab.grader import grading, steps
from ropelab.target import SIMULATED

CELL = '''
import sys, time
import numpy as np
import numba
from numba import cuda

@cuda.jit(fastmath=True)
def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c

def honest(x, out, cos_t, sin_t, n_pairs):
    rotate_pairs[(n_pairs + 255) // 256, 256](x, out, cos_t, sin_t, n_pairs)

def hunts_frames(x, out, cos_t, sin_t, n_pairs):
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(getattr(value, "expected", None), np.ndarray):
                raise RuntimeError("FOUND an .expected in the grader's frames")
        frame = frame.f_back
    honest(x, out, cos_t, sin_t, n_pairs)

def patches_the_judge(x, out, cos_t, sin_t, n_pairs):
    from ropelab.grader import grading
    grading._compare = lambda *args: None
    honest(x, out, cos_t, sin_t, n_pairs)

CALLS = []

def skips_later_calls(x, out, cos_t, sin_t, n_pairs):
    CALLS.append(1)
    if len(CALLS) <= 4:  # the graded cases (and the fresh one), then nothing
        honest(x, out, cos_t, sin_t, n_pairs)

CLOCK = []

def patches_the_clock(x, out, cos_t, sin_t, n_pairs):
    CLOCK.append(1)
    if len(CLOCK) > 4:  # graded honestly first; once timed, the clock is replaced
        cuda.event_elapsed_time = lambda start, end: 1e-4
    honest(x, out, cos_t, sin_t, n_pairs)

STREAM = []

def hides_on_a_stream(x, out, cos_t, sin_t, n_pairs):
    if not STREAM:
        from numba.cuda.cudadrv import driver
        flags = driver.binding.CUstream_flags.CU_STREAM_NON_BLOCKING.value
        STREAM.append(cuda.external_stream(int(driver.driver.cuStreamCreate(flags))))
    rotate_pairs[(n_pairs + 255) // 256, 256, STREAM[0]](x, out, cos_t, sin_t, n_pairs)
'''


def _cell():
    name = "<grader integrity cell>"
    text = textwrap.dedent(CELL)
    linecache.cache[name] = (len(text), None, text.splitlines(keepends=True), name)
    namespace = {"__name__": "__main__"}
    exec(compile(text, name, "exec"), namespace)
    return namespace


def main() -> int:
    ns = _cell()
    launch, kernel_step = steps.get("00.4"), steps.get("00.3")
    rows = []  # (what, graded verdict's first line, timing text, ok)

    def row(what, step, fn, graded_ok, timed_ok=None):
        verdict = grading.grade(step, fn)
        text = str(verdict)
        ok = graded_ok(verdict, text)
        timed = ""
        if timed_ok is not None and verdict.passed and not SIMULATED:
            timed = verdict.timer(10)
            ok = ok and timed_ok(timed)
        rows.append((what, text.splitlines()[0][:110], timed.replace("\n", " | ")[:220], ok))

    def passed(v, text):
        return v.passed

    def refused(v, text):
        return not v.passed and "FOUND" not in text

    row("the first rule: reaching past the arguments", launch, ns["patches_the_judge"],
        lambda v, t: refused(v, t) and "reaches past its arguments" in t)
    # The rows below test the defences behind that first rule (intake.reaching_out refuses
    # imports and frame walks before anything runs), so it is lifted for them.
    from ropelab.grader import intake

    intake._reaching_problem = lambda *args: None
    # Timed: the report opens with the learner's time (a refusal opens with "not timed:"; a
    # later line may say that ropelab's own kernel was not timed beside it).
    row("honest kernel (00.3)", kernel_step, ns["rotate_pairs"], passed,
        lambda t: "your kernel" in t and not t.startswith("not timed"))
    row("honest launch (00.4)", launch, ns["honest"], passed,
        lambda t: "your kernel" in t and not t.startswith("not timed"))
    row("hunts the grader's frames", launch, ns["hunts_frames"], passed)
    row("patches the judging", launch, ns["patches_the_judge"],
        lambda v, t: refused(v, t) and "could not trust" in t)
    row("skips the work on later calls", launch, ns["skips_later_calls"], passed,
        lambda t: t.startswith("not timed:") and "never written" in t)
    row("patches the clock", launch, ns["patches_the_clock"], passed,
        lambda t: "replaced numba.cuda.event_elapsed_time" in t)
    if not SIMULATED:
        row("hides on a non-blocking stream", launch, ns["hides_on_a_stream"], passed,
            lambda t: t.startswith("not timed:"))
    assert grading._compare.__module__ == "ropelab.grader.grading"  # the patch was undone
    for what, first, timed, ok in rows:
        print(f"{'ok  ' if ok else 'FAIL'} {what:<32} {first}")
        if timed:
            print(f"     timed: {timed}")
    if SIMULATED:
        print("(simulator: the timing rows need a GPU and were not timed)")
    failed = sum(not ok for *_, ok in rows)
    print(f"{len(rows)} rows, {failed} not as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
