"""Round Q's "right values, wrong method" kernels, closed by census gates on tables the census
already has (``sfu``, ``shfl_ops``, ``atomics``) and a source rule, each tested both ways: the step's solution
passes, and the same solution rewritten to the other method is refused with words that name it.

* 05.1 asks for one cos and one sin: a cos written as ``sin(a + pi / 2)`` is refused;
* 05.2 and 05.4 ask for one pow a thread, then ``f * stride_ratio``: a kernel that never reads
  ``stride_ratio`` (its second pow of the same base shares the first one's lg2, so the pow count
  saw one) is refused;
* 06.2 asks the warps' sums to meet by plain stores and a barrier, and every thread to add the
  four itself: an atomic add on shared memory is refused, and so is a total that one thread
  adds for the others;
* 06.1, 06.2, 08.2 and 10.3 ask for the butterfly: a ``shfl_down`` tree and a broadcast are
  refused.
"""

import inspect

import pytest

import ropelab
from ropelab.grader import grading, steps, verify

from cells import define

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's grading")

HEADER = '''
import math
from numba import cuda, float32, uint32, uint64
'''


def _solution(step_id: str, name: str):
    """The step's solution module and the source of its function ``name``."""
    module = verify.load_solution(verify.solution_path(steps.get(step_id)))
    return module, inspect.getsource(getattr(module, name).py_func)


def _rewritten(step_id: str, name: str, *swaps):
    """The solution's ``name`` with each ``(old, new)`` of ``swaps`` made (each must occur)."""
    module, source = _solution(step_id, name)
    for old, new in swaps:
        assert old in source, (step_id, old)
        source = source.replace(old, new)
    names = {k: getattr(module, k) for k in ("FULL_MASK", "WARPS_PER_ROW") if hasattr(module, k)}
    return define(source, name, HEADER, **names)


def _refused(step_id: str, kernel, words: str):
    verdict = grading.grade(steps.get(step_id), kernel)
    text = str(verdict)
    assert not verdict.passed, text
    assert "the values are right, but" in text and words in text, text


def _passes(step_id: str, name: str):
    verdict = grading.grade(steps.get(step_id), _rewritten(step_id, name))
    assert verdict.passed, str(verdict)


BUTTERFLY = "cuda.shfl_xor_sync(FULL_MASK, {v}, {m})"


def _tree_and_broadcast(v: str):
    """The five butterfly steps of ``v`` as a shfl_down tree, then lane 0's sum broadcast."""
    swaps = [(BUTTERFLY.format(v=v, m=m), f"cuda.shfl_down_sync(FULL_MASK, {v}, {m})")
             for m in (16, 8, 4, 2)]
    swaps.append((f"{v} += " + BUTTERFLY.format(v=v, m=1),
                  f"{v} += cuda.shfl_down_sync(FULL_MASK, {v}, 1)\n"
                  f"        {v} = cuda.shfl_sync(FULL_MASK, {v}, 0)"))
    return swaps


def test_05_1_a_cos_written_as_a_shifted_sin_is_refused():
    _passes("05.1", "rope_one_angle")
    kernel = _rewritten("05.1", "rope_one_angle", (
        "c = math.cos(angle)", "c = math.sin(angle + float32(1.5707963267948966))"))
    _refused("05.1", kernel, "the PTX computes no cos")


def test_05_4_a_second_pow_in_place_of_stride_ratio_is_refused():
    _passes("05.4", "rope_pair_sincos_heads")
    kernel = _rewritten("05.4", "rope_pair_sincos_heads", (
        "f = f * stride_ratio",
        "f = f * math.pow(base, exponent_step * float32(stride))"))
    _refused("05.4", kernel, "never reads `stride_ratio`")


def test_06_2_sums_met_through_a_shared_atomic_are_refused():
    _passes("06.2", "rms_norm_256")
    kernel = _rewritten("06.2", "rms_norm_256", (
        "    if lane == 0:\n        partial[warp] = ss\n"
        "    cuda.syncthreads()  # the four sums are written before anyone adds them\n"
        "    total = partial[0] + partial[1] + partial[2] + partial[3]\n",
        "    if t < 4:\n        partial[t] = float32(0.0)\n    cuda.syncthreads()\n"
        "    if lane == 0:\n        cuda.atomic.add(partial, warp, ss)\n"
        "    cuda.syncthreads()\n"
        "    total = partial[0] + partial[1] + partial[2] + partial[3]\n"))
    _refused("06.2", kernel, "an atomic add on shared memory")


@pytest.mark.parametrize("step_id, name, v", [
    ("06.1", "my_rms_norm_warp", "ss"),
    ("08.2", "rms_norm_backward_head", "s"),
])
def test_a_shfl_down_tree_and_a_broadcast_are_refused_where_the_step_asks_for_the_butterfly(
        step_id, name, v):
    _passes(step_id, name)
    kernel = _rewritten(step_id, name, *_tree_and_broadcast(v))
    _refused(step_id, kernel, "shuffles that are not the butterfly's")


def test_06_2_a_total_one_thread_adds_for_the_others_is_refused():
    kernel = _rewritten("06.2", "rms_norm_256", (
        "    total = partial[0] + partial[1] + partial[2] + partial[3]\n",
        "    if t == 0:\n"
        "        partial[0] = partial[0] + partial[1] + partial[2] + partial[3]\n"
        "    cuda.syncthreads()\n"
        "    total = partial[0]\n"))
    _refused("06.2", kernel, "read only 1 shared element: the step asks every thread to read "
                             "the 4 warp sums itself")
