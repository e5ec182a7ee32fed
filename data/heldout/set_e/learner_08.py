"""Notebook 08 (backward pass), steps 08.1 .. 08.4."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numpy as np
from numba import cuda, float32

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------- 08.1 inverse_rotate_head
@cuda.jit(fastmath=True)
def inverse_rotate_plain(dy, out, positions, inv_freq, rows):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row >= rows:
        return
    angle = float32(positions[row]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    e = row * 64 + 2 * lane
    g0 = dy[e]
    g1 = dy[e + 1]
    out[e] = g0 * c + g1 * s
    out[e + 1] = -g0 * s + g1 * c


@cuda.jit(fastmath=True)
def inverse_rotate_negative_angle(dy, out, positions, inv_freq, rows):
    # the forward rotation, by -theta
    lane = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if row < rows:
        base = row * 64 + lane + lane
        g0 = dy[base]
        g1 = dy[base + 1]
        theta = -(float32(positions[row]) * inv_freq[lane])
        c = math.cos(theta)
        s = math.sin(theta)
        out[base] = g0 * c - g1 * s
        out[base + 1] = g0 * s + g1 * c


# ---------------------------------------------------------------- 08.2 rms_norm_backward_head
@cuda.jit(fastmath=True)
def rms_back_plain(dn, n, r, out, rows):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row >= rows:
        return
    e = row * 64 + 2 * lane
    d0 = dn[e]
    d1 = dn[e + 1]
    n0 = n[e]
    n1 = n[e + 1]
    s = d0 * n0 + d1 * n1
    for m in (16, 8, 4, 2, 1):
        s += cuda.shfl_xor_sync(FULL_MASK, s, m)
    mean = s / float32(64.0)
    rr = r[row]
    out[e] = (d0 - n0 * mean) / rr
    out[e + 1] = (d1 - n1 * mean) / rr


@cuda.jit(fastmath=True)
def rms_back_reciprocal(dn, n, r, out, rows):
    tid = cuda.grid(1)
    row = tid >> 5
    lane = tid & 31
    if row < rows:
        i0 = row * 64 + 2 * lane
        i1 = i0 + 1
        s = dn[i0] * n[i0] + dn[i1] * n[i1]
        m = 16
        while m > 0:
            s += cuda.shfl_xor_sync(FULL_MASK, s, m)
            m >>= 1
        inv_r = float32(1.0) / r[row]
        mean = s * float32(0.015625)
        out[i0] = (dn[i0] - n[i0] * mean) * inv_r
        out[i1] = (dn[i1] - n[i1] * mean) * inv_r


# ---------------------------------------------------------------- 08.3 dw_partials
@cuda.jit(fastmath=True)
def dw_partials_plain(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    col = t % 64
    row = b * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[b * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def dw_partials_tree(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t & 63
    group = t >> 6
    acc = float32(0.0)
    for row in range(cuda.blockIdx.x * 4 + group, rows, 4 * cuda.gridDim.x):
        k = row * 64 + col
        acc += dz[k] * n[k]
    part[t] = acc
    cuda.syncthreads()
    if t < 128:
        part[t] = part[t] + part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64]


@cuda.jit(fastmath=True)
def dw_partials_first_group_loop(dz, n, out, rows):
    # the first group adds the four slots of its column in a loop
    part = cuda.shared.array((4, 64), float32)
    t = cuda.threadIdx.x
    col = t % 64
    g = t // 64
    stride = 4 * cuda.gridDim.x
    row = cuda.blockIdx.x * 4 + g
    acc = float32(0.0)
    while row < rows:
        acc += n[row * 64 + col] * dz[row * 64 + col]
        row += stride
    part[g, col] = acc
    cuda.syncthreads()
    if g == 0:
        total = float32(0.0)
        for k in range(4):
            total += part[k, col]
        out[cuda.blockIdx.x * 64 + col] = total


# ---------------------------------------------------------------- 08.4 launch_dw
def launch_dw_cap1024(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials_plain[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_dw_cap64(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = max(1, min(-(-rows // 4), 64))
    partials = cuda.device_array(shape=(blocks * 64,), dtype=np.float32)
    dw_partials_tree[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_sixteen_rows(dz, n, out, tokens, heads):
    # about 16 rows a block (4 trips of the loop per group)
    rows = tokens * heads
    blocks = max(1, math.ceil(rows / 16))
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_first_group_loop[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, 256](partials, out)



# ---------------------------------------------------------------- extra approaches
@cuda.jit(fastmath=True)
def inverse_rotate_laneid(dy, out, positions, inv_freq, rows):
    lane = cuda.laneid
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row >= rows:
        return
    f = inv_freq[lane]
    p = float32(positions[row])
    i0 = row * 64 + lane * 2
    g0 = dy[i0]
    g1 = dy[i0 + 1]
    s = math.sin(p * f)
    c = math.cos(p * f)
    out[i0 + 1] = g1 * c - g0 * s
    out[i0] = g0 * c + g1 * s


@cuda.jit(fastmath=True)
def rms_back_down_broadcast(dn, n, r, out, rows):
    lane = cuda.laneid
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row >= rows:
        return
    i0 = row * 64 + 2 * lane
    d0 = dn[i0]
    d1 = dn[i0 + 1]
    n0 = n[i0]
    n1 = n[i0 + 1]
    s = d0 * n0 + d1 * n1
    s += cuda.shfl_down_sync(FULL_MASK, s, 16)
    s += cuda.shfl_down_sync(FULL_MASK, s, 8)
    s += cuda.shfl_down_sync(FULL_MASK, s, 4)
    s += cuda.shfl_down_sync(FULL_MASK, s, 2)
    s += cuda.shfl_down_sync(FULL_MASK, s, 1)
    s = cuda.shfl_sync(FULL_MASK, s, 0)
    mean = s / float32(64.0)
    out[i0] = (d0 - mean * n0) / r[row]
    out[i0 + 1] = (d1 - mean * n1) / r[row]

ENTRIES = [
    ("08.1", "transpose_formula", inverse_rotate_plain),
    ("08.1", "negative_angle_if", inverse_rotate_negative_angle),
    ("08.2", "unrolled_tuple_butterfly", rms_back_plain),
    ("08.2", "while_butterfly_reciprocal", rms_back_reciprocal),
    ("08.3", "while_four_adds", dw_partials_plain),
    ("08.3", "range_loop_tree", dw_partials_tree),
    ("08.3", "shared_2d_group0_loop", dw_partials_first_group_loop),
    ("08.4", "cap_1024", launch_dw_cap1024),
    ("08.4", "cap_64", launch_dw_cap64),
    ("08.4", "sixteen_rows_a_block", launch_dw_sixteen_rows),
    ("08.1", "laneid_store_order", inverse_rotate_laneid),
    ("08.2", "shfl_down_broadcast", rms_back_down_broadcast),
]
