"""The ladder of notebook 08 (the backward pass): a solution for every step, and wrong attempts
the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step]`` (it must pass) and every
function of ``WRONG[step]`` (each must be rejected with a verdict containing the fragment next
to it).  The steps climb: the inverse rotation of one head's gradient; the RMSNorm backward of
one head (a warp reduction of dn * n); the weight gradient's per-block partial sums in shared
memory; the launch of both stages of that reduction.
"""

import math

import numpy as np

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part


# --- step 1: the inverse rotation ----------------------------------------------------------


@cuda.jit(fastmath=True)
def inverse_rotate_head(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        g0 = dy[first]
        g1 = dy[first + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = g0 * c + g1 * s  # R(theta)^T: the forward's turn, undone
        out[first + 1] = -g0 * s + g1 * c


@cuda.jit(fastmath=True)
def rotate_forward(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        g0 = dy[first]
        g1 = dy[first + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = g0 * c - g1 * s  # the forward's matrix, copied into the backward
        out[first + 1] = g0 * s + g1 * c


@cuda.jit(fastmath=True)
def cos_sin_swapped(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        g0 = dy[first]
        g1 = dy[first + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        s = math.cos(angle)  # the names crossed
        c = math.sin(angle)
        out[first] = g0 * c + g1 * s
        out[first + 1] = -g0 * s + g1 * c


@cuda.jit(fastmath=True)
def angle_of_the_row_number(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        g0 = dy[first]
        g1 = dy[first + 1]
        angle = float32(row) * inv_freq[lane]  # positions never read
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = g0 * c + g1 * s
        out[first + 1] = -g0 * s + g1 * c


@cuda.jit(fastmath=True)
def angle_in_float64(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        g0 = dy[first]
        g1 = dy[first + 1]
        angle = positions[row] * inv_freq[lane]  # int32 * float32: Numba computes it in float64
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = g0 * c + g1 * s
        out[first + 1] = -g0 * s + g1 * c


# --- step 2: the RMSNorm backward of one head ----------------------------------------------


@cuda.jit(fastmath=True)
def rms_norm_backward_head(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:  # warp-uniform: every lane of a warp reaches the shuffles, or none
        first = row * 64 + lane * 2
        d0 = dn[first]
        d1 = dn[first + 1]
        n0 = n[first]
        n1 = n[first + 1]
        s = d0 * n0 + d1 * n1
        s += cuda.shfl_xor_sync(FULL_MASK, s, 16)  # after five steps every lane holds the sum
        s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
        mean = s / float32(64.0)
        inv_r = float32(1.0) / r[row]
        out[first] = (d0 - n0 * mean) * inv_r
        out[first + 1] = (d1 - n1 * mean) * inv_r


@cuda.jit(fastmath=True)
def mean_term_forgotten(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        inv_r = float32(1.0) / r[row]
        out[first] = dn[first] * inv_r  # as if r did not depend on x
        out[first + 1] = dn[first + 1] * inv_r


@cuda.jit(fastmath=True)
def sum_to_lane_zero(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        d0 = dn[first]
        d1 = dn[first + 1]
        n0 = n[first]
        n1 = n[first + 1]
        s = d0 * n0 + d1 * n1
        s += cuda.shfl_down_sync(FULL_MASK, s, 16)  # a reduction to lane 0 only
        s += cuda.shfl_down_sync(FULL_MASK, s, 8)
        s += cuda.shfl_down_sync(FULL_MASK, s, 4)
        s += cuda.shfl_down_sync(FULL_MASK, s, 2)
        s += cuda.shfl_down_sync(FULL_MASK, s, 1)
        mean = s / float32(64.0)
        inv_r = float32(1.0) / r[row]
        out[first] = (d0 - n0 * mean) * inv_r
        out[first + 1] = (d1 - n1 * mean) * inv_r


@cuda.jit(fastmath=True)
def sum_not_mean(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        d0 = dn[first]
        d1 = dn[first + 1]
        n0 = n[first]
        n1 = n[first + 1]
        s = d0 * n0 + d1 * n1
        s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
        inv_r = float32(1.0) / r[row]
        out[first] = (d0 - n0 * s) * inv_r  # the sum where the mean belongs
        out[first + 1] = (d1 - n1 * s) * inv_r


@cuda.jit(fastmath=True)
def times_r(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        d0 = dn[first]
        d1 = dn[first + 1]
        n0 = n[first]
        n1 = n[first + 1]
        s = d0 * n0 + d1 * n1
        s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
        mean = s / float32(64.0)
        out[first] = (d0 - n0 * mean) * r[row]  # r multiplied where it divides
        out[first + 1] = (d1 - n1 * mean) * r[row]


# --- step 3: the weight gradient's partial rows --------------------------------------------


@cuda.jit(fastmath=True)
def dw_partials(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64  # group t // 64 takes every fourth row of the block's
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x  # the next rows this block owns
    part = cuda.shared.array(256, float32)
    part[t] = acc
    cuda.syncthreads()  # all four groups' sums stored before the first group reads them
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def partials_unsynchronized(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    part = cuda.shared.array(256, float32)
    part[t] = acc  # no barrier: the first group may read a slot before it is stored
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def first_group_only(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = acc  # the other three groups' sums are dropped


@cuda.jit(fastmath=True)
def no_grid_stride(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    if row < rows:  # one row per thread: the rows past the grid's first 4 * blocks are lost
        acc = dz[row * 64 + column] * n[row * 64 + column]
    part = cuda.shared.array(256, float32)
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def an_extra_barrier_for_thread_0(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    part = cuda.shared.array(256, float32)
    part[t] = acc
    cuda.syncthreads()
    if t == 0:
        cuda.syncthreads()  # only thread 0 comes here: on a GPU it waits for ever
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def three_groups_summed(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    part = cuda.shared.array(256, float32)
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t]  # group 3?

# --- step 4: both stages launched (stage two: ropelab's reduce_partials, compiled) ----------


def launch_dw(dz, n, out, tokens, heads):
    """Stage one over every head of every token, then one reduction of its partial rows."""
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)  # a block per four rows, capped: stage two stays short
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    column_blocks = (64 + 31) // 32  # stage two: a block per 32 columns of dw
    reduce_partials_kernel[column_blocks, REDUCE_THREADS](partials, out)


def launch_one_head(dz, n, out, tokens, heads):
    rows = tokens  # every token, but only its first head's worth of rows
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_partials_into_dw(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = (rows + 3) // 4
    dw_partials[blocks, 256](dz, n, out, rows)  # stage one's partial rows straight into dw


def launch_thread_per_row(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = 1
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256 * rows](dz, n, partials, rows)  # a block of 256 per row: past 1024
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_past_the_cap(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = 4 * ((rows + 3) // 4)  # four times the cap: the extra blocks sum nothing
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_stage_two_only(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)  # stage one is missing
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)



@cuda.jit(fastmath=True)
def atomics_into_dw(partials, out):
    c = cuda.grid(1)
    if c < partials.shape[0]:
        cuda.atomic.add(out, c % 64, partials[c])  # into an out nobody zeroed


def launch_own_second_stage(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    atomics_into_dw[blocks, 64](partials, out)  # not the step's reduce_partials_kernel

SOLUTIONS = {
    "08.1": inverse_rotate_head,
    "08.2": rms_norm_backward_head,
    "08.3": dw_partials,
    "08.4": launch_dw,
}

WRONG = {
    "08.1": [(rotate_forward, "forward way"), (cos_sin_swapped, "swapped"),
             (angle_of_the_row_number, "row number"),
             (angle_in_float64, "positions[row] (int32) * inv_freq[lane] (float32)")],
    "08.2": [(mean_term_forgotten, "mean term is missing"), (sum_to_lane_zero, "only lane 0"),
             (sum_not_mean, "divided by"), (times_r, "multiplied by r")],
    "08.3": [(partials_unsynchronized, "race"), (first_group_only, "one group"),
             (no_grid_stride, "first four rows"),
             (an_extra_barrier_for_thread_0, "thread 0 waits at"),
             (three_groups_summed, "group 3's sum is missing")],
    "08.4": [(launch_one_head, "every head"), (launch_partials_into_dw, "was never launched"),
             (launch_thread_per_row, "limit is 1024"),
             (launch_past_the_cap, "more than the step's cap of ceil(rows / 4)"),
             (launch_stage_two_only,
              "the partial rows reduce_partials_kernel summed were never written"),
             (launch_own_second_stage, "the step gives any other")],
}
