import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numpy as np
from numba import cuda, float32, int32, int64

FULL = 0xFFFFFFFF


# ---- ramp.1 square ----
@cuda.jit
def square(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_local(x, out):
    i = cuda.threadIdx.x
    v = x[i]
    out[i] = v * v


# ---- ramp.2 weigh ----
@cuda.jit
def weigh(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_grid(x, weight, out):
    i = cuda.grid(1)
    a = x[i]
    w = weight[i]
    out[i] = a * w


# ---- ramp.3 scale_guarded ----
@cuda.jit
def scale_guarded(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_guarded_ret(x, out, scale, n):
    i = cuda.threadIdx.x
    if i >= n:
        return
    out[i] = scale * x[i]


# ---- ramp.4 scale_blocks ----
@cuda.jit
def scale_blocks(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_grid(x, out, scale, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = x[i] * scale


# ---- ramp.5 launch ----
def launch_scale(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks[blocks, threads](x, out, float32(scale), n)


def launch_scale_32(x, out, scale, n):
    threads = 32
    blocks = (n + 31) // 32
    scale_blocks_grid[blocks, threads](x, out, float32(scale), n)


def launch_scale_1024(x, out, scale, n):
    threads = 1024 if n >= 1024 else ((n + 31) // 32) * 32
    blocks = math.ceil(n / threads)
    scale_blocks[blocks, threads](x, out, float32(scale), n)


# ---- ramp.6 weigh_rows ----
@cuda.jit
def weigh_rows(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_manual(x, weight, out, tokens, hidden):
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if h >= hidden:
        return
    if t >= tokens:
        return
    k = t * hidden + h
    w = weight[h]
    out[k] = w * x[k]


# ---- ramp.7 angle_table ----
@cuda.jit
def angle_table(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if t < tokens and j < pairs:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def angle_table_manual(positions, inv_freq, out, tokens, pairs):
    j = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    t = cuda.threadIdx.y + cuda.blockIdx.y * cuda.blockDim.y
    if j < pairs:
        if t < tokens:
            p = float32(positions[t])
            f = inv_freq[j]
            out[t * pairs + j] = p * f


# ---- ramp.8 swap_pairs ----
@cuda.jit
def swap_pairs(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = -x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_xor(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    other = x[i ^ 1]
    if (i & 1) == 0:
        other = -other
    out[i] = other


# ---- ramp.9 rotate_half ----
@cuda.jit
def rotate_half(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    base = cuda.blockIdx.x * hidden
    row[j] = x[base + j]
    cuda.syncthreads()
    h = hidden // 2
    if j < h:
        out[base + j] = -row[j + h]
    else:
        out[base + j] = row[j - h]


@cuda.jit
def rotate_half_sel(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    i = cuda.grid(1)
    row[j] = x[i]
    cuda.syncthreads()
    half = n >> 1
    partner = j + half
    sign = float32(-1.0)
    if j >= half:
        partner = j - half
        sign = float32(1.0)
    out[i] = sign * row[partner]


# ---- ramp.10 row_sum_squares ----
@cuda.jit
def row_sum_squares(x, out):
    sq = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    r = cuda.blockIdx.x
    v = x[r * n + t]
    sq[t] = v * v
    cuda.syncthreads()
    if t == 0:
        total = float32(0.0)
        for k in range(n):
            total += sq[k]
        out[r] = total


@cuda.jit
def row_sum_squares_tree(x, out):
    sq = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[cuda.blockIdx.x * n + t]
    sq[t] = v * v
    cuda.syncthreads()
    s = n // 2
    while s > 0:
        if t < s:
            sq[t] += sq[t + s]
        cuda.syncthreads()
        s = s // 2
    if t == 0:
        out[cuda.blockIdx.x] = sq[0]


# ---- ramp.11 warp_sum ----
@cuda.jit
def warp_sum(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(FULL, v, m)
        m = m // 2
    out[i] = v


@cuda.jit
def warp_sum_unrolled(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    v += cuda.shfl_xor_sync(FULL, v, 16)
    v += cuda.shfl_xor_sync(FULL, v, 8)
    v += cuda.shfl_xor_sync(FULL, v, 4)
    v += cuda.shfl_xor_sync(FULL, v, 2)
    v += cuda.shfl_xor_sync(FULL, v, 1)
    out[i] = v


# ---- ramp.12 dot_rows ----
@cuda.jit
def dot_rows(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0.0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_fma(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    base = t * d
    acc = float32(0.0)
    for i in range(d):
        acc = cuda.fma(q[base + i], k[base + i], acc)
    out[t] = acc


# ---- ramp.13 qk_scores ----
@cuda.jit
def qk_scores(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    tiles[0, ty, tx] = q[(8 * by + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(8 * bx + ty) * 8 + tx]
    cuda.syncthreads()
    acc = float32(0.0)
    for e in range(8):
        acc += tiles[0, ty, e] * tiles[1, tx, e]
    out[(8 * by + ty) * tokens + 8 * bx + tx] = acc


@cuda.jit
def qk_scores_two(q, k, out, tokens):
    qs = cuda.shared.array((8, 8), float32)
    ks = cuda.shared.array((8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    qrow = cuda.blockIdx.y * 8 + ty
    krow = cuda.blockIdx.x * 8 + ty
    qs[ty, tx] = q[qrow * 8 + tx]
    ks[ty, tx] = k[krow * 8 + tx]
    cuda.syncthreads()
    a0 = qs[ty, 0] * ks[tx, 0] + qs[ty, 1] * ks[tx, 1]
    a1 = qs[ty, 2] * ks[tx, 2] + qs[ty, 3] * ks[tx, 3]
    a2 = qs[ty, 4] * ks[tx, 4] + qs[ty, 5] * ks[tx, 5]
    a3 = qs[ty, 6] * ks[tx, 6] + qs[ty, 7] * ks[tx, 7]
    out[qrow * tokens + cuda.blockIdx.x * 8 + tx] = (a0 + a1) + (a2 + a3)


# ---- ramp.14 seq_offsets ----
@cuda.jit
def seq_offsets(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = float32(0.0)
        for j in range(i):
            total += float32(lengths[j])
        out[i] = total


@cuda.jit
def seq_offsets_scan(lengths, out, n):
    buf = cuda.shared.array(32, int32)
    i = cuda.threadIdx.x
    v = 0
    if i > 0 and i <= n:
        v = lengths[i - 1]
    buf[i] = v
    cuda.syncthreads()
    off = 1
    while off < 32:
        add = 0
        if i >= off:
            add = buf[i - off]
        cuda.syncthreads()
        buf[i] += add
        cuda.syncthreads()
        off *= 2
    if i <= n:
        out[i] = float32(buf[i])


ENTRIES = [
    ("ramp.1", "threadidx_direct", square),
    ("ramp.1", "load_once_local", square_local),
    ("ramp.2", "threadidx", weigh),
    ("ramp.2", "grid1_loads_first", weigh_grid),
    ("ramp.3", "if_guard", scale_guarded),
    ("ramp.3", "early_return", scale_guarded_ret),
    ("ramp.4", "manual_index_guard", scale_blocks),
    ("ramp.4", "grid1_early_return", scale_blocks_grid),
    ("ramp.5", "block256", launch_scale),
    ("ramp.5", "block32", launch_scale_32),
    ("ramp.5", "block1024_capped", launch_scale_1024),
    ("ramp.6", "grid2_guard", weigh_rows),
    ("ramp.6", "manual_early_return", weigh_rows_manual),
    ("ramp.7", "grid2", angle_table),
    ("ramp.7", "manual_nested_if", angle_table_manual),
    ("ramp.8", "mod_branch", swap_pairs),
    ("ramp.8", "xor_partner_negate", swap_pairs_xor),
    ("ramp.9", "shared_branch", rotate_half),
    ("ramp.9", "shared_sign_select", rotate_half_sel),
    ("ramp.10", "shared_serial_sum", row_sum_squares),
    ("ramp.10", "shared_tree_reduce", row_sum_squares_tree),
    ("ramp.11", "shfl_loop", warp_sum),
    ("ramp.11", "shfl_unrolled", warp_sum_unrolled),
    ("ramp.12", "loop_plus", dot_rows),
    ("ramp.12", "loop_fma_early_return", dot_rows_fma),
    ("ramp.13", "tiles3d_loop", qk_scores),
    ("ramp.13", "two_tiles_unrolled", qk_scores_two),
    ("ramp.14", "serial_prefix", seq_offsets),
    ("ramp.14", "shared_hillis_steele", seq_offsets_scan),
]
