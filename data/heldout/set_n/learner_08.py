import math
from numba import cuda, float32, int64

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL = 0xFFFFFFFF


@cuda.jit(fastmath=True)
def inv_rot_a(dy, out, positions, inv_freq, rows):
    g = cuda.grid(1)
    row = g // 32
    l = cuda.threadIdx.x % 32
    if row < rows:
        th = float32(positions[row]) * inv_freq[l]
        c = math.cos(th)
        s = math.sin(th)
        e = row * 64 + 2 * l
        a = dy[e]
        b = dy[e + 1]
        out[e] = a * c + b * s
        out[e + 1] = b * c - a * s


@cuda.jit
def inv_rot_b(dy, out, positions, inv_freq, rows):
    l = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if row >= rows:
        return
    e = row * 64 + l * 2
    g0 = dy[e]
    g1 = dy[e + 1]
    # turn by -theta
    th = -(inv_freq[l] * float32(positions[row]))
    cs = math.cos(th)
    sn = math.sin(th)
    out[e] = g0 * cs - g1 * sn
    out[e + 1] = g0 * sn + g1 * cs


@cuda.jit(fastmath=True)
def rms_bwd_a(dn, n, r, out, rows):
    g = cuda.grid(1)
    row = g // 32
    l = cuda.threadIdx.x % 32
    if row < rows:
        e = row * 64 + 2 * l
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        s = d0 * n0 + d1 * n1
        m = 16
        while m >= 1:
            s += cuda.shfl_xor_sync(FULL, s, m)
            m //= 2
        mean = s / float32(64)
        rr = r[row]
        out[e] = (d0 - n0 * mean) / rr
        out[e + 1] = (d1 - n1 * mean) / rr


@cuda.jit(fastmath=True)
def rms_bwd_b(dn, n, r, out, rows):
    l = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if row >= rows:
        return
    e = row * 64 + l * 2
    s = dn[e] * n[e]
    s += dn[e + 1] * n[e + 1]
    for m in (1, 2, 4, 8, 16):
        s += cuda.shfl_xor_sync(FULL, s, m)
    inv_r = float32(1.0) / r[row]
    mean = s * float32(0.015625)
    out[e] = inv_r * (dn[e] - mean * n[e])
    out[e + 1] = inv_r * (dn[e + 1] - mean * n[e + 1])


@cuda.jit(fastmath=True)
def dw_partials_a(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    c = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    step = 4 * cuda.gridDim.x
    acc = float32(0)
    while row < rows:
        e = row * 64 + c
        acc += dz[e] * n[e]
        row += step
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64] + part[t + 128] + part[t + 192]


@cuda.jit(fastmath=True)
def dw_partials_b(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    c = t & 63
    grp = t >> 6
    acc = float32(0.0)
    r = cuda.blockIdx.x * 4 + grp
    stride = cuda.gridDim.x * 4
    while r < rows:
        acc += dz[r * 64 + c] * n[r * 64 + c]
        r += stride
    part[t] = acc
    cuda.syncthreads()
    # tree: 256 -> 128 -> 64
    if t < 128:
        part[t] = part[t] + part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + c] = part[t] + part[t + 64]


def launch_dw_a(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min(1024, (rows + 3) // 4)
    partials = cuda.device_array(blocks * 64, dtype="float32")
    dw_partials_a[blocks, 256](dz, n, partials, int64(rows))
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


def launch_dw_b(dz, n, out, tokens, heads):
    import numpy as np
    rows = tokens * heads
    # fewer, fuller blocks: about 16 rows a block, at most 256 blocks
    blocks = max(1, min(256, math.ceil(rows / 16)))
    partials = cuda.device_array(64 * blocks, dtype=np.float32)
    dw_partials_b[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


ENTRIES = [
    ("08.1", "transpose formula", inv_rot_a),
    ("08.1", "turn by -theta, no fastmath", inv_rot_b),
    ("08.2", "while butterfly, divide by r", rms_bwd_a),
    ("08.2", "tuple butterfly, multiply by 1/r, reload", rms_bwd_b),
    ("08.3", "four-slot sum by first group", dw_partials_a),
    ("08.3", "two-level tree in shared", dw_partials_b),
    ("08.4", "ceil(rows/4) capped at 1024", launch_dw_a),
    ("08.4", "~16 rows a block, cap 256", launch_dw_b),
]


@cuda.jit(fastmath=True)
def inv_rot_c(dy, out, positions, inv_freq, rows):
    # warp-stride loop over heads
    lane = cuda.laneid
    warp = cuda.grid(1) // 32
    nwarps = cuda.gridsize(1) // 32
    while warp < rows:
        th = inv_freq[lane] * float32(positions[warp])
        c = math.cos(th)
        s = math.sin(th)
        e = warp * 64 + 2 * lane
        g0 = dy[e]
        g1 = dy[e + 1]
        out[e] = c * g0 + s * g1
        out[e + 1] = c * g1 - s * g0
        warp += nwarps


@cuda.jit(fastmath=True)
def rms_bwd_c(dn, n, r, out, rows):
    # shfl_down to lane 0, broadcast
    lane = cuda.laneid
    row = cuda.grid(1) // 32
    if row < rows:
        e = row * 64 + 2 * lane
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        s = d0 * n0 + d1 * n1
        off = 16
        while off > 0:
            s += cuda.shfl_down_sync(FULL, s, off)
            off >>= 1
        s = cuda.shfl_sync(FULL, s, 0)
        rr = r[row]
        out[e] = d0 / rr - n0 * (s / float32(64)) / rr
        out[e + 1] = d1 / rr - n1 * (s / float32(64)) / rr


@cuda.jit(fastmath=True)
def dw_partials_c(dz, n, out, rows):
    # 2-D view of the block: column c, group g; first group loops over the four slots
    part = cuda.shared.array((4, 64), float32)
    t = cuda.threadIdx.x
    g = t // 64
    c = t - g * 64
    acc = float32(0)
    r = g + 4 * cuda.blockIdx.x
    while r < rows:
        acc += n[r * 64 + c] * dz[r * 64 + c]
        r += 4 * cuda.gridDim.x
    part[g, c] = acc
    cuda.syncthreads()
    if g == 0:
        tot = float32(0)
        for k in range(4):
            tot += part[k, c]
        out[cuda.blockIdx.x * 64 + c] = tot


def launch_dw_c(dz, n, out, tokens, heads):
    import numpy as np
    rows = tokens * heads
    blocks = max(1, (rows + 3) // 4)  # one block per four rows, no cap
    partials = cuda.device_array(shape=(blocks * 64,), dtype=np.float32)
    dw_partials_c[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[math.ceil(64 / 32), REDUCE_THREADS](partials, out)


ENTRIES += [
    ("08.1", "warp-stride loop", inv_rot_c),
    ("08.2", "shfl_down + broadcast", rms_bwd_c),
    ("08.3", "2-D shared (4, 64), loop sum", dw_partials_c),
    ("08.4", "ceil(rows/4) uncapped", launch_dw_c),
]
