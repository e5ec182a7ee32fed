"""Notebook 08: inverse rotation, RMSNorm backward, dw partials, the two-stage launch."""
import ropelab  # noqa: F401

import math

import numpy as np
from numba import cuda, float32

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF


# ---------------- 08.1 inverse rotation
@cuda.jit(fastmath=True)
def inverse_rotate_head(dy, out, positions, inv_freq, rows):
    gid = cuda.grid(1)
    w = gid // 32
    lane = cuda.threadIdx.x % 32
    if w < rows:
        i = w * 64 + 2 * lane
        theta = float32(positions[w]) * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        y0 = dy[i]
        y1 = dy[i + 1]
        out[i] = y0 * c + y1 * s
        out[i + 1] = y1 * c - y0 * s


@cuda.jit(fastmath=True)
def inverse_rotate_head_neg(dy, out, positions, inv_freq, rows):
    # the forward rotation by -theta
    w = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    lane = cuda.threadIdx.x & 31
    if w >= rows:
        return
    theta = -(float32(positions[w]) * inv_freq[lane])
    c = math.cos(theta)
    s = math.sin(theta)
    e = w * 64 + lane + lane
    a = dy[e]
    b = dy[e + 1]
    out[e] = a * c - b * s
    out[e + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def inverse_rotate_head_stride(dy, out, positions, inv_freq, rows):
    # grid-stride over heads, one warp at a time
    lane = cuda.threadIdx.x & 31
    w = cuda.grid(1) >> 5
    warps = cuda.gridsize(1) >> 5
    while w < rows:
        f = inv_freq[lane]
        th = f * float32(positions[w])
        e = 64 * w + 2 * lane
        y0 = dy[e]
        y1 = dy[e + 1]
        sn = math.sin(th)
        cs = math.cos(th)
        out[e + 1] = y1 * cs - y0 * sn
        out[e] = y0 * cs + y1 * sn
        w += warps


# ---------------- 08.2 RMSNorm backward
@cuda.jit(fastmath=True)
def rms_norm_backward_head(dn, n, r, out, rows):
    gid = cuda.grid(1)
    w = gid // 32
    lane = cuda.threadIdx.x % 32
    if w < rows:
        i = w * 64 + 2 * lane
        d0 = dn[i]
        d1 = dn[i + 1]
        n0 = n[i]
        n1 = n[i + 1]
        s = d0 * n0 + d1 * n1
        m = 16
        while m > 0:
            s += cuda.shfl_xor_sync(FULL_MASK, s, m)
            m //= 2
        mean = s / float32(64.0)
        rr = r[w]
        out[i] = (d0 - n0 * mean) / rr
        out[i + 1] = (d1 - n1 * mean) / rr


@cuda.jit(fastmath=True)
def rms_norm_backward_head_recip(dn, n, r, out, rows):
    # unrolled butterfly, reciprocal of r once, early return
    w = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    lane = cuda.threadIdx.x & 31
    if w >= rows:
        return
    e = w * 64 + lane * 2
    a = n[e]
    b = n[e + 1]
    ga = dn[e]
    gb = dn[e + 1]
    s = ga * a + gb * b
    s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
    mean = s * float32(0.015625)
    inv_r = float32(1.0) / r[w]
    out[e] = (ga - a * mean) * inv_r
    out[e + 1] = (gb - b * mean) * inv_r


# ---------------- 08.3 dw partials
@cuda.jit(fastmath=True)
def dw_partials(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    col = t % 64
    row = b * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        k = row * 64 + col
        acc += dz[k] * n[k]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[b * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def dw_partials_tree(dz, n, out, rows):
    # 2-D shared array (group, column), folded by a two-step tree with barriers
    part = cuda.shared.array((4, 64), float32)
    t = cuda.threadIdx.x
    grp = t >> 6
    col = t & 63
    step = cuda.gridDim.x * 4
    acc = float32(0.0)
    row = cuda.blockIdx.x * 4 + grp
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += step
    part[grp, col] = acc
    cuda.syncthreads()
    if grp < 2:
        part[grp, col] += part[grp + 2, col]
    cuda.syncthreads()
    if grp == 0:
        out[cuda.blockIdx.x * 64 + col] = part[0, col] + part[1, col]


# ---------------- 08.4 two-stage launch
def launch_dw(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_dw_small_grid(dx, n, out, tokens, heads):
    # a fixed small grid of 8 blocks at most: more rows per block, fewer partial rows
    rows = tokens * heads
    blocks = max(1, min(8, math.ceil(rows / 4)))
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_tree[blocks, 256](dx, n, partials, rows)
    reduce_partials_kernel[math.ceil(64 / 32), REDUCE_THREADS](partials, out)


def launch_dw_half(dz, n, out, tokens, heads):
    # half the maximum grid: each block takes about eight rows
    rows = tokens * heads
    blocks = max(1, -(-rows // 8))
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


ENTRIES = [
    ("08.1", "transpose", inverse_rotate_head),
    ("08.1", "negative_angle", inverse_rotate_head_neg),
    ("08.1", "warp_grid_stride", inverse_rotate_head_stride),
    ("08.2", "plain", rms_norm_backward_head),
    ("08.2", "unrolled_reciprocal", rms_norm_backward_head_recip),
    ("08.3", "four_adds", dw_partials),
    ("08.3", "tree_2d_shared", dw_partials_tree),
    ("08.4", "cap1024", launch_dw),
    ("08.4", "cap8_tree_kernel", launch_dw_small_grid),
    ("08.4", "eight_rows_per_block", launch_dw_half),
]
