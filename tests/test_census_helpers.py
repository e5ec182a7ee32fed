"""A kernel that calls a helper compiles for the census however the helper's decorator is
spelt.

Set O's learner put 06.4's norm and rotation in a helper decorated ``@cuda.jit(fastmath=True)``
(no ``device=True``); the grader said the values were right and then that the census could not
compile it without a CUDA driver.  Only ``@cuda.jit(device=True)`` helpers were inlined for the
driverless compile; now every shipped helper is (``census.shipped._inline_device_helpers``).
"""

import pytest

import ropelab
from ropelab.grader import grading, steps

from cells import define

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's grading")

KERNEL = '''
import math
from numba import cuda, float32, uint64
from numba.cuda import jit as cjit
FULL_MASK = 0xFFFFFFFF

DECORATOR
def norm_rotate(a, b, ss, eps, w0, w1, angle):
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    a = a * scale * w0
    b = b * scale * w1
    c = math.cos(angle)
    s = math.sin(angle)
    return a * c - b * s, a * s + b * c

@cuda.jit(fastmath=True)
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    lane = cuda.threadIdx.x % 32
    w = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if w < total_warps:
        unit = uint64(w)
        token = unit // heads_per_token
        head = unit - token * heads_per_token
        first = unit * uint64(64) + uint64(lane * 2)
        a = qkv[first]
        b = qkv[first + uint64(1)]
        if head < heads_q + heads_k:
            weight = q_weight if head < heads_q else k_weight
            ss = a * a + b * b
            for k in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, k)
            angle = float32(positions[token]) * inv_freq[lane]
            x0, x1 = norm_rotate(a, b, ss, eps, weight[lane * 2], weight[lane * 2 + 1], angle)
            out[first] = x0
            out[first + uint64(1)] = x1
        else:
            out[first] = a
            out[first + uint64(1)] = b
'''


@pytest.mark.parametrize("decorator", [
    "@cuda.jit(device=True)",
    "@cuda.jit",
    "@cuda.jit(fastmath=True)",
    '@cuda.jit("UniTuple(float32, 2)(float32, float32, float32, float32, float32, float32, '
    'float32)", device=True)',
    '@cuda.jit(device=True, inline="never")',
    "@cjit(device=True)",
])
def test_a_06_4_kernel_whose_helper_is_decorated_DECORATOR_passes(decorator):
    kernel = define(KERNEL.replace("DECORATOR", decorator), "rope_fused_head")
    verdict = grading.grade(steps.get("06.4"), kernel)
    assert verdict.passed, str(verdict)
