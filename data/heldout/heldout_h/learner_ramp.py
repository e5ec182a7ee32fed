"""On-ramp (ramp.1 .. ramp.14): two or three ways each."""
import ropelab  # noqa: F401  (must come before numba: picks the target)

import math

import numpy as np
from numba import cuda, float32, int32

FULL = 0xFFFFFFFF


# ---------------------------------------------------------------- ramp.1
@cuda.jit
def square_plain(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_grid(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v * v


# ---------------------------------------------------------------- ramp.2
@cuda.jit
def weigh_plain(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_locals(x, weight, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    w = weight[i]
    a = x[i]
    out[i] = w * a


# ---------------------------------------------------------------- ramp.3
@cuda.jit
def scale_guarded_if(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_guarded_return(x, out, scale, n):
    i = cuda.threadIdx.x
    if i >= n:
        return
    out[i] = scale * x[i]


# ---------------------------------------------------------------- ramp.4
@cuda.jit
def scale_blocks_manual(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_grid_return(x, out, scale, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = x[i] * scale


@cuda.jit
def scale_blocks_stride(x, out, scale, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += step


# ---------------------------------------------------------------- ramp.5
def launch_scale_256(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks_manual[blocks, threads](x, out, np.float32(scale), n)


def launch_scale_small_blocks(x, out, scale, n):
    threads = 32
    blocks = -(-n // threads)
    scale_blocks_grid_return[blocks, threads](x, out, float32(scale), n)


def launch_scale_fit(x, out, scale, n):
    # one block when it fits, else 1024-thread blocks
    threads = n if n <= 1024 else 1024
    blocks = math.ceil(n / threads)
    scale_blocks_manual[blocks, threads](x, out, scale, n)


# ---------------------------------------------------------------- ramp.6
@cuda.jit
def weigh_rows_grid2(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_manual(x, weight, out, tokens, hidden):
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if t >= tokens:
        return
    if h >= hidden:
        return
    k = t * hidden + h
    out[k] = weight[h] * x[k]


# ---------------------------------------------------------------- ramp.7
@cuda.jit
def angle_table_grid2(positions, inv_freq, out, tokens, pairs):
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
            out[t * pairs + j] = inv_freq[j] * p


# ---------------------------------------------------------------- ramp.8
@cuda.jit
def swap_pairs_branch(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = -x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_xor(x, out):
    row = cuda.blockIdx.x * cuda.blockDim.x
    j = cuda.threadIdx.x
    partner = x[row + (j ^ 1)]
    if j & 1:
        out[row + j] = partner
    else:
        out[row + j] = -partner


# ---------------------------------------------------------------- ramp.9
@cuda.jit
def rotate_half_plain(x, out):
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
def rotate_half_mod(x, out):
    buf = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    g = cuda.grid(1)
    buf[j] = x[g]
    cuda.syncthreads()
    h = n >> 1
    v = buf[(j + h) % n]
    out[g] = -v if j < h else v


# ---------------------------------------------------------------- ramp.10
@cuda.jit
def row_sum_squares_serial(x, out):
    sq = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    r = cuda.blockIdx.x
    v = x[r * n + j]
    sq[j] = v * v
    cuda.syncthreads()
    if j == 0:
        total = float32(0.0)
        for k in range(n):
            total += sq[k]
        out[r] = total


@cuda.jit
def row_sum_squares_tree(x, out):
    sq = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    r = cuda.blockIdx.x
    v = x[r * n + j]
    sq[j] = v * v
    cuda.syncthreads()
    half = n // 2
    while half > 0:
        if j < half:
            sq[j] += sq[j + half]
        cuda.syncthreads()
        half //= 2
    if j == 0:
        out[r] = sq[0]


# ---------------------------------------------------------------- ramp.11
@cuda.jit
def warp_sum_butterfly(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(FULL, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_down_bcast(x, out):
    i = cuda.grid(1)
    v = x[i]
    v += cuda.shfl_down_sync(FULL, v, 16)
    v += cuda.shfl_down_sync(FULL, v, 8)
    v += cuda.shfl_down_sync(FULL, v, 4)
    v += cuda.shfl_down_sync(FULL, v, 2)
    v += cuda.shfl_down_sync(FULL, v, 1)
    out[i] = cuda.shfl_sync(FULL, v, 0)


# ---------------------------------------------------------------- ramp.12
@cuda.jit
def dot_rows_plain(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_offset(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    start = t * d
    acc = float32(0.0)
    i = start
    end = start + d
    while i < end:
        acc += q[i] * k[i]
        i += 1
    out[t] = acc


# ---------------------------------------------------------------- ramp.13
@cuda.jit
def qk_scores_tiles(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    tiles[0, ty, tx] = q[(8 * by + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(8 * bx + ty) * 8 + tx]
    cuda.syncthreads()
    acc = float32(0.0)
    for i in range(8):
        acc += tiles[0, ty, i] * tiles[1, tx, i]
    out[(8 * by + ty) * tokens + 8 * bx + tx] = acc


@cuda.jit
def qk_scores_two_arrays(q, k, out, tokens):
    qs = cuda.shared.array(64, float32)
    ks = cuda.shared.array(64, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    qrow0 = cuda.blockIdx.y * 8
    krow0 = cuda.blockIdx.x * 8
    # flat tile copy: thread (tx, ty) copies float ty*8+tx of each 64-float tile
    f = ty * 8 + tx
    qs[f] = q[qrow0 * 8 + f]
    ks[f] = k[krow0 * 8 + f]
    cuda.syncthreads()
    acc = qs[ty * 8] * ks[tx * 8]
    acc += qs[ty * 8 + 1] * ks[tx * 8 + 1]
    acc += qs[ty * 8 + 2] * ks[tx * 8 + 2]
    acc += qs[ty * 8 + 3] * ks[tx * 8 + 3]
    acc += qs[ty * 8 + 4] * ks[tx * 8 + 4]
    acc += qs[ty * 8 + 5] * ks[tx * 8 + 5]
    acc += qs[ty * 8 + 6] * ks[tx * 8 + 6]
    acc += qs[ty * 8 + 7] * ks[tx * 8 + 7]
    out[(qrow0 + ty) * tokens + krow0 + tx] = acc


# ---------------------------------------------------------------- ramp.14
@cuda.jit
def seq_offsets_loop(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = 0
        for j in range(i):
            total += lengths[j]
        out[i] = float32(total)


@cuda.jit
def seq_offsets_scan(lengths, out, n):
    # inclusive warp scan of lengths shifted by one (Hillis-Steele with shuffles)
    i = cuda.threadIdx.x
    v = int32(0)
    if i >= 1 and i <= n:
        v = lengths[i - 1]
    d = 1
    while d < 32:
        u = cuda.shfl_up_sync(FULL, v, d)
        if i >= d:
            v += u
        d *= 2
    if i <= n:
        out[i] = float32(v)


ENTRIES = [
    ("ramp.1", "thread_idx", square_plain),
    ("ramp.1", "grid1_local", square_grid),
    ("ramp.2", "thread_idx", weigh_plain),
    ("ramp.2", "manual_index_locals", weigh_locals),
    ("ramp.3", "if_guard", scale_guarded_if),
    ("ramp.3", "early_return", scale_guarded_return),
    ("ramp.4", "manual_index", scale_blocks_manual),
    ("ramp.4", "grid_early_return", scale_blocks_grid_return),
    ("ramp.4", "grid_stride", scale_blocks_stride),
    ("ramp.5", "blocks_256", launch_scale_256),
    ("ramp.5", "blocks_32", launch_scale_small_blocks),
    ("ramp.5", "fit_or_1024", launch_scale_fit),
    ("ramp.6", "grid2_guard", weigh_rows_grid2),
    ("ramp.6", "manual_two_returns", weigh_rows_manual),
    ("ramp.7", "grid2_guard", angle_table_grid2),
    ("ramp.7", "manual_nested_if", angle_table_manual),
    ("ramp.8", "parity_branch", swap_pairs_branch),
    ("ramp.8", "xor_partner", swap_pairs_xor),
    ("ramp.9", "split_branch", rotate_half_plain),
    ("ramp.9", "modular_partner", rotate_half_mod),
    ("ramp.10", "thread0_loop", row_sum_squares_serial),
    ("ramp.10", "tree_reduction", row_sum_squares_tree),
    ("ramp.11", "xor_butterfly", warp_sum_butterfly),
    ("ramp.11", "down_then_broadcast", warp_sum_down_bcast),
    ("ramp.12", "for_loop", dot_rows_plain),
    ("ramp.12", "while_offsets", dot_rows_offset),
    ("ramp.13", "tiles_3d", qk_scores_tiles),
    ("ramp.13", "flat_tiles_unrolled", qk_scores_two_arrays),
    ("ramp.14", "serial_sum", seq_offsets_loop),
    ("ramp.14", "shuffle_scan", seq_offsets_scan),
]
