import ropelab
import math
import numpy as np
from numba import cuda, float32, int32, int64


# ramp.1 square
@cuda.jit
def square_a(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_b(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v * v


# ramp.2 weigh
@cuda.jit
def weigh_a(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_b(x, weight, out):
    i = cuda.grid(1)
    a = x[i]
    w = weight[i]
    out[i] = a * w


# ramp.3 scale_guarded
@cuda.jit
def scale_guarded_a(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_guarded_b(x, out, scale, n):
    i = cuda.threadIdx.x
    if i >= n:
        return
    out[i] = x[i] * scale


# ramp.4 scale_blocks
@cuda.jit
def scale_blocks_a(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_b(x, out, scale, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = scale * x[i]


@cuda.jit
def scale_blocks_stride(x, out, scale, n):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, n, step):
        out[i] = x[i] * scale


# ramp.5 launch
def launch_scale_128(x, out, scale, n):
    threads = 128
    blocks = (n + threads - 1) // threads
    scale_blocks_a[blocks, threads](x, out, scale, n)


def launch_scale_32(x, out, scale, n):
    threads = 32
    blocks = math.ceil(n / threads)
    scale_blocks_b[blocks, threads](x, out, scale, n)


def launch_scale_256(x, out, scale, n):
    threads = 256
    blocks = (n + 255) // 256
    scale_blocks_a[blocks, threads](x, out, scale, n)


# ramp.6 weigh_rows
@cuda.jit
def weigh_rows_a(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if h < hidden and t < tokens:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_b(x, weight, out, tokens, hidden):
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if h >= hidden or t >= tokens:
        return
    idx = t * hidden + h
    w = weight[h]
    out[idx] = x[idx] * w


# ramp.7 angle_table
@cuda.jit
def angle_table_a(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if j < pairs and t < tokens:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def angle_table_b(positions, inv_freq, out, tokens, pairs):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    if j >= pairs:
        return
    p = float32(positions[t])
    f = inv_freq[j]
    out[t * pairs + j] = p * f


# ramp.8 swap_pairs
@cuda.jit
def swap_pairs_a(x, out):
    row = cuda.blockIdx.x
    h = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    i = row * hidden + h
    if h % 2 == 0:
        out[i] = -x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_b(x, out):
    i = cuda.grid(1)
    partner = i ^ 1
    v = x[partner]
    if (i & 1) == 0:
        v = -v
    out[i] = v


# ramp.9 rotate_half
@cuda.jit
def rotate_half_a(x, out):
    row = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    base = cuda.blockIdx.x * hidden
    row[t] = x[base + t]
    cuda.syncthreads()
    half = hidden // 2
    if t < half:
        out[base + t] = -row[t + half]
    else:
        out[base + t] = row[t - half]


@cuda.jit
def rotate_half_b(x, out):
    row = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    g = cuda.grid(1)
    row[t] = x[g]
    cuda.syncthreads()
    half = n >> 1
    src = t + half
    sign = float32(-1.0)
    if t >= half:
        src = t - half
        sign = float32(1.0)
    out[g] = sign * row[src]


# ramp.10 row_sum_squares
@cuda.jit
def row_sum_squares_a(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[cuda.blockIdx.x * n + t]
    buf[t] = v * v
    cuda.syncthreads()
    s = n // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def row_sum_squares_serial(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    row = cuda.blockIdx.x
    v = x[row * n + t]
    buf[t] = v * v
    cuda.syncthreads()
    if t != 0:
        return
    acc = float32(0.0)
    for k in range(n):
        acc += buf[k]
    out[row] = acc


# ramp.11 warp_sum
@cuda.jit
def warp_sum_a(x, out):
    i = cuda.grid(1)
    v = x[i]
    off = 16
    while off > 0:
        v += cuda.shfl_xor_sync(0xffffffff, v, off)
        off //= 2
    out[i] = v


@cuda.jit
def warp_sum_unrolled(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    v += cuda.shfl_xor_sync(0xffffffff, v, 16)
    v += cuda.shfl_xor_sync(0xffffffff, v, 8)
    v += cuda.shfl_xor_sync(0xffffffff, v, 4)
    v += cuda.shfl_xor_sync(0xffffffff, v, 2)
    v += cuda.shfl_xor_sync(0xffffffff, v, 1)
    out[i] = v


# ramp.12 dot_rows
@cuda.jit
def dot_rows_a(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        acc = float32(0.0)
        base = t * d
        for i in range(d):
            acc += q[base + i] * k[base + i]
        out[t] = acc


@cuda.jit
def dot_rows_b(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    acc = float32(0.0)
    i = t * d
    end = i + d
    while i < end:
        acc = cuda.fma(q[i], k[i], acc)
        i += 1
    out[t] = acc


# ramp.13 qk_scores
@cuda.jit
def qk_scores_a(q, k, out, tokens):
    qs = cuda.shared.array((8, 8), float32)
    ks = cuda.shared.array((8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * 8
    n0 = cuda.blockIdx.x * 8
    qs[ty, tx] = q[(m0 + ty) * 8 + tx]
    ks[ty, tx] = k[(n0 + ty) * 8 + tx]
    cuda.syncthreads()
    acc = float32(0.0)
    for c in range(8):
        acc += qs[ty, c] * ks[tx, c]
    out[(m0 + ty) * tokens + n0 + tx] = acc


@cuda.jit
def qk_scores_flat(q, k, out, tokens):
    qs = cuda.shared.array(64, float32)
    ks = cuda.shared.array(64, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    lin = ty * 8 + tx
    qs[lin] = q[cuda.blockIdx.y * 64 + lin]
    ks[lin] = k[cuda.blockIdx.x * 64 + lin]
    cuda.syncthreads()
    n, m = cuda.grid(2)
    acc = float32(0.0)
    for c in range(8):
        acc = cuda.fma(qs[ty * 8 + c], ks[tx * 8 + c], acc)
    out[m * tokens + n] = acc


# ramp.14 seq_offsets
@cuda.jit
def seq_offsets_a(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        acc = float32(0.0)
        for j in range(i):
            acc += float32(lengths[j])
        out[i] = acc


@cuda.jit
def seq_offsets_scan(lengths, out, n):
    buf = cuda.shared.array(32, float32)
    i = cuda.threadIdx.x
    v = float32(0.0)
    if i >= 1 and i <= n:
        v = float32(lengths[i - 1])
    buf[i] = v
    cuda.syncthreads()
    off = 1
    while off < 32:
        add = float32(0.0)
        if i >= off:
            add = buf[i - off]
        cuda.syncthreads()
        buf[i] += add
        cuda.syncthreads()
        off *= 2
    if i <= n:
        out[i] = buf[i]


ENTRIES = [
    ("ramp.1", "threadidx", square_a),
    ("ramp.1", "grid1_load_first", square_b),
    ("ramp.2", "threadidx", weigh_a),
    ("ramp.2", "grid1_loads_grouped", weigh_b),
    ("ramp.3", "guard_if", scale_guarded_a),
    ("ramp.3", "early_return", scale_guarded_b),
    ("ramp.4", "manual_index_guard", scale_blocks_a),
    ("ramp.4", "grid1_early_return", scale_blocks_b),
    ("ramp.4", "grid_stride", scale_blocks_stride),
    ("ramp.5", "block128", launch_scale_128),
    ("ramp.5", "block32", launch_scale_32),
    ("ramp.5", "block256", launch_scale_256),
    ("ramp.6", "grid2_guard", weigh_rows_a),
    ("ramp.6", "manual_early_return", weigh_rows_b),
    ("ramp.7", "grid2_guard", angle_table_a),
    ("ramp.7", "manual_two_returns", angle_table_b),
    ("ramp.8", "branch_even_odd", swap_pairs_a),
    ("ramp.8", "xor_partner", swap_pairs_b),
    ("ramp.9", "shared_branch", rotate_half_a),
    ("ramp.9", "shared_sign", rotate_half_b),
    ("ramp.10", "tree_reduce", row_sum_squares_a),
    ("ramp.10", "serial_thread0", row_sum_squares_serial),
    ("ramp.11", "xor_loop", warp_sum_a),
    ("ramp.11", "xor_unrolled", warp_sum_unrolled),
    ("ramp.12", "for_loop", dot_rows_a),
    ("ramp.12", "while_fma", dot_rows_b),
    ("ramp.13", "shared_2d", qk_scores_a),
    ("ramp.13", "shared_flat_fma", qk_scores_flat),
    ("ramp.14", "serial_per_thread", seq_offsets_a),
    ("ramp.14", "hillis_steele_shared", seq_offsets_scan),
]
