"""The timing case honours the launch a step states.

Set M's ramp.4 kernel computed ``i = blockIdx.x << 3 | threadIdx.x``: right for the step's
"blocks of 8 threads", which every check used, and wrong on the GPU, where the timing case ran
blocks of 256.  A kernel may rely on the launch its step states, so the timing case uses it;
where a step says its kernel works whatever the block size (02.2), a check runs another block
size, so a kernel that relies on one is refused before it is timed.  Rows of GPU runs timed on
a case that has changed since are left out of the fit and the checks.
"""

import numpy as np
import pytest

import ropelab
from ropelab.grader import grading, steps
from ropelab.grader.predict import entries, record

from cells import define

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's grading")

HEADER = "import math\nfrom numba import cuda, float32, uint64\n"


def _define(cell: str, name: str):
    return define(cell, name, HEADER)


def test_a_kernel_step_checked_in_one_block_size_is_timed_in_it():
    for step_id, step in steps.STEPS.items():
        if step.kind != "kernel":
            continue
        checked = {tuple(c.block) for c in step.make_cases(False)}
        if len(checked) == 1:
            assert {tuple(step.timing_case().block)} == checked, step_id


SHIFTED = '''
    @cuda.jit
    def scale_blocks(x, out, scale, n):
        i = (cuda.blockIdx.x << 3) | cuda.threadIdx.x
        if i >= n:
            return
        out[i] = x[i] * scale
    '''


def test_a_ramp4_kernel_that_relies_on_blocks_of_8_passes_and_covers_its_timing_case_once():
    verdict = grading.grade(steps.get("ramp.4"), _define(SHIFTED, "scale_blocks"))
    assert verdict.passed, str(verdict)
    case = steps.get("ramp.4").timing_case()
    n = int(case.inputs["n"])
    (blocks,), (threads,) = case.grid, case.block
    index = (np.arange(blocks)[:, None] << 3) | np.arange(threads)[None, :]
    written = np.bincount(index[index < n], minlength=n)
    assert (written == 1).all(), (case.grid, case.block)


STRIDED = '''
    @cuda.jit
    def my_rope_block2d(x, out, positions, n_pairs, base):
        token = cuda.blockIdx.x
        p = uint64(cuda.threadIdx.x)
        while p < n_pairs:
            theta = float32(positions[token]) * math.pow(base, -float32(p) / float32(n_pairs))
            c = math.cos(theta)
            s = math.sin(theta)
            i = uint64(token) * uint64(2) * n_pairs + uint64(2) * p
            a = x[i]
            b = x[i + uint64(1)]
            out[i] = a * c - b * s
            out[i + uint64(1)] = a * s + b * c
            p += uint64(STEP)
    '''


def test_02_2_refuses_a_stride_of_32_and_passes_a_stride_of_block_dim():
    fixed = grading.grade(steps.get("02.2"), _define(STRIDED.replace("STEP", "32"),
                                                     "my_rope_block2d"))
    text = str(fixed)
    assert not fixed.passed and "which is thread 32 of block 0's to write" in text, text
    assert "[case 5x130]" in text, text
    free = grading.grade(steps.get("02.2"), _define(STRIDED.replace("STEP", "cuda.blockDim.x"),
                                                    "my_rope_block2d"))
    assert free.passed, str(free)


def test_a_row_timed_on_a_case_that_has_changed_is_left_out():
    kernel = _define(SHIFTED, "scale_blocks")
    entry = entries.Entry(set="probe", module="m", index=0, step_id="ramp.4", label="shift",
                          fn=kernel)
    case = steps.get("ramp.4").timing_case()
    old = {entry.key: {"case": f"{int(case.inputs['n'])} floats", "median_us": "20.0",
                       "copy_us": "20.0", "status": "ok"}}
    rows, skipped = record.entry_rows([entry], old)
    assert rows == [] and len(skipped) == 1, (rows, skipped)
    assert "timed on another case" in skipped[0] and case.label in skipped[0], skipped


def test_by_step_times_every_sets_entries_of_a_step_together_in_the_course_order():
    from ropelab.grader.predict.timings import by_step

    made = [entries.Entry(set=s, module="m", index=i, step_id=step_id, label=f"{s}{i}")
            for s, i, step_id in (("held", 0, "02.1"), ("held", 1, "ramp.4"),
                                  ("training", 0, "ramp.4"), ("training", 1, "02.1"),
                                  ("held", 2, "00.1"))]
    assert [(e.set, e.step_id) for e in by_step(made)] == [
        ("held", "ramp.4"), ("training", "ramp.4"), ("held", "00.1"), ("held", "02.1"),
        ("training", "02.1")]
