import ropelab
import math
import numpy as np
from numba import cuda, float32, uint64, int64
from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL = 0xffffffff


# 08.1 inverse_rotate_head
@cuda.jit(fastmath=True)
def inv_rot_a(dy, out, positions, inv_freq, rows):
    g = cuda.grid(1)
    row = g >> 5
    l = g & 31
    if row < rows:
        e = row * 64 + 2 * l
        a = dy[e]
        b = dy[e + 1]
        th = float32(positions[row]) * inv_freq[l]
        c = math.cos(th)
        s = math.sin(th)
        out[e] = a * c + b * s
        out[e + 1] = b * c - a * s


@cuda.jit(fastmath=True)
def inv_rot_b(dy, out, positions, inv_freq, rows):
    t = cuda.threadIdx.x
    row = cuda.blockIdx.x * 4 + t // 32
    if row >= rows:
        return
    l = t % 32
    e = row * 64 + l * 2
    a = dy[e]
    b = dy[e + 1]
    f = inv_freq[l]
    p = float32(positions[row])
    th = p * f
    s = math.sin(th)
    c = math.cos(th)
    out[e] = cuda.fma(a, c, b * s)
    out[e + 1] = cuda.fma(b, c, -(a * s))


# 08.2 rms_norm_backward_head
@cuda.jit(fastmath=True)
def rms_bwd_a(dn, n, r, out, rows):
    g = cuda.grid(1)
    row = g >> 5
    l = g & 31
    if row >= rows:
        return
    e = row * 64 + 2 * l
    d0 = dn[e]
    d1 = dn[e + 1]
    n0 = n[e]
    n1 = n[e + 1]
    acc = d0 * n0 + d1 * n1
    off = 16
    while off > 0:
        acc += cuda.shfl_xor_sync(FULL, acc, off)
        off >>= 1
    m = acc / float32(64.0)
    inv_r = float32(1.0) / r[row]
    out[e] = (d0 - n0 * m) * inv_r
    out[e + 1] = (d1 - n1 * m) * inv_r


@cuda.jit(fastmath=True)
def rms_bwd_b(dn, n, r, out, rows):
    t = cuda.threadIdx.x
    warp = t // 32
    lane = t % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + warp
    if row < rows:
        e = row * 64 + lane * 2
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        rr = r[row]
        acc = cuda.fma(d0, n0, d1 * n1)
        for k in (1, 2, 4, 8, 16):
            acc += cuda.shfl_xor_sync(FULL, acc, k)
        m = acc * float32(0.015625)
        out[e] = (d0 - n0 * m) / rr
        out[e + 1] = (d1 - n1 * m) / rr


# 08.3 dw_partials
@cuda.jit(fastmath=True)
def dw_partials_a(dz, n, out, rows):
    buf = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    c = t % 64
    grp = t // 64
    row = cuda.blockIdx.x * 4 + grp
    step = 4 * cuda.gridDim.x
    acc = float32(0.0)
    while row < rows:
        k = row * 64 + c
        acc += dz[k] * n[k]
        row += step
    buf[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = buf[t] + buf[t + 64] + buf[t + 128] + buf[t + 192]


@cuda.jit(fastmath=True)
def dw_partials_b(dz, n, out, rows):
    buf = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    c = t & 63
    grp = t >> 6
    b = cuda.blockIdx.x
    k = (b * 4 + grp) * 64 + c
    kstep = 4 * cuda.gridDim.x * 64
    end = rows * 64
    acc = float32(0.0)
    while k < end:
        acc = cuda.fma(dz[k], n[k], acc)
        k += kstep
    buf[t] = acc
    cuda.syncthreads()
    if t >= 64:
        return
    s = buf[t]
    for gidx in range(1, 4):
        s += buf[t + 64 * gidx]
    out[b * 64 + t] = s


# 08.4 launch_dw
def launch_dw_a(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_a[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_b(dz, n, out, tokens, heads):
    rows = tokens * heads
    need = math.ceil(rows / 4)
    blocks = max(1, min(need, 132))
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_b[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


# 08.1 third version: a warp-stride loop over heads
@cuda.jit(fastmath=True)
def inv_rot_stride(dy, out, positions, inv_freq, rows):
    g = cuda.grid(1)
    row = g >> 5
    l = g & 31
    nwarps = cuda.gridsize(1) >> 5
    f = inv_freq[l]
    while row < rows:
        e = row * 64 + 2 * l
        a = dy[e]
        b = dy[e + 1]
        th = float32(positions[row]) * f
        c = math.cos(th)
        s = math.sin(th)
        out[e] = a * c + b * s
        out[e + 1] = b * c - a * s
        row += nwarps

ENTRIES = [
    ("08.1", "grid1_shift_guard", inv_rot_a),
    ("08.1", "manual_early_return_fma", inv_rot_b),
    ("08.2", "grid1_while_butterfly", rms_bwd_a),
    ("08.2", "manual_for_butterfly_div", rms_bwd_b),
    ("08.3", "row_while_explicit_sum", dw_partials_a),
    ("08.3", "elem_offset_fma_early_return", dw_partials_b),
    ("08.4", "cap1024", launch_dw_a),
    ("08.4", "cap132_one_wave", launch_dw_b),
    ("08.1", "warp_stride_while_freq_hoisted", inv_rot_stride),
]
