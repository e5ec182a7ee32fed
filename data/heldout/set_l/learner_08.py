import ropelab  # noqa: F401
import math

import numpy as np
from numba import cuda, float32

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF


# ---------------- 08.1 inverse_rotate_head ----------------
@cuda.jit(fastmath=True)
def inverse_rotate_head(dy, out, positions, inv_freq, rows):
    gid = cuda.grid(1)
    row = gid // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        i = row * 64 + 2 * lane
        theta = float32(positions[row]) * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        g0 = dy[i]
        g1 = dy[i + 1]
        out[i] = g0 * c + g1 * s
        out[i + 1] = g1 * c - g0 * s


@cuda.jit(fastmath=True)
def inverse_rotate_head_neg(dy, out, positions, inv_freq, rows):
    # the forward rotation by -theta; early return per warp
    lane = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if row >= rows:
        return
    theta = -(float32(positions[row]) * inv_freq[lane])
    c = math.cos(theta)
    s = math.sin(theta)
    i = row * 64 + lane * 2
    a = dy[i]
    b = dy[i + 1]
    out[i] = a * c - b * s
    out[i + 1] = a * s + b * c


@cuda.jit
def inverse_rotate_head_stride(dy, out, positions, inv_freq, rows):
    # warp-stride loop over heads, accurate sin/cos
    lane = cuda.threadIdx.x % 32
    row = cuda.grid(1) // 32
    step = cuda.gridsize(1) // 32
    while row < rows:
        i = row * 64 + 2 * lane
        ang = float32(positions[row]) * inv_freq[lane]
        s = math.sin(ang)
        c = math.cos(ang)
        out[i] = c * dy[i] + s * dy[i + 1]
        out[i + 1] = c * dy[i + 1] - s * dy[i]
        row += step


# ---------------- 08.2 rms_norm_backward_head ----------------
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
        acc = d0 * n0 + d1 * n1
        m = 16
        while m >= 1:
            acc += cuda.shfl_xor_sync(FULL_MASK, acc, m)
            m //= 2
        mean = acc / float32(64.0)
        rr = r[w]
        out[i] = (d0 - n0 * mean) / rr
        out[i + 1] = (d1 - n1 * mean) / rr


@cuda.jit(fastmath=True)
def rms_norm_backward_head_unrolled(dn, n, r, out, rows):
    lane = cuda.threadIdx.x & 31
    w = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) >> 5
    if w >= rows:
        return
    i = w * 64 + lane * 2
    d0 = dn[i]
    n0 = n[i]
    d1 = dn[i + 1]
    n1 = n[i + 1]
    acc = d0 * n0 + d1 * n1
    acc += cuda.shfl_xor_sync(FULL_MASK, acc, 16)
    acc += cuda.shfl_xor_sync(FULL_MASK, acc, 8)
    acc += cuda.shfl_xor_sync(FULL_MASK, acc, 4)
    acc += cuda.shfl_xor_sync(FULL_MASK, acc, 2)
    acc += cuda.shfl_xor_sync(FULL_MASK, acc, 1)
    inv_r = float32(1.0) / r[w]
    mean = acc * float32(1.0 / 64.0)
    out[i] = (d0 - n0 * mean) * inv_r
    out[i + 1] = (d1 - n1 * mean) * inv_r


@cuda.jit
def rms_norm_backward_head_for(dn, n, r, out, rows):
    gid = cuda.grid(1)
    w = gid >> 5
    lane = gid & 31
    if w < rows:
        i = w * 64 + 2 * lane
        acc = dn[i] * n[i] + dn[i + 1] * n[i + 1]
        for k in range(5):
            acc += cuda.shfl_xor_sync(FULL_MASK, acc, 1 << k)
        mean = acc / float32(64.0)
        out[i] = (dn[i] - n[i] * mean) / r[w]
        out[i + 1] = (dn[i + 1] - n[i + 1] * mean) / r[w]


# ---------------- 08.3 dw_partials ----------------
@cuda.jit(fastmath=True)
def dw_partials(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    c = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    step = 4 * cuda.gridDim.x
    acc = float32(0.0)
    while row < rows:
        k = row * 64 + c
        acc += dz[k] * n[k]
        row += step
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64] + part[t + 128] + part[t + 192]


@cuda.jit(fastmath=True)
def dw_partials_tree(dz, n, out, rows):
    # two halving steps in shared memory, a barrier after each
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    c = t & 63
    g = t >> 6
    acc = float32(0.0)
    row = cuda.blockIdx.x * 4 + g
    while row < rows:
        acc += dz[row * 64 + c] * n[row * 64 + c]
        row += cuda.gridDim.x * 4
    part[t] = acc
    cuda.syncthreads()
    if t < 128:
        part[t] += part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64]


@cuda.jit
def dw_partials_atomic(dz, n, out, rows):
    # the four groups meet by shared-memory atomics on a 64-float row
    part = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    c = t % 64
    if t < 64:
        part[c] = float32(0.0)
    cuda.syncthreads()
    acc = float32(0.0)
    row = cuda.blockIdx.x * 4 + t // 64
    while row < rows:
        acc += dz[row * 64 + c] * n[row * 64 + c]
        row += 4 * cuda.gridDim.x
    cuda.atomic.add(part, c, acc)
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + c] = part[c]


@cuda.jit(fastmath=True)
def dw_partials_serial_first(dz, n, out, rows):
    # first group adds the four slots of its column with a loop
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    c = t % 64
    acc = float32(0.0)
    row = cuda.blockIdx.x * 4 + t // 64
    step = 4 * cuda.gridDim.x
    while row < rows:
        base = row * 64
        a = dz[base + c]
        b = n[base + c]
        acc += a * b
        row += step
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        total = float32(0.0)
        for g in range(4):
            total += part[g * 64 + t]
        out[cuda.blockIdx.x * 64 + t] = total


# ---------------- 08.4 launch_dw ----------------
def launch_dw(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min(1024, (rows + 3) // 4)
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_quarter(dz, n, out, tokens, heads):
    # four times fewer blocks: each thread walks ~4 rows
    rows = tokens * heads
    blocks = max(1, math.ceil(rows / 16))
    blocks = min(blocks, 512)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials_tree[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


def launch_dw_small(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min(8, -(-rows // 4))
    partials = cuda.device_array((blocks * 64,), dtype=np.float32)
    dw_partials_atomic[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


ENTRIES = [
    ("08.1", "transpose_formula", inverse_rotate_head),
    ("08.1", "forward_by_minus_theta", inverse_rotate_head_neg),
    ("08.1", "warp_stride_precise", inverse_rotate_head_stride),
    ("08.2", "xor_loop", rms_norm_backward_head),
    ("08.2", "unrolled_recip_return", rms_norm_backward_head_unrolled),
    ("08.2", "for5_reload_precise", rms_norm_backward_head_for),
    ("08.3", "four_slot_sum", dw_partials),
    ("08.3", "shared_tree", dw_partials_tree),
    ("08.3", "shared_atomics", dw_partials_atomic),
    ("08.3", "first_group_loop", dw_partials_serial_first),
    ("08.4", "cap1024", launch_dw),
    ("08.4", "rows_div16_cap512", launch_dw_quarter),
    ("08.4", "cap8_atomic_stage1", launch_dw_small),
]
