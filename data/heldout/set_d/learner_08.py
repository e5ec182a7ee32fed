"""Notebook 08 (backward pass), steps 08.1 .. 08.4."""
import math

import numpy as np
from numba import cuda, float32

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------- 08.1
@cuda.jit(fastmath=True)
def inverse_rotate_head(dy, out, positions, inv_freq, rows):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        i = row * 64 + 2 * lane
        g0 = dy[i]
        g1 = dy[i + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = g0 * c + g1 * s
        out[i + 1] = -g0 * s + g1 * c


@cuda.jit(fastmath=True)
def inverse_rotate_head_neg_angle(dy, out, positions, inv_freq, rows):
    row = cuda.grid(1) >> 5
    if row >= rows:
        return
    lane = cuda.threadIdx.x & 31
    # R(theta)^T is the turn by -theta: rotate forward by the negated angle
    angle = -(float32(positions[row]) * inv_freq[lane])
    c = math.cos(angle)
    s = math.sin(angle)
    i = row * 64 + lane + lane
    g0 = dy[i]
    g1 = dy[i + 1]
    out[i] = g0 * c - g1 * s
    out[i + 1] = g0 * s + g1 * c


# ---------------------------------------------------------------- 08.2
@cuda.jit(fastmath=True)
def rms_norm_backward_head(dn, n, r, out, rows):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        i = row * 64 + 2 * lane
        dn0 = dn[i]
        dn1 = dn[i + 1]
        n0 = n[i]
        n1 = n[i + 1]
        s = dn0 * n0 + dn1 * n1
        for m in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL_MASK, s, m)
        mean = s / float32(64.0)
        rr = r[row]
        out[i] = (dn0 - n0 * mean) / rr
        out[i + 1] = (dn1 - n1 * mean) / rr


@cuda.jit(fastmath=True)
def rms_norm_backward_head_recip(dn, n, r, out, rows):
    row = cuda.grid(1) >> 5
    if row >= rows:
        return
    lane = cuda.threadIdx.x & 31
    i = row * 64 + lane + lane
    inv_r = float32(1.0) / r[row]
    dn0 = dn[i]
    dn1 = dn[i + 1]
    n0 = n[i]
    n1 = n[i + 1]
    s = dn0 * n0 + dn1 * n1
    s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
    mean = s * float32(0.015625)
    out[i] = (dn0 - n0 * mean) * inv_r
    out[i + 1] = (dn1 - n1 * mean) * inv_r


# ---------------------------------------------------------------- 08.3
@cuda.jit(fastmath=True)
def dw_partials(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    c = t % 64
    row = b * 4 + t // 64
    step = 4 * cuda.gridDim.x
    acc = float32(0.0)
    while row < rows:
        k = row * 64 + c
        acc += dz[k] * n[k]
        row += step
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[b * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def dw_partials_tree(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    c = t & 63
    row = b * 4 + (t >> 6)
    step = cuda.gridDim.x * 4
    acc = float32(0.0)
    k = row * 64 + c
    kstep = step * 64
    end = rows * 64
    while k < end:
        acc += dz[k] * n[k]
        k += kstep
    part[t] = acc
    cuda.syncthreads()
    if t < 128:
        part[t] += part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[b * 64 + t] = part[t] + part[t + 64]


# ---------------------------------------------------------------- 08.4
def launch_dw(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_small_grid(dz, n, out, tokens, heads):
    # fewer, fuller blocks: each stage-one block walks 4 * 8 = 32 rows per trip of 8 blocks max
    rows = tokens * heads
    blocks = max(1, min(-(-rows // 16), 8))
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_tree[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_dw_cap_64(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min(-(-rows // 4), 64)
    partials = cuda.device_array((blocks * 64,), np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


ENTRIES = [
    ("08.1", "transposed_rotation", inverse_rotate_head),
    ("08.1", "negated_angle", inverse_rotate_head_neg_angle),
    ("08.2", "divide_by_r", rms_norm_backward_head),
    ("08.2", "reciprocal_r_unrolled", rms_norm_backward_head_recip),
    ("08.3", "four_group_sum", dw_partials),
    ("08.3", "flat_index_tree", dw_partials_tree),
    ("08.4", "cap_1024", launch_dw),
    ("08.4", "small_grid_tree", launch_dw_small_grid),
    ("08.4", "cap_64", launch_dw_cap_64),
]
