"""Set F, notebook 08 (08_backward_pass.ipynb): steps 08.1 .. 08.4."""
import ropelab  # noqa: F401

import math

import numpy as np
from numba import cuda, float32, int64

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF


# ---- 08.1: inverse_rotate_head ------------------------------------------------------------
@cuda.jit(fastmath=True)
def inverse_plain(dy, out, positions, inv_freq, rows):
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
def inverse_negative_angle(dy, out, positions, inv_freq, rows):
    # R(theta)^T = R(-theta): the forward formula with the angle negated
    warp = cuda.grid(1) >> 5
    if warp >= rows:
        return
    lane = cuda.threadIdx.x & 31
    theta = -(float32(positions[warp]) * inv_freq[lane])
    c = math.cos(theta)
    s = math.sin(theta)
    k = warp * 64 + lane * 2
    a = dy[k]
    b = dy[k + 1]
    out[k] = a * c - b * s
    out[k + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def inverse_warp_stride(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    w = cuda.grid(1) // 32
    step = cuda.gridsize(1) // 32
    f = inv_freq[lane]
    while w < rows:
        ang = float32(positions[w]) * f
        s = math.sin(ang)
        c = math.cos(ang)
        i = w * 64 + lane + lane
        g0 = dy[i]
        g1 = dy[i + 1]
        out[i + 1] = g1 * c - g0 * s
        out[i] = g0 * c + g1 * s
        w += step


# ---- 08.2: rms_norm_backward_head ---------------------------------------------------------
@cuda.jit(fastmath=True)
def rms_bwd_xor(dn, n, r, out, rows):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        i = row * 64 + 2 * lane
        dn0 = dn[i]
        dn1 = dn[i + 1]
        n0 = n[i]
        n1 = n[i + 1]
        s = dn0 * n0 + dn1 * n1
        m = 16
        while m > 0:
            s += cuda.shfl_xor_sync(FULL_MASK, s, m)
            m //= 2
        mean = s / float32(64.0)
        rr = r[row]
        out[i] = (dn0 - n0 * mean) / rr
        out[i + 1] = (dn1 - n1 * mean) / rr


@cuda.jit(fastmath=True)
def rms_bwd_down_bcast_recip(dn, n, r, out, rows):
    warp = cuda.grid(1) >> 5
    lane = cuda.threadIdx.x & 31
    if warp >= rows:
        return
    k = warp * 64 + lane * 2
    a0 = dn[k]
    a1 = dn[k + 1]
    b0 = n[k]
    b1 = n[k + 1]
    s = a0 * b0 + a1 * b1
    s += cuda.shfl_down_sync(FULL_MASK, s, 16)
    s += cuda.shfl_down_sync(FULL_MASK, s, 8)
    s += cuda.shfl_down_sync(FULL_MASK, s, 4)
    s += cuda.shfl_down_sync(FULL_MASK, s, 2)
    s += cuda.shfl_down_sync(FULL_MASK, s, 1)
    s = cuda.shfl_sync(FULL_MASK, s, 0)
    mean = s * float32(1.0 / 64.0)
    inv_r = float32(1.0) / r[warp]
    out[k] = (a0 - b0 * mean) * inv_r
    out[k + 1] = (a1 - b1 * mean) * inv_r


@cuda.jit(fastmath=True)
def rms_bwd_tuple_masks(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    head = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // 32
    if head < rows:
        base = head * 64
        j = base + lane * 2
        p = dn[j] * n[j]
        p += dn[j + 1] * n[j + 1]
        for m in (1, 2, 4, 8, 16):
            p += cuda.shfl_xor_sync(FULL_MASK, p, m)
        mean = p / float32(64.0)
        out[j] = (dn[j] - mean * n[j]) / r[head]
        out[j + 1] = (dn[j + 1] - mean * n[j + 1]) / r[head]


# ---- 08.3: dw_partials --------------------------------------------------------------------
@cuda.jit(fastmath=True)
def dw_partials_plain(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    c = t % 64
    row = b * 4 + t // 64
    step = 4 * cuda.gridDim.x
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + c] * n[row * 64 + c]
        row += step
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
    r = cuda.blockIdx.x * 4 + group
    acc = float32(0.0)
    while r < rows:
        k = r * 64 + col
        acc += dz[k] * n[k]
        r += cuda.gridDim.x * 4
    part[t] = acc
    cuda.syncthreads()
    if t < 128:
        part[t] += part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64]


@cuda.jit(fastmath=True)
def dw_partials_loop_sum(dz, n, out, rows):
    part = cuda.shared.array((4, 64), float32)
    t = cuda.threadIdx.x
    g = t // 64
    c = t - g * 64
    row = int64(cuda.blockIdx.x) * 4 + g
    stride = int64(cuda.gridDim.x) * 4
    total = float32(0.0)
    while row < rows:
        total += dz[row * 64 + c] * n[row * 64 + c]
        row += stride
    part[g, c] = total
    cuda.syncthreads()
    if g == 0:
        s = float32(0.0)
        for k in range(4):
            s += part[k, c]
        out[cuda.blockIdx.x * 64 + c] = s


# ---- 08.4: launch_dw ----------------------------------------------------------------------
def launch_dw_cap1024(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials_plain[blocks, 256](dz, n, partials, int64(rows))
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_dw_cap8(dz, n, out, tokens, heads):
    # few blocks: every block's grid-stride loop covers several groups of four rows
    rows = tokens * heads
    blocks = max(1, min(-(-rows // 4), 8))
    partials = cuda.device_array(shape=(blocks * 64,), dtype=np.float32)
    dw_partials_tree[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_quarter(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = max(1, math.ceil(rows / 16))  # four row groups per block
    blocks = min(blocks, math.ceil(rows / 4))
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_loop_sum[blocks, 256](dz, n, partials, int64(rows))
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


ENTRIES = [
    ("08.1", "plain", inverse_plain),
    ("08.1", "negative_angle", inverse_negative_angle),
    ("08.1", "warp_stride", inverse_warp_stride),
    ("08.2", "xor_loop", rms_bwd_xor),
    ("08.2", "down_broadcast_recip", rms_bwd_down_bcast_recip),
    ("08.2", "tuple_masks_ascending", rms_bwd_tuple_masks),
    ("08.3", "plain", dw_partials_plain),
    ("08.3", "tree_two_barriers", dw_partials_tree),
    ("08.3", "shared_2d_loop", dw_partials_loop_sum),
    ("08.4", "cap_1024", launch_dw_cap1024),
    ("08.4", "cap_8", launch_dw_cap8),
    ("08.4", "quarter_rows", launch_dw_quarter),
]
