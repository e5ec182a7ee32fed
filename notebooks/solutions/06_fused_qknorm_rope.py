"""Notebook 06's steps: solutions, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` runs ``SOLUTIONS[step_id]`` (it must pass) and every
function of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment
next to it).
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part


@cuda.jit(fastmath=True)
def my_rms_norm_warp(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:  # the same for the 32 lanes of a warp: the shuffles stay warp-uniform
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)  # each step adds the partner's partial sum
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]




@cuda.jit(fastmath=True)
def shuffle_down(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 16)  # a reduction to lane 0 only
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def wrong_lane_mask(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)  # 2 again where 1 belongs
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def float64_mean(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / 64.0 + eps)  # 64.0: a float64
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def idle_warps_run(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    first = row * 64 + lane * 2  # no row < rows: warps past the end read too
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    out[first] = a * scale * weight[lane * 2]
    out[first + 1] = b * scale * weight[lane * 2 + 1]


SOLUTIONS = {
    "06.1": my_rms_norm_warp,
}

WRONG = {
    "06.1": [
        (shuffle_down, "only lane 0 is right"),
        (wrong_lane_mask, "different sums"),
        (float64_mean, "float64 instructions"),
        (idle_warps_run, "out of bounds"),
    ],
}
