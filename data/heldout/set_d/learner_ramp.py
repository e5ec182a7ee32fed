"""On-ramp puzzles (ramp.1 .. ramp.14), written from the notebook's text."""
from numba import cuda, float32


# ---------------------------------------------------------------- ramp.1
@cuda.jit
def square(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_grid(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v * v


# ---------------------------------------------------------------- ramp.2
@cuda.jit
def weigh(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_loaded(x, weight, out):
    i = cuda.grid(1)
    a = x[i]
    w = weight[i]
    out[i] = w * a


# ---------------------------------------------------------------- ramp.3
@cuda.jit
def scale_guarded(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_guarded_early_return(x, out, scale, n):
    i = cuda.threadIdx.x
    if i >= n:
        return
    out[i] = scale * x[i]


# ---------------------------------------------------------------- ramp.4
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
    # grid-stride loop: works for any grid, here one pass per thread
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += stride


# ---------------------------------------------------------------- ramp.5
def launch_scale(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks[blocks, threads](x, out, float32(scale), n)


def launch_scale_128(x, out, scale, n):
    threads = 128
    blocks = -(-n // threads)
    scale_blocks_grid[blocks, threads](x, out, float32(scale), n)


def launch_scale_1024(x, out, scale, n):
    threads = min(1024, ((n + 31) // 32) * 32)
    blocks = (n + threads - 1) // threads
    scale_blocks[blocks, threads](x, out, float32(scale), n)


# ---------------------------------------------------------------- ramp.6
@cuda.jit
def weigh_rows(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_explicit(x, weight, out, tokens, hidden):
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if h >= hidden:
        return
    if t >= tokens:
        return
    idx = t * hidden + h
    w = weight[h]
    out[idx] = w * x[idx]


# ---------------------------------------------------------------- ramp.7
@cuda.jit
def angle_table(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if t < tokens and j < pairs:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def angle_table_explicit(positions, inv_freq, out, tokens, pairs):
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if t >= tokens or j >= pairs:
        return
    p = float32(positions[t])
    f = inv_freq[j]
    out[t * pairs + j] = p * f


# ---------------------------------------------------------------- ramp.8
@cuda.jit
def swap_pairs(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = -x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_xor(x, out):
    row = cuda.blockIdx.x * cuda.blockDim.x
    j = cuda.threadIdx.x
    partner = j ^ 1
    v = x[row + partner]
    if j & 1:
        out[row + j] = v
    else:
        out[row + j] = -v


# ---------------------------------------------------------------- ramp.9
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
def rotate_half_partner(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    h = hidden >> 1
    i = cuda.grid(1)
    row[j] = x[i]
    cuda.syncthreads()
    if j >= h:
        v = row[j - h]
    else:
        v = -row[j + h]
    out[i] = v


# ---------------------------------------------------------------- ramp.10
@cuda.jit
def row_sum_squares(x, out):
    sq = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    r = cuda.blockIdx.x
    v = x[r * n + j]
    sq[j] = v * v
    cuda.syncthreads()
    if j == 0:
        total = float32(0)
        for k in range(n):
            total += sq[k]
        out[r] = total


@cuda.jit
def row_sum_squares_tree(x, out):
    sq = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[cuda.blockIdx.x * n + j]
    sq[j] = v * v
    cuda.syncthreads()
    half = n // 2
    while half > 0:
        if j < half:
            sq[j] += sq[j + half]
        cuda.syncthreads()
        half //= 2
    if j == 0:
        out[cuda.blockIdx.x] = sq[0]


# ---------------------------------------------------------------- ramp.11
@cuda.jit
def warp_sum(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_unrolled(x, out):
    i = cuda.grid(1)
    v = x[i]
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 16)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 8)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 4)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 2)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    out[i] = v


# ---------------------------------------------------------------- ramp.12
@cuda.jit
def dot_rows(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_offset(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t >= tokens:
        return
    start = t * d
    total = float32(0)
    i = start
    end = start + d
    while i < end:
        total += q[i] * k[i]
        i += 1
    out[t] = total


# ---------------------------------------------------------------- ramp.13
@cuda.jit
def qk_scores(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m = 8 * cuda.blockIdx.y + ty
    n = 8 * cuda.blockIdx.x + tx
    # thread (tx, ty) loads float tx of tile row ty, for the queries and for the keys
    tiles[0, ty, tx] = q[(8 * cuda.blockIdx.y + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(8 * cuda.blockIdx.x + ty) * 8 + tx]
    cuda.syncthreads()
    total = float32(0)
    for f in range(8):
        total += tiles[0, ty, f] * tiles[1, tx, f]
    out[m * tokens + n] = total


@cuda.jit
def qk_scores_transposed_load(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    # thread (tx, ty) loads float ty of query 8 by + tx and of key 8 bx + tx
    tiles[0, tx, ty] = q[(8 * by + tx) * 8 + ty]
    tiles[1, tx, ty] = k[(8 * bx + tx) * 8 + ty]
    cuda.syncthreads()
    a0 = tiles[0, ty, 0] * tiles[1, tx, 0]
    a1 = tiles[0, ty, 1] * tiles[1, tx, 1]
    a2 = tiles[0, ty, 2] * tiles[1, tx, 2]
    a3 = tiles[0, ty, 3] * tiles[1, tx, 3]
    a4 = tiles[0, ty, 4] * tiles[1, tx, 4]
    a5 = tiles[0, ty, 5] * tiles[1, tx, 5]
    a6 = tiles[0, ty, 6] * tiles[1, tx, 6]
    a7 = tiles[0, ty, 7] * tiles[1, tx, 7]
    out[(8 * by + ty) * tokens + 8 * bx + tx] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


# ---------------------------------------------------------------- ramp.14
@cuda.jit
def seq_offsets(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = 0
        for j in range(i):
            total += lengths[j]
        out[i] = float32(total)


@cuda.jit
def seq_offsets_shared_scan(lengths, out, n):
    # Hillis-Steele inclusive scan of shifted lengths in shared memory
    buf = cuda.shared.array(32, float32)
    i = cuda.threadIdx.x
    v = float32(0)
    if i >= 1 and i <= n:
        v = float32(lengths[i - 1])
    buf[i] = v
    cuda.syncthreads()
    d = 1
    while d < 32:
        add = float32(0)
        if i >= d:
            add = buf[i - d]
        cuda.syncthreads()
        buf[i] += add
        cuda.syncthreads()
        d *= 2
    if i <= n:
        out[i] = buf[i]


@cuda.jit
def seq_offsets_shuffle(lengths, out, n):
    i = cuda.threadIdx.x
    v = float32(0)
    if i >= 1 and i <= n:
        v = float32(lengths[i - 1])
    d = 1
    while d < 32:
        other = cuda.shfl_up_sync(0xFFFFFFFF, v, d)
        if i >= d:
            v += other
        d *= 2
    if i <= n:
        out[i] = v


ENTRIES = [
    ("ramp.1", "thread_idx", square),
    ("ramp.1", "grid1_loaded", square_grid),
    ("ramp.2", "thread_idx", weigh),
    ("ramp.2", "grid1_loaded", weigh_loaded),
    ("ramp.3", "if_guard", scale_guarded),
    ("ramp.3", "early_return", scale_guarded_early_return),
    ("ramp.4", "explicit_index", scale_blocks),
    ("ramp.4", "grid1_return", scale_blocks_grid),
    ("ramp.4", "grid_stride", scale_blocks_stride),
    ("ramp.5", "blocks_256", launch_scale),
    ("ramp.5", "blocks_128_neg_div", launch_scale_128),
    ("ramp.5", "up_to_1024", launch_scale_1024),
    ("ramp.6", "grid2", weigh_rows),
    ("ramp.6", "explicit_2d_hoisted", weigh_rows_explicit),
    ("ramp.7", "grid2", angle_table),
    ("ramp.7", "explicit_2d", angle_table_explicit),
    ("ramp.8", "mod_branch", swap_pairs),
    ("ramp.8", "xor_partner", swap_pairs_xor),
    ("ramp.9", "shared_row", rotate_half),
    ("ramp.9", "shared_row_shift", rotate_half_partner),
    ("ramp.10", "serial_thread0", row_sum_squares),
    ("ramp.10", "tree", row_sum_squares_tree),
    ("ramp.11", "loop_butterfly", warp_sum),
    ("ramp.11", "unrolled_butterfly", warp_sum_unrolled),
    ("ramp.12", "for_loop", dot_rows),
    ("ramp.12", "while_offset", dot_rows_offset),
    ("ramp.13", "tile_loop", qk_scores),
    ("ramp.13", "transposed_unrolled", qk_scores_transposed_load),
    ("ramp.14", "serial_sum", seq_offsets),
    ("ramp.14", "shared_scan", seq_offsets_shared_scan),
    ("ramp.14", "shuffle_scan", seq_offsets_shuffle),
]
