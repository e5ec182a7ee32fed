"""On-ramp puzzles, two or three ways each."""
import math

from numba import cuda, float32, int32

# ---------------- ramp.1 square
@cuda.jit
def square_a(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_b(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[i] = v ** 2


# ---------------- ramp.2 weigh
@cuda.jit
def weigh_a(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_b(x, weight, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= out.shape[0]:
        return
    w = weight[i]
    out[i] = w * x[i]


# ---------------- ramp.3 scale_guarded
@cuda.jit
def scale_guarded_a(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_guarded_b(x, out, scale, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = scale * x[i]


# ---------------- ramp.4 scale_blocks
@cuda.jit
def scale_blocks_a(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_b(x, out, scale, n):
    # grid-stride loop: correct for any grid
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += stride


# ---------------- ramp.5 launch_scale
def launch_scale_a(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks_a[blocks, threads](x, out, scale, n)


def launch_scale_b(x, out, scale, n):
    threads = 128
    blocks = math.ceil(n / threads)
    scale_blocks_b[blocks, threads](x, out, float32(scale), n)


def launch_scale_c(x, out, scale, n):
    # smallest whole number of warps when n fits in one block, else 1024-thread blocks
    if n <= 1024:
        threads = 32 * ((n + 31) // 32)
        blocks = 1
    else:
        threads = 1024
        blocks = -(-n // threads)
    scale_blocks_a[blocks, threads](x, out, scale, n)


# ---------------- ramp.6 weigh_rows
@cuda.jit
def weigh_rows_a(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if h < hidden and t < tokens:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_b(x, weight, out, tokens, hidden):
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if h >= hidden:
        return
    if t >= tokens:
        return
    idx = t * hidden + h
    w = weight[h]
    out[idx] = w * x[idx]


# ---------------- ramp.7 angle_table
@cuda.jit
def angle_table_a(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if j < pairs and t < tokens:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def angle_table_b(positions, inv_freq, out, tokens, pairs):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t < tokens:
        if j < pairs:
            p = float32(positions[t])
            f = inv_freq[j]
            out[t * pairs + j] = f * p


# ---------------- ramp.8 swap_pairs
@cuda.jit
def swap_pairs_a(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i % 2 == 0:
        out[i] = -x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_b(x, out):
    i = cuda.grid(1)
    partner = i ^ 1
    sign = float32(-1.0) if (i & 1) == 0 else float32(1.0)
    out[i] = sign * x[partner]


# ---------------- ramp.9 rotate_half
@cuda.jit
def rotate_half_a(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    base = cuda.blockIdx.x * hidden
    row[j] = x[base + j]
    cuda.syncthreads()
    half = hidden // 2
    if j < half:
        out[base + j] = -row[j + half]
    else:
        out[base + j] = row[j - half]


@cuda.jit
def rotate_half_b(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    g = cuda.grid(1)
    row[j] = x[g]
    cuda.syncthreads()
    half = hidden >> 1
    partner = j + half if j < half else j - half
    v = row[partner]
    if j < half:
        v = -v
    out[g] = v


# ---------------- ramp.10 row_sum_squares
@cuda.jit
def row_sum_squares_a(x, out):
    sq = cuda.shared.array(64, float32)
    n = cuda.blockDim.x
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    v = x[r * n + t]
    sq[t] = v * v
    cuda.syncthreads()
    if t == 0:
        total = float32(0)
        for i in range(n):
            total += sq[i]
        out[r] = total


@cuda.jit
def row_sum_squares_b(x, out):
    # tree reduction, halving the partial sums each step
    sq = cuda.shared.array(64, float32)
    n = cuda.blockDim.x
    t = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * n + t]
    sq[t] = v * v
    cuda.syncthreads()
    s = n // 2
    while s > 0:
        if t < s:
            sq[t] += sq[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = sq[0]


# ---------------- ramp.11 warp_sum
@cuda.jit
def warp_sum_a(x, out):
    i = cuda.grid(1)
    v = x[i]
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 16)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 8)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 4)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 2)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    out[i] = v


@cuda.jit
def warp_sum_b(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    m = 1
    while m < 32:
        v = v + cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
        m *= 2
    out[i] = v


# ---------------- ramp.12 dot_rows
@cuda.jit
def dot_rows_a(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_b(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    start = t * d
    end = start + d
    total = float32(0.0)
    j = start
    while j < end:
        total = total + q[j] * k[j]
        j += 1
    out[t] = total


# ---------------- ramp.13 qk_scores
@cuda.jit
def qk_scores_a(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    qrow = 8 * cuda.blockIdx.y + ty
    krow_for_load = 8 * cuda.blockIdx.x + ty
    tiles[0, ty, tx] = q[qrow * 8 + tx]
    tiles[1, ty, tx] = k[krow_for_load * 8 + tx]
    cuda.syncthreads()
    total = float32(0)
    for i in range(8):
        total += tiles[0, ty, i] * tiles[1, tx, i]
    m = qrow
    n = 8 * cuda.blockIdx.x + tx
    out[m * tokens + n] = total


@cuda.jit
def qk_scores_b(q, k, out, tokens):
    # load transposed tiles: thread (tx, ty) loads float ty of query/key tx
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    tiles[0, tx, ty] = q[(8 * by + tx) * 8 + ty]
    tiles[1, tx, ty] = k[(8 * bx + tx) * 8 + ty]
    cuda.syncthreads()
    acc = float32(0)
    i = 0
    while i < 8:
        acc += tiles[0, ty, i] * tiles[1, tx, i]
        i += 1
    out[(8 * by + ty) * tokens + 8 * bx + tx] = acc


# ---------------- ramp.14 seq_offsets
@cuda.jit
def seq_offsets_a(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = 0
        for j in range(i):
            total += lengths[j]
        out[i] = float32(total)


@cuda.jit
def seq_offsets_b(lengths, out, n):
    # inclusive warp scan with shuffles, shifted by one lane
    i = cuda.threadIdx.x
    v = int32(0)
    if i < n:
        v = lengths[i]
    d = 1
    while d < 32:
        other = cuda.shfl_up_sync(0xFFFFFFFF, v, d)
        if i >= d:
            v += other
        d *= 2
    # v = lengths[0] + ... + lengths[i]; out[i + 1] needs it; out[i] = previous lane's v
    prev = cuda.shfl_up_sync(0xFFFFFFFF, v, 1)
    if i == 0:
        prev = 0
    if i <= n:
        out[i] = float32(prev)


# ---------------- third entries
@cuda.jit
def square_c(x, out):
    i = cuda.grid(1)
    while i < out.size:
        out[i] = x[i] * x[i]
        i += cuda.gridsize(1)


@cuda.jit
def weigh_c(x, weight, out):
    for i in range(cuda.threadIdx.x, x.shape[0], cuda.blockDim.x):
        out[i] = float32(x[i] * weight[i])


@cuda.jit
def scale_guarded_c(x, out, scale, n):
    for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_c(x, out, scale, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        v = x[i]
        out[i] = v * scale


@cuda.jit
def weigh_rows_c(x, weight, out, tokens, hidden):
    # 2-D grid-stride loops
    h0, t = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    while t < tokens:
        h = h0
        while h < hidden:
            out[t * hidden + h] = weight[h] * x[t * hidden + h]
            h += sx
        t += sy


@cuda.jit
def angle_table_c(positions, inv_freq, out, tokens, pairs):
    j = cuda.blockIdx.x * 8 + cuda.threadIdx.x
    t = cuda.blockIdx.y * 4 + cuda.threadIdx.y
    inside = (j < pairs) and (t < tokens)
    if not inside:
        return
    out[t * pairs + j] = inv_freq[j] * float32(positions[t])


@cuda.jit
def swap_pairs_c(x, out):
    # read both floats of the pair, keep the one that is this thread's
    row = cuda.blockIdx.x * cuda.blockDim.x
    j = cuda.threadIdx.x
    first = row + (j // 2) * 2
    a = x[first]
    b = x[first + 1]
    if j - (j // 2) * 2 == 0:
        out[row + j] = -b
    else:
        out[row + j] = a


@cuda.jit
def rotate_half_c(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    half = hidden // 2
    start = cuda.blockIdx.x * hidden
    row[j] = x[start + j]
    cuda.syncthreads()
    partner = (j + half) % hidden
    sign = float32(1.0)
    if j < half:
        sign = float32(-1.0)
    out[start + j] = sign * row[partner]


@cuda.jit
def row_sum_squares_c(x, out):
    # interleaved-addressing tree: stride doubles
    sq = cuda.shared.array(64, float32)
    n = cuda.blockDim.x
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    sq[t] = x[r * n + t] * x[r * n + t]
    cuda.syncthreads()
    s = 1
    while s < n:
        if t % (2 * s) == 0:
            sq[t] = sq[t] + sq[t + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        out[r] = sq[0]


@cuda.jit
def warp_sum_c(x, out):
    # shuffle-down reduction into lane 0, then broadcast lane 0's value
    i = cuda.grid(1)
    v = x[i]
    off = 16
    while off > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
        off //= 2
    total = cuda.shfl_sync(0xFFFFFFFF, v, 0)
    out[i] = total


@cuda.jit
def dot_rows_c(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        acc = float32(0)
        base = t * d
        for i in range(d):
            acc = cuda.fma(q[base + i], k[base + i], acc)
        out[t] = acc


@cuda.jit
def qk_scores_c(q, k, out, tokens):
    # two separate shared tiles, indices from cuda.grid(2), fma accumulation
    qt = cuda.shared.array((8, 8), float32)
    kt = cuda.shared.array((8, 8), float32)
    n, m = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    kt[ty, tx] = k[(cuda.blockIdx.x * 8 + ty) * 8 + tx]
    qt[ty, tx] = q[m * 8 + tx]
    cuda.syncthreads()
    acc = float32(0)
    for i in range(8):
        acc = cuda.fma(qt[ty, i], kt[tx, i], acc)
    out[m * tokens + n] = acc


@cuda.jit
def seq_offsets_c(lengths, out, n):
    # Hillis-Steele exclusive scan in shared memory
    s = cuda.shared.array(32, int32)
    i = cuda.threadIdx.x
    v = 0
    if i >= 1 and i <= n:
        v = lengths[i - 1]
    s[i] = v
    cuda.syncthreads()
    d = 1
    while d < 32:
        add = 0
        if i >= d:
            add = s[i - d]
        cuda.syncthreads()
        s[i] += add
        cuda.syncthreads()
        d *= 2
    if i <= n:
        out[i] = float32(s[i])


ENTRIES = [
    ("ramp.1", "threadIdx", square_a),
    ("ramp.1", "grid1-guard-pow2", square_b),
    ("ramp.1", "grid-stride-while", square_c),
    ("ramp.2", "threadIdx", weigh_a),
    ("ramp.2", "global-index-early-return", weigh_b),
    ("ramp.2", "block-stride-range", weigh_c),
    ("ramp.3", "if-guard", scale_guarded_a),
    ("ramp.3", "grid1-early-return", scale_guarded_b),
    ("ramp.3", "range-loop-bound-n", scale_guarded_c),
    ("ramp.4", "explicit-global-index", scale_blocks_a),
    ("ramp.4", "grid-stride", scale_blocks_b),
    ("ramp.4", "range-grid-stride", scale_blocks_c),
    ("ramp.5", "256-ceil-div", launch_scale_a),
    ("ramp.5", "128-math.ceil-gridstride-kernel", launch_scale_b),
    ("ramp.5", "warp-rounded-or-1024", launch_scale_c),
    ("ramp.6", "grid2-combined-guard", weigh_rows_a),
    ("ramp.6", "explicit-2d-early-returns", weigh_rows_b),
    ("ramp.6", "2d-grid-stride", weigh_rows_c),
    ("ramp.7", "grid2", angle_table_a),
    ("ramp.7", "explicit-2d-nested-if", angle_table_b),
    ("ramp.7", "hardcoded-8x4-bool-guard", angle_table_c),
    ("ramp.8", "even-odd-branch", swap_pairs_a),
    ("ramp.8", "xor-partner-sign", swap_pairs_b),
    ("ramp.8", "load-both-keep-own", swap_pairs_c),
    ("ramp.9", "shared-branch", rotate_half_a),
    ("ramp.9", "shared-partner-index", rotate_half_b),
    ("ramp.9", "shared-mod-partner-sign", rotate_half_c),
    ("ramp.10", "thread0-serial-sum", row_sum_squares_a),
    ("ramp.10", "tree-reduction", row_sum_squares_b),
    ("ramp.10", "interleaved-tree", row_sum_squares_c),
    ("ramp.11", "unrolled-butterfly", warp_sum_a),
    ("ramp.11", "loop-butterfly-up", warp_sum_b),
    ("ramp.11", "shfl-down-broadcast", warp_sum_c),
    ("ramp.12", "for-loop", dot_rows_a),
    ("ramp.12", "while-loop-offsets", dot_rows_b),
    ("ramp.12", "fma-loop", dot_rows_c),
    ("ramp.13", "row-tiles", qk_scores_a),
    ("ramp.13", "transposed-load", qk_scores_b),
    ("ramp.13", "two-tiles-grid2-fma", qk_scores_c),
    ("ramp.14", "serial-per-thread", seq_offsets_a),
    ("ramp.14", "warp-scan-shfl-up", seq_offsets_b),
    ("ramp.14", "shared-hillis-steele", seq_offsets_c),
]
