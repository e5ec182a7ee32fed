"""Notebook 08: the backward pass of QK-RMSNorm + RoPE."""
import math

import numpy as np
from numba import cuda, float32, int64, uint64

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL = 0xFFFFFFFF


# ---------------------------------------------------------------- 08.1
@cuda.jit(fastmath=True)
def inv_rot_grid(dy, out, positions, inv_freq, rows):
    g = cuda.grid(1)
    row = g // 32
    lane = g % 32
    if row < rows:
        theta = float32(positions[row]) * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        e = row * 64 + 2 * lane
        a = dy[e]
        b = dy[e + 1]
        out[e] = a * c + b * s
        out[e + 1] = b * c - a * s


@cuda.jit(fastmath=True)
def inv_rot_negangle_early_return(dy, out, positions, inv_freq, rows):
    # turn by -theta with the forward's formula; warp number from block and thread
    lane = cuda.threadIdx.x & 31
    head = cuda.blockIdx.x * (cuda.blockDim.x // 32) + (cuda.threadIdx.x >> 5)
    if head >= rows:
        return
    neg = -(float32(positions[head]) * inv_freq[lane])
    sn = math.sin(neg)
    cs = math.cos(neg)
    p = head * 64 + lane * 2
    g1 = dy[p + 1]
    g0 = dy[p]
    out[p + 1] = g0 * sn + g1 * cs
    out[p] = g0 * cs - g1 * sn


# ---------------------------------------------------------------- 08.2
@cuda.jit(fastmath=True)
def rms_bwd_loop(dn, n, r, out, rows):
    g = cuda.grid(1)
    w = g // 32
    lane = g % 32
    if w < rows:
        e = w * 64 + 2 * lane
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        s = d0 * n0 + d1 * n1
        for m in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL, s, m)
        mean = s / float32(64.0)
        rr = r[w]
        out[e] = (d0 - n0 * mean) / rr
        out[e + 1] = (d1 - n1 * mean) / rr


@cuda.jit(fastmath=True)
def rms_bwd_zero_fill_recip(dn, n, r, out, rows):
    # all lanes shuffle (zeros past the end), multiply by 1/r, rising butterfly
    tid = cuda.threadIdx.x
    head = cuda.blockIdx.x * 4 + tid // 32
    lane = tid % 32
    ok = head < rows
    base = head * 64 + lane * 2
    a0 = float32(0.0)
    a1 = float32(0.0)
    b0 = float32(0.0)
    b1 = float32(0.0)
    if ok:
        a0 = dn[base]
        a1 = dn[base + 1]
        b0 = n[base]
        b1 = n[base + 1]
    dot = a0 * b0
    dot += a1 * b1
    m = 1
    while m < 32:
        dot += cuda.shfl_xor_sync(FULL, dot, m)
        m = m * 2
    if ok:
        inv_r = float32(1.0) / r[head]
        k = dot * float32(0.015625)
        out[base] = inv_r * (a0 - k * b0)
        out[base + 1] = inv_r * (a1 - k * b1)


# ---------------------------------------------------------------- 08.3
@cuda.jit(fastmath=True)
def dw_partials_four_sum(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        e = row * 64 + col
        acc += dz[e] * n[e]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64] + part[t + 128] + part[t + 192]


@cuda.jit(fastmath=True)
def dw_partials_tree(dz, n, out, rows):
    # for-range over this group's rows, then a two-level tree in shared memory
    buf = cuda.shared.array(256, float32)
    tid = cuda.threadIdx.x
    group = tid >> 6
    c = tid & 63
    step = 4 * cuda.gridDim.x
    s = float32(0.0)
    for rr in range(cuda.blockIdx.x * 4 + group, rows, step):
        s += dz[rr * 64 + c] * n[rr * 64 + c]
    buf[tid] = s
    cuda.syncthreads()
    if tid < 128:
        buf[tid] = buf[tid] + buf[tid + 128]
    cuda.syncthreads()
    if tid < 64:
        out[cuda.blockIdx.x * 64 + tid] = buf[tid] + buf[tid + 64]


