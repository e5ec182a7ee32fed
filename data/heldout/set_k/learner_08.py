import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numpy as np
from numba import cuda, float32, int64

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL = 0xFFFFFFFF


# ---- 08.1 inverse_rotate_head ----
@cuda.jit
def inverse_rotate_head(dy, out, positions, inv_freq, rows):
    t = cuda.threadIdx.x
    lane = t & 31
    row = cuda.blockIdx.x * 4 + (t >> 5)
    if row < rows:
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        e = row * 64 + 2 * lane
        g0 = dy[e]
        g1 = dy[e + 1]
        out[e] = g0 * c + g1 * s
        out[e + 1] = -g0 * s + g1 * c


@cuda.jit
def inverse_rotate_head_ret(dy, out, positions, inv_freq, rows):
    gid = cuda.grid(1)
    row = gid >> 5
    if row >= rows:
        return
    lane = gid & 31
    e = gid * 2
    g0 = dy[e]
    g1 = dy[e + 1]
    th = float32(positions[row]) * inv_freq[lane]
    s = math.sin(th)
    c = math.cos(th)
    out[e] = cuda.fma(g0, c, g1 * s)
    out[e + 1] = cuda.fma(g1, c, -(g0 * s))


@cuda.jit
def inverse_rotate_head_neg(dy, out, positions, inv_freq, rows):
    # rotate forward by the negative angle
    gid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = gid // 32
    if row < rows:
        lane = gid - row * 32
        th = -(float32(positions[row]) * inv_freq[lane])
        c = math.cos(th)
        s = math.sin(th)
        g0 = dy[row * 64 + 2 * lane]
        g1 = dy[row * 64 + 2 * lane + 1]
        out[row * 64 + 2 * lane] = g0 * c - g1 * s
        out[row * 64 + 2 * lane + 1] = g0 * s + g1 * c


# ---- 08.2 rms_norm_backward_head ----
@cuda.jit
def rms_norm_backward_head(dn, n, r, out, rows):
    t = cuda.threadIdx.x
    lane = t & 31
    row = cuda.blockIdx.x * 4 + (t >> 5)
    if row < rows:
        e = row * 64 + 2 * lane
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        s = d0 * n0 + d1 * n1
        for m in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL, s, m)
        mean = s / float32(64.0)
        rr = r[row]
        out[e] = (d0 - n0 * mean) / rr
        out[e + 1] = (d1 - n1 * mean) / rr


@cuda.jit
def rms_norm_backward_head_ret(dn, n, r, out, rows):
    gid = cuda.grid(1)
    row = gid >> 5
    if row >= rows:
        return
    e = gid << 1
    d0 = dn[e]
    n0 = n[e]
    d1 = dn[e + 1]
    n1 = n[e + 1]
    inv_r = float32(1.0) / r[row]
    s = cuda.fma(d0, n0, d1 * n1)
    m = 16
    while m > 0:
        s += cuda.shfl_xor_sync(FULL, s, m)
        m >>= 1
    mean = s * float32(0.015625)
    out[e] = cuda.fma(-n0, mean, d0) * inv_r
    out[e + 1] = cuda.fma(-n1, mean, d1) * inv_r


# ---- 08.3 dw_partials ----
@cuda.jit
def dw_partials(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    col = t & 63
    r = b * 4 + (t >> 6)
    step = 4 * cuda.gridDim.x
    acc = float32(0.0)
    while r < rows:
        acc += dz[r * 64 + col] * n[r * 64 + col]
        r += step
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[b * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit
def dw_partials_tree(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t % 64
    grp = t // 64
    acc = float32(0.0)
    r = cuda.blockIdx.x * 4 + grp
    while r < rows:
        k = r * 64 + col
        acc = cuda.fma(dz[k], n[k], acc)
        r += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t < 128:
        part[t] += part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64]


# ---- 08.4 launch_dw ----
def launch_dw(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, int64(rows))
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_dw_few(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min(-(-rows // 4), 16)
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_tree[blocks, 256](dz, n, partials, int64(rows))
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_one(dz, n, out, tokens, heads):
    rows = tokens * heads
    partials = cuda.device_array(64, np.float32)
    dw_partials[1, 256](dz, n, partials, int64(rows))
    reduce_partials_kernel[2, 256](partials, out)


ENTRIES = [
    ("08.1", "guard_transpose", inverse_rotate_head),
    ("08.1", "grid1_fma_early_return", inverse_rotate_head_ret),
    ("08.1", "negative_angle_div32", inverse_rotate_head_neg),
    ("08.2", "guard_tuple_butterfly", rms_norm_backward_head),
    ("08.2", "early_return_recip_fma", rms_norm_backward_head_ret),
    ("08.3", "stride_rows_sum4", dw_partials),
    ("08.3", "fma_tree_in_shared", dw_partials_tree),
    ("08.4", "blocks_min_1024", launch_dw),
    ("08.4", "16_blocks_tree", launch_dw_few),
    ("08.4", "single_block", launch_dw_one),
]
