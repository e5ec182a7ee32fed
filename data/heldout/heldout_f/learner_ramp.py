"""Set F, the on-ramp (notebooks/00_on_ramp.ipynb): puzzles ramp.1 .. ramp.14."""
import ropelab  # noqa: F401  (picks the simulator before numba.cuda loads)

from numba import cuda, float32, int32

FULL_MASK = 0xFFFFFFFF


# ---- ramp.1: square -----------------------------------------------------------------------
@cuda.jit
def square_threadidx(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_grid_local(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v * v


# ---- ramp.2: weigh ------------------------------------------------------------------------
@cuda.jit
def weigh_plain(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_guard_size(x, weight, out):
    i = cuda.grid(1)
    if i < out.size:
        w = weight[i]
        out[i] = w * x[i]


# ---- ramp.3: scale_guarded ----------------------------------------------------------------
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
    for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        out[i] = x[i] * scale


# ---- ramp.4: scale_blocks -----------------------------------------------------------------
@cuda.jit
def scale_blocks_grid(x, out, scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_manual(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    out[i] = x[i] * scale


# ---- ramp.5: launch_scale -----------------------------------------------------------------
def launch_scale_256(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks_grid[blocks, threads](x, out, scale, n)


def launch_scale_fit_block(x, out, scale, n):
    # one block when it fits, else blocks of 1024, rounded up to whole warps
    threads = min(1024, ((n + 31) // 32) * 32)
    blocks = -(-n // threads)
    scale_blocks_manual[blocks, threads](x, out, scale, n)


@cuda.jit
def scale_gridstride(x, out, scale, n):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, n, step):
        out[i] = x[i] * scale


def launch_scale_gridstride(x, out, scale, n):
    threads = 128
    blocks = min((n + threads - 1) // threads, 4)
    scale_gridstride[blocks, threads](x, out, scale, n)


# ---- ramp.6: weigh_rows -------------------------------------------------------------------
@cuda.jit
def weigh_rows_grid2(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_manual(x, weight, out, tokens, hidden):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens or h >= hidden:
        return
    k = t * hidden + h
    out[k] = weight[h] * x[k]


# ---- ramp.7: angle_table ------------------------------------------------------------------
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
            f = inv_freq[j]
            out[t * pairs + j] = f * p


# ---- ramp.8: swap_pairs -------------------------------------------------------------------
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


# ---- ramp.9: rotate_half ------------------------------------------------------------------
@cuda.jit
def rotate_half_branch(x, out):
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
def rotate_half_modulo(x, out):
    buf = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    half = hidden >> 1
    g = cuda.grid(1)
    buf[j] = x[g]
    cuda.syncthreads()
    v = buf[(j + half) % hidden]
    sign = float32(-1.0) if j < half else float32(1.0)
    out[g] = sign * v


# ---- ramp.10: row_sum_squares -------------------------------------------------------------
@cuda.jit
def row_sum_squares_thread0(x, out):
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
    v = x[cuda.blockIdx.x * n + j]
    sq[j] = v * v
    cuda.syncthreads()
    s = n // 2
    while s > 0:
        if j < s:
            sq[j] += sq[j + s]
        cuda.syncthreads()
        s //= 2
    if j == 0:
        out[cuda.blockIdx.x] = sq[0]


# ---- ramp.11: warp_sum --------------------------------------------------------------------
@cuda.jit
def warp_sum_xor_loop(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(FULL_MASK, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_down_broadcast(x, out):
    i = cuda.grid(1)
    v = x[i]
    v += cuda.shfl_down_sync(FULL_MASK, v, 16)
    v += cuda.shfl_down_sync(FULL_MASK, v, 8)
    v += cuda.shfl_down_sync(FULL_MASK, v, 4)
    v += cuda.shfl_down_sync(FULL_MASK, v, 2)
    v += cuda.shfl_down_sync(FULL_MASK, v, 1)
    out[i] = cuda.shfl_sync(FULL_MASK, v, 0)


# ---- ramp.12: dot_rows --------------------------------------------------------------------
@cuda.jit
def dot_rows_loop(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_two_acc(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t >= tokens:
        return
    base = t * d
    a0 = float32(0)
    a1 = float32(0)
    i = 0
    while i + 1 < d:
        a0 += q[base + i] * k[base + i]
        a1 += q[base + i + 1] * k[base + i + 1]
        i += 2
    if i < d:
        a0 += q[base + i] * k[base + i]
    out[t] = a0 + a1


# ---- ramp.13: qk_scores -------------------------------------------------------------------
@cuda.jit
def qk_scores_tiles3d(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    tiles[0, ty, tx] = q[(8 * by + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(8 * bx + ty) * 8 + tx]
    cuda.syncthreads()
    acc = float32(0)
    for c in range(8):
        acc += tiles[0, ty, c] * tiles[1, tx, c]
    out[(8 * by + ty) * tokens + 8 * bx + tx] = acc


@cuda.jit
def qk_scores_two_flat(q, k, out, tokens):
    qs = cuda.shared.array(64, float32)
    ks = cuda.shared.array(64, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * 8
    n0 = cuda.blockIdx.x * 8
    slot = ty * 8 + tx
    qs[slot] = q[m0 * 8 + slot]
    ks[slot] = k[n0 * 8 + slot]
    cuda.syncthreads()
    a = ty * 8
    b = tx * 8
    s = (qs[a] * ks[b] + qs[a + 1] * ks[b + 1] + qs[a + 2] * ks[b + 2] + qs[a + 3] * ks[b + 3]
         + qs[a + 4] * ks[b + 4] + qs[a + 5] * ks[b + 5] + qs[a + 6] * ks[b + 6]
         + qs[a + 7] * ks[b + 7])
    out[(m0 + ty) * tokens + n0 + tx] = s


# ---- ramp.14: seq_offsets -----------------------------------------------------------------
@cuda.jit
def seq_offsets_loop(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = 0
        for j in range(i):
            total += lengths[j]
        out[i] = float32(total)


@cuda.jit
def seq_offsets_shfl_scan(lengths, out, n):
    # exclusive scan by an inclusive warp scan of the value shifted by one lane
    i = cuda.threadIdx.x
    v = int32(0)
    if i >= 1 and i <= n:
        v = lengths[i - 1]
    d = 1
    while d < 32:
        up = cuda.shfl_up_sync(FULL_MASK, v, d)
        if i >= d:
            v += up
        d *= 2
    if i <= n:
        out[i] = float32(v)


@cuda.jit
def seq_offsets_shared_scan(lengths, out, n):
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


ENTRIES = [
    ("ramp.1", "threadidx", square_threadidx),
    ("ramp.1", "grid_local", square_grid_local),
    ("ramp.2", "plain", weigh_plain),
    ("ramp.2", "guard_size", weigh_guard_size),
    ("ramp.3", "if_guard", scale_guarded_if),
    ("ramp.3", "early_return", scale_guarded_return),
    ("ramp.3", "block_loop", scale_guarded_loop),
    ("ramp.4", "grid_guard", scale_blocks_grid),
    ("ramp.4", "manual_return", scale_blocks_manual),
    ("ramp.5", "threads_256", launch_scale_256),
    ("ramp.5", "fit_block_1024", launch_scale_fit_block),
    ("ramp.5", "gridstride_capped", launch_scale_gridstride),
    ("ramp.6", "grid2", weigh_rows_grid2),
    ("ramp.6", "manual_return", weigh_rows_manual),
    ("ramp.7", "grid2", angle_table_grid2),
    ("ramp.7", "manual_nested", angle_table_manual),
    ("ramp.8", "even_odd", swap_pairs_branch),
    ("ramp.8", "xor_partner", swap_pairs_xor),
    ("ramp.9", "branch", rotate_half_branch),
    ("ramp.9", "modulo_sign", rotate_half_modulo),
    ("ramp.10", "thread0_loop", row_sum_squares_thread0),
    ("ramp.10", "tree", row_sum_squares_tree),
    ("ramp.11", "xor_loop", warp_sum_xor_loop),
    ("ramp.11", "down_broadcast", warp_sum_down_broadcast),
    ("ramp.12", "loop", dot_rows_loop),
    ("ramp.12", "two_accumulators", dot_rows_two_acc),
    ("ramp.13", "tiles3d", qk_scores_tiles3d),
    ("ramp.13", "two_flat_unrolled", qk_scores_two_flat),
    ("ramp.14", "loop", seq_offsets_loop),
    ("ramp.14", "shfl_scan", seq_offsets_shfl_scan),
    ("ramp.14", "shared_scan", seq_offsets_shared_scan),
]