# ---------------------------------------------------------------- 08.4
def launch_dw_capped(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, dtype="float32")
    dw_partials_four_sum[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_eighth(dz, n, out, tokens, heads):
    # about eight rows a block (two per group), at least one block, at most 256
    rows = int(tokens) * int(heads)
    max_blocks = -(-rows // 4)
    blocks = max(1, min(256, -(-rows // 8), max_blocks))
    partials = cuda.device_array((blocks * 64,), dtype=np.float32)
    dw_partials_tree[blocks, 256](dz, n, partials, int64(rows))
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


ENTRIES = [
    ("08.1", "R^T by hand, cuda.grid", inv_rot_grid),
    ("08.1", "forward formula at -theta, early return", inv_rot_negangle_early_return),
    ("08.2", "if-skip, divide by r", rms_bwd_loop),
    ("08.2", "zero-fill, rising butterfly, 1/r", rms_bwd_zero_fill_recip),
    ("08.3", "while rows, first group sums 4", dw_partials_four_sum),
    ("08.3", "for-range rows, shared tree", dw_partials_tree),
    ("08.4", "ceil(rows/4) capped at 1024", launch_dw_capped),
    ("08.4", "about 8 rows a block, cap 256", launch_dw_eighth),
]


# ---------------------------------------------------------------- third entries


@cuda.jit(device=True, inline=True, fastmath=True)
def _turn(a, b, c, s):
    """The forward rotation by the angle whose cos and sin are c and s."""
    return a * c - b * s, a * s + b * c


@cuda.jit(fastmath=True)
def inv_rot_uint64_devfn(dy, out, positions, inv_freq, rows):
    # unsigned index math; a device function rotates with sin negated
    g = uint64(cuda.grid(1))
    w = g >> uint64(5)
    lane = g & uint64(31)
    if w < uint64(rows):
        ang = inv_freq[lane] * float32(positions[w])
        e = (w << uint64(6)) + (lane << uint64(1))
        o0, o1 = _turn(dy[e], dy[e + uint64(1)], math.cos(ang), -math.sin(ang))
        out[e] = o0
        out[e + uint64(1)] = o1


@cuda.jit(fastmath=True)
def rms_bwd_distributed_uint64(dn, n, r, out, rows):
    # dx = dn / r - n * (sum / (64 r)); while-halving butterfly; unsigned indices
    g = uint64(cuda.grid(1))
    w = g // uint64(32)
    lane = g % uint64(32)
    if w < uint64(rows):
        e = w * uint64(64) + lane * uint64(2)
        p0 = dn[e] * n[e]
        p1 = dn[e + uint64(1)] * n[e + uint64(1)]
        s = p0 + p1
        m = 16
        while m != 0:
            s += cuda.shfl_xor_sync(FULL, s, m)
            m >>= 1
        rinv = float32(1.0) / r[w]
        coef = s * rinv * float32(1.0 / 64.0)
        out[e] = dn[e] * rinv - n[e] * coef
        out[e + uint64(1)] = dn[e + uint64(1)] * rinv - n[e + uint64(1)] * coef


@cuda.jit(fastmath=True)
def dw_partials_2d_shared(dz, n, out, rows):
    # a (4, 64) shared array; the first group adds the four groups in a loop
    part = cuda.shared.array((4, 64), float32)
    t = cuda.threadIdx.x
    g = t // 64
    c = t - g * 64
    r = cuda.blockIdx.x * 4 + g
    jump = cuda.gridDim.x * 4
    acc0 = float32(0.0)
    acc1 = float32(0.0)
    # two accumulators, alternate rows
    k = 0
    while r < rows:
        prod = dz[r * 64 + c] * n[r * 64 + c]
        if k % 2 == 0:
            acc0 += prod
        else:
            acc1 += prod
        k += 1
        r += jump
    part[g, c] = acc0 + acc1
    cuda.syncthreads()
    if g == 0:
        tot = float32(0.0)
        for q in range(4):
            tot += part[q, c]
        out[cuda.blockIdx.x * 64 + c] = tot


def launch_dw_one_wave(dz, n, out, tokens, heads):
    # a wave of 132 blocks (an H100's SMs) at most, fewer for small inputs
    rows = tokens * heads
    nb = max(1, min(132, math.ceil(rows / 4)))
    partials = cuda.device_array(shape=nb * 64, dtype=np.float32)
    dw_partials_2d_shared[nb, 256](dz, n, partials, rows)
    reduce_partials_kernel[math.ceil(64 / 32), REDUCE_THREADS](partials, out)


ENTRIES += [
    ("08.1", "uint64 shifts, device fn with -sin", inv_rot_uint64_devfn),
    ("08.2", "distributed 1/r, uint64 indices", rms_bwd_distributed_uint64),
    ("08.3", "2-D shared array, two accumulators", dw_partials_2d_shared),
    ("08.4", "one wave of 132 blocks at most", launch_dw_one_wave),
]
