"""On-ramp puzzles ramp.1 .. ramp.14, two or three approaches each."""
import ropelab  # noqa: F401  (picks the simulator before numba.cuda loads)

import math

from numba import cuda, float32, int32, int64

FULL = 0xFFFFFFFF


# ---------------- ramp.1 map
@cuda.jit
def square_plain(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_local(x, out):
    v = x[cuda.threadIdx.x]
    out[cuda.threadIdx.x] = v * v


@cuda.jit
def square_grid(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] ** 2


# ---------------- ramp.2 zip
@cuda.jit
def weigh_plain(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_guarded(x, weight, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        w = weight[i]
        out[i] = w * x[i]


# ---------------- ramp.3 guard
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


@cuda.jit
def scale_guarded_loop(x, out, scale, n):
    i = cuda.threadIdx.x
    while i < n:
        out[i] = x[i] * scale
        i += cuda.blockDim.x


# ---------------- ramp.4 several blocks
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


@cuda.jit
def scale_blocks_stride(x, out, scale, n):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += stride


# ---------------- ramp.5 launch
def launch_scale_256(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks[blocks, threads](x, out, scale, n)


def launch_scale_ceil128(x, out, scale, n):
    threads = 128
    blocks = math.ceil(n / threads)
    scale_blocks_grid[blocks, threads](x, out, scale, n)


def launch_scale_fit(x, out, scale, n):
    # as few warps as cover n in one block, else 1024-thread blocks
    if n <= 1024:
        threads = ((n + 31) // 32) * 32
    else:
        threads = 1024
    blocks = -(-n // threads)
    scale_blocks_stride[blocks, threads](x, out, scale, n)


# ---------------- ramp.6 2-D grid
@cuda.jit
def weigh_rows_grid2(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if h < hidden and t < tokens:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_explicit(x, weight, out, tokens, hidden):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens or h >= hidden:
        return
    i = t * hidden + h
    out[i] = weight[h] * x[i]


# ---------------- ramp.7 angle table
@cuda.jit
def angle_table_grid2(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if j < pairs and t < tokens:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def angle_table_explicit(positions, inv_freq, out, tokens, pairs):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t < tokens:
        if j < pairs:
            p = float32(positions[t])
            f = inv_freq[j]
            out[t * pairs + j] = f * p


# ---------------- ramp.8 pair swap
@cuda.jit
def swap_pairs_branch(x, out):
    hidden = cuda.blockDim.x
    h = cuda.threadIdx.x
    i = cuda.blockIdx.x * hidden + h
    if h % 2 == 0:
        out[i] = -x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_xor(x, out):
    i = cuda.grid(1)
    partner = i ^ 1
    v = x[partner]
    if i & 1 == 0:
        v = -v
    out[i] = v


# ---------------- ramp.9 rotate half via shared memory
@cuda.jit
def rotate_half_branch(x, out):
    row = cuda.shared.array(64, float32)
    hidden = cuda.blockDim.x
    j = cuda.threadIdx.x
    base = cuda.blockIdx.x * hidden
    row[j] = x[base + j]
    cuda.syncthreads()
    half = hidden // 2
    if j < half:
        out[base + j] = -row[j + half]
    else:
        out[base + j] = row[j - half]


@cuda.jit
def rotate_half_modular(x, out):
    row = cuda.shared.array(64, float32)
    hidden = cuda.blockDim.x
    half = hidden // 2
    j = cuda.threadIdx.x
    i = cuda.grid(1)
    row[j] = x[i]
    cuda.syncthreads()
    partner = (j + half) % hidden
    sign = float32(-1.0) if j < half else float32(1.0)
    out[i] = sign * row[partner]


# ---------------- ramp.10 block reduction
@cuda.jit
def row_sum_squares_serial(x, out):
    buf = cuda.shared.array(64, float32)
    n = cuda.blockDim.x
    t = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * n + t]
    buf[t] = v * v
    cuda.syncthreads()
    if t == 0:
        s = float32(0.0)
        for k in range(n):
            s += buf[k]
        out[cuda.blockIdx.x] = s


@cuda.jit
def row_sum_squares_tree(x, out):
    buf = cuda.shared.array(64, float32)
    n = cuda.blockDim.x
    t = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * n + t]
    buf[t] = v * v
    cuda.syncthreads()
    half = n // 2
    while half > 0:
        if t < half:
            buf[t] += buf[t + half]
        cuda.syncthreads()
        half //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


# ---------------- ramp.11 warp shuffle
@cuda.jit
def warp_sum_loop(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(FULL, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_unrolled(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    s = x[i]
    s = s + cuda.shfl_xor_sync(FULL, s, 16)
    s = s + cuda.shfl_xor_sync(FULL, s, 8)
    s = s + cuda.shfl_xor_sync(FULL, s, 4)
    s = s + cuda.shfl_xor_sync(FULL, s, 2)
    s = s + cuda.shfl_xor_sync(FULL, s, 1)
    out[i] = s


@cuda.jit
def warp_sum_down(x, out):
    # tree down to lane 0, then broadcast
    i = cuda.grid(1)
    v = x[i]
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(FULL, v, off)
    out[i] = cuda.shfl_sync(FULL, v, 0)


# ---------------- ramp.12 dot product
@cuda.jit
def dot_rows_loop(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for j in range(d):
            total += q[t * d + j] * k[t * d + j]
        out[t] = total


@cuda.jit
def dot_rows_while(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    start = t * d
    end = start + d
    acc = float32(0.0)
    i = start
    while i < end:
        acc += q[i] * k[i]
        i += 1
    out[t] = acc


# ---------------- ramp.13 tiled QK^T
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
    s = float32(0.0)
    for j in range(8):
        s += tiles[0, ty, j] * tiles[1, tx, j]
    out[(8 * by + ty) * tokens + 8 * bx + tx] = s


@cuda.jit
def qk_scores_two_arrays(q, k, out, tokens):
    qt = cuda.shared.array((8, 8), float32)
    kt = cuda.shared.array((8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * 8
    n0 = cuda.blockIdx.x * 8
    # each thread loads row tx / column ty transposed: a different load pattern
    qt[tx, ty] = q[(m0 + tx) * 8 + ty]
    kt[tx, ty] = k[(n0 + tx) * 8 + ty]
    cuda.syncthreads()
    m = m0 + ty
    n = n0 + tx
    out[m * tokens + n] = (qt[ty, 0] * kt[tx, 0] + qt[ty, 1] * kt[tx, 1]
                           + qt[ty, 2] * kt[tx, 2] + qt[ty, 3] * kt[tx, 3]
                           + qt[ty, 4] * kt[tx, 4] + qt[ty, 5] * kt[tx, 5]
                           + qt[ty, 6] * kt[tx, 6] + qt[ty, 7] * kt[tx, 7])


# ---------------- ramp.14 prefix sum
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
    # inclusive warp scan (Hillis-Steele with shuffles), shifted by one
    i = cuda.threadIdx.x
    v = int32(0)
    if i >= 1 and i <= n:
        v = lengths[i - 1]
    off = 1
    while off < 32:
        u = cuda.shfl_up_sync(FULL, v, off)
        if i >= off:
            v += u
        off *= 2
    if i <= n:
        out[i] = float32(v)


@cuda.jit
def seq_offsets_shared(lengths, out, n):
    buf = cuda.shared.array(32, int32)
    i = cuda.threadIdx.x
    if i < n:
        buf[i] = lengths[i]
    cuda.syncthreads()
    if i <= n:
        s = int32(0)
        j = 0
        while j < i:
            s += buf[j]
            j += 1
        out[i] = float32(s)


ENTRIES = [
    ("ramp.1", "plain", square_plain),
    ("ramp.1", "local_var", square_local),
    ("ramp.1", "grid_guard_pow", square_grid),
    ("ramp.2", "plain", weigh_plain),
    ("ramp.2", "grid_guard", weigh_guarded),
    ("ramp.3", "if_guard", scale_guarded_if),
    ("ramp.3", "early_return", scale_guarded_return),
    ("ramp.3", "block_stride_loop", scale_guarded_loop),
    ("ramp.4", "explicit_index", scale_blocks),
    ("ramp.4", "grid_early_return", scale_blocks_grid),
    ("ramp.4", "grid_stride", scale_blocks_stride),
    ("ramp.5", "blocks256", launch_scale_256),
    ("ramp.5", "ceil128", launch_scale_ceil128),
    ("ramp.5", "fit_warps_or_1024", launch_scale_fit),
    ("ramp.6", "grid2", weigh_rows_grid2),
    ("ramp.6", "explicit_return", weigh_rows_explicit),
    ("ramp.7", "grid2", angle_table_grid2),
    ("ramp.7", "explicit_nested_if", angle_table_explicit),
    ("ramp.8", "parity_branch", swap_pairs_branch),
    ("ramp.8", "xor_partner", swap_pairs_xor),
    ("ramp.9", "half_branch", rotate_half_branch),
    ("ramp.9", "modular_sign", rotate_half_modular),
    ("ramp.10", "thread0_serial", row_sum_squares_serial),
    ("ramp.10", "tree", row_sum_squares_tree),
    ("ramp.11", "xor_loop", warp_sum_loop),
    ("ramp.11", "xor_unrolled", warp_sum_unrolled),
    ("ramp.11", "down_then_broadcast", warp_sum_down),
    ("ramp.12", "for_loop", dot_rows_loop),
    ("ramp.12", "while_pointer", dot_rows_while),
    ("ramp.13", "tiles_3d", qk_scores_tiles),
    ("ramp.13", "two_tiles_transposed_unrolled", qk_scores_two_arrays),
    ("ramp.14", "thread_loop", seq_offsets_loop),
    ("ramp.14", "warp_shuffle_scan", seq_offsets_scan),
    ("ramp.14", "shared_then_loop", seq_offsets_shared),
]
