import ropelab
from numba import cuda, float32, int64
import math
import numpy as np

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF


# 08.1: warp per head, lane l turns pair l by -theta: (g0 c + g1 s, -g0 s + g1 c).
@cuda.jit(fastmath=True)
def inverse_rotate_transpose(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        e = row * 64 + 2 * lane
        g0 = dy[e]
        g1 = dy[e + 1]
        theta = float32(positions[row]) * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        out[e] = g0 * c + g1 * s
        out[e + 1] = g1 * c - g0 * s


# 08.1: the forward rotation formula applied with the negated angle; early return.
@cuda.jit(fastmath=True)
def inverse_rotate_neg_angle(dy, out, positions, inv_freq, rows):
    row = cuda.grid(1) >> 5
    if row >= rows:
        return
    lane = cuda.threadIdx.x & 31
    theta = -(float32(positions[row]) * inv_freq[lane])
    c = math.cos(theta)
    s = math.sin(theta)
    e = (row << 6) + (lane << 1)
    g0 = dy[e]
    g1 = dy[e + 1]
    out[e] = g0 * c - g1 * s
    out[e + 1] = g0 * s + g1 * c


# 08.2: butterfly of dn*n unrolled, mean = sum / 64, then (dn - n mean) / r.
@cuda.jit(fastmath=True)
def norm_backward_unrolled(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        e = row * 64 + 2 * lane
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        s = d0 * n0 + d1 * n1
        s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
        s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
        mean = s / float32(64.0)
        rr = r[row]
        out[e] = (d0 - n0 * mean) / rr
        out[e + 1] = (d1 - n1 * mean) / rr


# 08.2: butterfly loop, multiply by 1/r computed once, mean via * (1/64).
@cuda.jit(fastmath=True)
def norm_backward_loop_recip(dn, n, r, out, rows):
    row = cuda.grid(1) >> 5
    if row >= rows:
        return
    lane = cuda.threadIdx.x & 31
    e = row * 64 + lane * 2
    d0 = dn[e]
    d1 = dn[e + 1]
    n0 = n[e]
    n1 = n[e + 1]
    s = d0 * n0 + d1 * n1
    m = 1
    while m < 32:
        s += cuda.shfl_xor_sync(FULL_MASK, s, m)
        m *= 2
    mean = s * float32(0.015625)
    inv_r = float32(1.0) / r[row]
    out[e] = (d0 - n0 * mean) * inv_r
    out[e + 1] = (d1 - n1 * mean) * inv_r


# 08.3: grid-stride rows per group of 64, shared[256], one barrier, first group adds 4 slots.
@cuda.jit(fastmath=True)
def dw_partials_four_slots(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        k = row * 64 + col
        acc += dz[k] * n[k]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


# 08.3: shared-memory tree: 256 -> 128 (barrier) -> 64, two barriers.
@cuda.jit(fastmath=True)
def dw_partials_tree(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t & 63
    row = int64(cuda.blockIdx.x) * 4 + (t >> 6)
    step = int64(cuda.gridDim.x) * 4
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += step
    part[t] = acc
    cuda.syncthreads()
    if t < 128:
        part[t] = part[t] + part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64]


# 08.4 (launched): blocks = min(ceil(rows / 4), 1024), partial rows, then the given reduction.
def launch_dw_capped(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    dw_partials_four_slots[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[(64 + 31) // 32, REDUCE_THREADS](partials, out)


# 08.4: a small fixed cap of 3 blocks (long grid-stride loops), the tree kernel for stage one.
def launch_dw_three_blocks(dz, n, out, tokens, heads):
    rows = int(tokens) * int(heads)
    blocks = max(1, min(3, -(-rows // 4)))
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials_tree[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


ENTRIES = [
    ("08.1", "inverse_transpose", inverse_rotate_transpose),
    ("08.1", "inverse_negated_angle", inverse_rotate_neg_angle),
    ("08.2", "norm_backward_unrolled", norm_backward_unrolled),
    ("08.2", "norm_backward_loop_recip", norm_backward_loop_recip),
    ("08.3", "dw_partials_four_slots", dw_partials_four_slots),
    ("08.3", "dw_partials_tree", dw_partials_tree),
    ("08.4", "launch_dw_capped", launch_dw_capped),
    ("08.4", "launch_dw_three_blocks", launch_dw_three_blocks),
]
