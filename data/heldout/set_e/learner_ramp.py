"""On-ramp puzzles ramp.1 .. ramp.14, two or three approaches each."""
import ropelab  # noqa: F401  (must come before numba.cuda: picks the simulator)
import math

from numba import cuda, float32, int32

FULL = 0xFFFFFFFF


# ---------------------------------------------------------------- ramp.1 square
@cuda.jit
def square_plain(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_grid(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v * v


@cuda.jit
def square_pow(x, out):
    # a learner who reaches for the power operator
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    out[i] = x[i] ** 2


# ---------------------------------------------------------------- ramp.2 weigh
@cuda.jit
def weigh_plain(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_loads_first(x, weight, out):
    i = cuda.grid(1)
    a = x[i]
    w = weight[i]
    out[i] = w * a


@cuda.jit
def weigh_fused_expression(x, weight, out):
    # no local: the block offset written out (one block here, so it is 0)
    out[cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x] = (
        weight[cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x]
        * x[cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x])


# ---------------------------------------------------------------- ramp.3 scale_guarded
@cuda.jit
def scale_guarded_if(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_guarded_return(x, out, scale, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = scale * x[i]


# ---------------------------------------------------------------- ramp.4 scale_blocks
@cuda.jit
def scale_blocks_explicit(x, out, scale, n):
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
    # a grid-stride loop: correct for any grid, including the one given
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += step


# ---------------------------------------------------------------- ramp.5 launch_scale
def launch_scale_256(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks_explicit[blocks, threads](x, out, scale, n)


def launch_scale_128(x, out, scale, n):
    threads = 128
    blocks = -(-n // threads)
    scale_blocks_grid_return[blocks, threads](x, out, scale, n)


def launch_scale_fit(x, out, scale, n):
    # as few threads as a warp-rounded block needs, up to 1024
    threads = min(1024, ((n + 31) // 32) * 32)
    blocks = math.ceil(n / threads)
    scale_blocks_explicit[blocks, threads](x, out, scale, n)


# ---------------------------------------------------------------- ramp.6 weigh_rows
@cuda.jit
def weigh_rows_grid2(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_explicit(x, weight, out, tokens, hidden):
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if h >= hidden or t >= tokens:
        return
    k = t * hidden + h
    out[k] = weight[h] * x[k]


# ---------------------------------------------------------------- ramp.7 angle_table
@cuda.jit
def angle_table_grid2(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if t < tokens and j < pairs:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def angle_table_explicit(positions, inv_freq, out, tokens, pairs):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if t >= tokens:
        return
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if j >= pairs:
        return
    p = float32(positions[t])
    f = inv_freq[j]
    out[t * pairs + j] = p * f


# ---------------------------------------------------------------- ramp.8 swap_pairs
@cuda.jit
def swap_pairs_branch(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = -x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_xor(x, out):
    # the partner is i ^ 1; the sign is minus for the even float
    row = cuda.blockIdx.x
    j = cuda.threadIdx.x
    base = row * cuda.blockDim.x
    v = x[base + (j ^ 1)]
    if (j & 1) == 0:
        v = -v
    out[base + j] = v


@cuda.jit
def swap_pairs_sign(x, out):
    i = cuda.grid(1)
    odd = i & 1
    sign = float32(2 * odd - 1)  # -1 for the even float, +1 for the odd one
    out[i] = sign * x[i - odd + (1 - odd)]


# ---------------------------------------------------------------- ramp.9 rotate_half
@cuda.jit
def rotate_half_plain(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    start = cuda.blockIdx.x * hidden
    row[j] = x[start + j]
    cuda.syncthreads()
    h = hidden // 2
    if j < h:
        out[start + j] = -row[j + h]
    else:
        out[start + j] = row[j - h]


@cuda.jit
def rotate_half_partner(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    half = hidden >> 1
    g = cuda.grid(1)
    row[j] = x[g]
    cuda.syncthreads()
    # the partner index wraps round the row by half
    partner = j + half
    sign = float32(-1.0)
    if partner >= hidden:
        partner -= hidden
        sign = float32(1.0)
    out[g] = sign * row[partner]


# ---------------------------------------------------------------- ramp.10 row_sum_squares
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
    v = x[cuda.grid(1)]
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


# ---------------------------------------------------------------- ramp.11 warp_sum
@cuda.jit
def warp_sum_butterfly(x, out):
    i = cuda.grid(1)
    v = x[i]
    v += cuda.shfl_xor_sync(FULL, v, 16)
    v += cuda.shfl_xor_sync(FULL, v, 8)
    v += cuda.shfl_xor_sync(FULL, v, 4)
    v += cuda.shfl_xor_sync(FULL, v, 2)
    v += cuda.shfl_xor_sync(FULL, v, 1)
    out[i] = v


@cuda.jit
def warp_sum_down_broadcast(x, out):
    # tree down to lane 0, then lane 0 hands the total to everyone
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_down_sync(FULL, v, m)
        m //= 2
    v = cuda.shfl_sync(FULL, v, 0)
    out[i] = v


@cuda.jit
def warp_sum_shared(x, out):
    buf = cuda.shared.array(32, float32)
    lane = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[lane] = x[i]
    cuda.syncthreads()
    total = float32(0.0)
    for k in range(32):
        total += buf[k]
    out[i] = total


# ---------------------------------------------------------------- ramp.12 dot_rows
@cuda.jit
def dot_rows_loop(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_while(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    p = t * d
    end = p + d
    acc = float32(0.0)
    while p < end:
        acc += q[p] * k[p]
        p += 1
    out[t] = acc


# ---------------------------------------------------------------- ramp.13 qk_scores
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
    total = float32(0.0)
    for c in range(8):
        total += tiles[0, ty, c] * tiles[1, tx, c]
    out[(8 * by + ty) * tokens + 8 * bx + tx] = total


@cuda.jit
def qk_scores_two_arrays(q, k, out, tokens):
    qt = cuda.shared.array((8, 8), float32)
    kt = cuda.shared.array((8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * 8
    n0 = cuda.blockIdx.x * 8
    qt[ty, tx] = q[(m0 + ty) * 8 + tx]
    kt[ty, tx] = k[(n0 + ty) * 8 + tx]
    cuda.syncthreads()
    s = (qt[ty, 0] * kt[tx, 0] + qt[ty, 1] * kt[tx, 1] + qt[ty, 2] * kt[tx, 2]
         + qt[ty, 3] * kt[tx, 3] + qt[ty, 4] * kt[tx, 4] + qt[ty, 5] * kt[tx, 5]
         + qt[ty, 6] * kt[tx, 6] + qt[ty, 7] * kt[tx, 7])
    out[(m0 + ty) * tokens + n0 + tx] = s


@cuda.jit
def qk_scores_flat_tile(q, k, out, tokens):
    # one flat shared array of 128 floats: queries at 0..63, keys at 64..127
    tile = cuda.shared.array(128, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    n, m = cuda.grid(2)  # key n (x), query m (y)
    key_row = cuda.blockIdx.x * 8 + ty
    tile[ty * 8 + tx] = q[m * 8 + tx]
    tile[64 + ty * 8 + tx] = k[key_row * 8 + tx]
    cuda.syncthreads()
    acc = float32(0.0)
    c = 0
    while c < 8:
        acc += tile[ty * 8 + c] * tile[64 + tx * 8 + c]
        c += 1
    out[m * tokens + n] = acc


# ---------------------------------------------------------------- ramp.14 seq_offsets
@cuda.jit
def seq_offsets_loop(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = 0
        for j in range(i):
            total += lengths[j]
        out[i] = float32(total)


@cuda.jit
def seq_offsets_shuffle_scan(lengths, out, n):
    # inclusive scan of the lengths with shfl_up, then shift by one lane
    i = cuda.threadIdx.x
    v = int32(0)
    if i < n:
        v = lengths[i]
    d = 1
    while d < 32:
        other = cuda.shfl_up_sync(FULL, v, d)
        if i >= d:
            v += other
        d *= 2
    # exclusive: out[i] is the inclusive sum of lane i - 1
    prev = cuda.shfl_up_sync(FULL, v, 1)
    if i == 0:
        prev = 0
    if i <= n:
        out[i] = float32(prev)


@cuda.jit
def seq_offsets_shared(lengths, out, n):
    buf = cuda.shared.array(32, int32)
    i = cuda.threadIdx.x
    if i < n:
        buf[i] = lengths[i]
    cuda.syncthreads()
    if i <= n:
        acc = float32(0.0)
        j = 0
        while j < i:
            acc += float32(buf[j])
            j += 1
        out[i] = acc



# ---------------------------------------------------------------- extra approaches
@cuda.jit
def scale_guarded_loop(x, out, scale, n):
    # a block-stride loop: thread i takes i, i + 32, ... (only i itself, as n <= 32)
    i = cuda.threadIdx.x
    while i < n:
        out[i] = x[i] * scale
        i += cuda.blockDim.x


@cuda.jit
def weigh_rows_stride2(x, weight, out, tokens, hidden):
    h0, t0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    t = t0
    while t < tokens:
        h = h0
        while h < hidden:
            out[t * hidden + h] = x[t * hidden + h] * weight[h]
            h += sx
        t += sy


@cuda.jit
def angle_table_stride2(positions, inv_freq, out, tokens, pairs):
    j0, t0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for t in range(t0, tokens, sy):
        p = float32(positions[t])
        for j in range(j0, pairs, sx):
            out[t * pairs + j] = p * inv_freq[j]


@cuda.jit
def rotate_half_modulo(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    h = hidden // 2
    start = cuda.blockIdx.x * hidden
    row[j] = x[start + j]
    cuda.syncthreads()
    v = row[(j + h) % hidden]
    if j < h:
        v = -v
    out[start + j] = v


@cuda.jit
def row_sum_squares_interleaved(x, out):
    # tree with interleaved addressing: stride 1, 2, 4, ... into thread 0
    sq = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[cuda.blockIdx.x * n + j]
    sq[j] = v * v
    cuda.syncthreads()
    s = 1
    while s < n:
        if j % (2 * s) == 0:
            sq[j] = sq[j] + sq[j + s]
        cuda.syncthreads()
        s *= 2
    if j == 0:
        out[cuda.blockIdx.x] = sq[0]


@cuda.jit
def dot_rows_two_acc(q, k, out, tokens, d):
    # two accumulators, two products a trip, an odd last one on its own
    t = cuda.grid(1)
    if t < tokens:
        base = t * d
        acc0 = float32(0.0)
        acc1 = float32(0.0)
        i = 0
        while i + 1 < d:
            acc0 += q[base + i] * k[base + i]
            acc1 += q[base + i + 1] * k[base + i + 1]
            i += 2
        if i < d:
            acc0 += q[base + i] * k[base + i]
        out[t] = acc0 + acc1

ENTRIES = [
    ("ramp.1", "threadidx_plain", square_plain),
    ("ramp.1", "grid_local_var", square_grid),
    ("ramp.1", "power_operator", square_pow),
    ("ramp.2", "threadidx_plain", weigh_plain),
    ("ramp.2", "grid_loads_first", weigh_loads_first),
    ("ramp.2", "inline_explicit_index", weigh_fused_expression),
    ("ramp.3", "if_guard", scale_guarded_if),
    ("ramp.3", "early_return_grid", scale_guarded_return),
    ("ramp.4", "explicit_index_if", scale_blocks_explicit),
    ("ramp.4", "grid_early_return", scale_blocks_grid_return),
    ("ramp.4", "grid_stride_loop", scale_blocks_stride),
    ("ramp.5", "block256", launch_scale_256),
    ("ramp.5", "block128_negdiv", launch_scale_128),
    ("ramp.5", "block_fit_to_n", launch_scale_fit),
    ("ramp.6", "grid2_if", weigh_rows_grid2),
    ("ramp.6", "explicit_return", weigh_rows_explicit),
    ("ramp.7", "grid2_if", angle_table_grid2),
    ("ramp.7", "explicit_two_returns", angle_table_explicit),
    ("ramp.8", "parity_branch", swap_pairs_branch),
    ("ramp.8", "xor_partner", swap_pairs_xor),
    ("ramp.8", "branchless_sign", swap_pairs_sign),
    ("ramp.9", "shared_branch", rotate_half_plain),
    ("ramp.9", "shared_wrap_partner", rotate_half_partner),
    ("ramp.10", "shared_thread0_loop", row_sum_squares_serial),
    ("ramp.10", "shared_tree", row_sum_squares_tree),
    ("ramp.11", "xor_butterfly_unrolled", warp_sum_butterfly),
    ("ramp.11", "shfl_down_broadcast", warp_sum_down_broadcast),
    ("ramp.11", "shared_every_lane", warp_sum_shared),
    ("ramp.12", "for_loop", dot_rows_loop),
    ("ramp.12", "while_pointer", dot_rows_while),
    ("ramp.13", "tiles_3d_array", qk_scores_tiles),
    ("ramp.13", "two_tiles_unrolled", qk_scores_two_arrays),
    ("ramp.13", "flat_tile_grid2", qk_scores_flat_tile),
    ("ramp.14", "serial_loop", seq_offsets_loop),
    ("ramp.14", "shuffle_scan", seq_offsets_shuffle_scan),
    ("ramp.14", "shared_staged", seq_offsets_shared),
    ("ramp.3", "block_stride_loop", scale_guarded_loop),
    ("ramp.6", "grid_stride_2d", weigh_rows_stride2),
    ("ramp.7", "grid_stride_range_2d", angle_table_stride2),
    ("ramp.9", "shared_modulo_partner", rotate_half_modulo),
    ("ramp.10", "shared_interleaved_tree", row_sum_squares_interleaved),
    ("ramp.12", "two_accumulators", dot_rows_two_acc),
]
