import ropelab  # noqa: F401
import math

from numba import cuda, float32, int32


# ---------------- ramp.1 square ----------------
@cuda.jit
def square_tid(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_grid(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v * v


# ---------------- ramp.2 weigh ----------------
@cuda.jit
def weigh_tid(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_loads_first(x, weight, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    a = x[i]
    w = weight[i]
    out[i] = a * w


# ---------------- ramp.3 scale_guarded ----------------
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
    out[i] = x[i] * scale


# ---------------- ramp.4 scale_blocks ----------------
@cuda.jit
def scale_blocks(x, out, scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_manual(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    out[i] = x[i] * scale


@cuda.jit
def scale_blocks_stride(x, out, scale, n):
    # grid-stride loop: also correct for a grid that covers n exactly once
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += stride


# ---------------- ramp.5 launch_scale ----------------
def launch_scale_256(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks[blocks, threads](x, out, scale, n)


def launch_scale_128_ceil(x, out, scale, n):
    threads = 128
    blocks = math.ceil(n / threads)
    scale_blocks_manual[blocks, threads](x, out, scale, n)


def launch_scale_1024(x, out, scale, n):
    threads = 1024 if n > 512 else 32 * ((n + 31) // 32)
    blocks = -(-n // threads)
    scale_blocks_stride[blocks, threads](x, out, scale, n)


# ---------------- ramp.6 weigh_rows ----------------
@cuda.jit
def weigh_rows_grid2(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if h < hidden and t < tokens:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_manual(x, weight, out, tokens, hidden):
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if h >= hidden or t >= tokens:
        return
    idx = t * hidden + h
    out[idx] = x[idx] * weight[h]


# ---------------- ramp.7 angle_table ----------------
@cuda.jit
def angle_table_grid2(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if j < pairs and t < tokens:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def angle_table_manual(positions, inv_freq, out, tokens, pairs):
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if t >= tokens:
        return
    if j >= pairs:
        return
    p = float32(positions[t])
    f = inv_freq[j]
    out[t * pairs + j] = p * f


# ---------------- ramp.8 swap_pairs ----------------
@cuda.jit
def swap_pairs_branch(x, out):
    hidden = cuda.blockDim.x
    i = cuda.blockIdx.x * hidden + cuda.threadIdx.x
    if cuda.threadIdx.x % 2 == 0:
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


# ---------------- ramp.9 rotate_half ----------------
@cuda.jit
def rotate_half_shared(x, out):
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
def rotate_half_shared_partner(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    hidden = cuda.blockDim.x
    half = hidden >> 1
    i = cuda.grid(1)
    row[j] = x[i]
    cuda.syncthreads()
    if j >= half:
        v = row[j - half]
    else:
        v = -row[j + half]
    out[i] = v


# ---------------- ramp.10 row_sum_squares ----------------
@cuda.jit
def row_sum_squares_serial(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[cuda.blockIdx.x * n + t]
    buf[t] = v * v
    cuda.syncthreads()
    if t == 0:
        total = float32(0)
        for k in range(n):
            total += buf[k]
        out[cuda.blockIdx.x] = total


@cuda.jit
def row_sum_squares_tree(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
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


# ---------------- ramp.11 warp_sum ----------------
@cuda.jit
def warp_sum_loop(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_unrolled(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 16)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 8)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 4)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 2)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    out[i] = v


@cuda.jit
def warp_sum_shared(x, out):
    # no shuffle: stage the warp in shared memory, every lane adds all 32
    buf = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 32 + t
    buf[t] = x[i]
    cuda.syncthreads()
    total = float32(0)
    for k in range(32):
        total += buf[k]
    out[i] = total


# ---------------- ramp.12 dot_rows ----------------
@cuda.jit
def dot_rows_for(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_offset_while(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    base = t * d
    end = base + d
    total = float32(0.0)
    j = base
    while j < end:
        total += q[j] * k[j]
        j += 1
    out[t] = total


# ---------------- ramp.13 qk_scores ----------------
@cuda.jit
def qk_scores_tiles(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m = cuda.blockIdx.y * 8 + ty
    n = cuda.blockIdx.x * 8 + tx
    # thread (tx, ty) loads float tx of query row ty and float tx of key row ty
    tiles[0, ty, tx] = q[m * 8 + tx]
    tiles[1, ty, tx] = k[(cuda.blockIdx.x * 8 + ty) * 8 + tx]
    cuda.syncthreads()
    total = float32(0)
    for c in range(8):
        total += tiles[0, ty, c] * tiles[1, tx, c]
    out[m * tokens + n] = total


@cuda.jit
def qk_scores_tiles_grid(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    n, m = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    # loaded the other way round: thread (tx, ty) loads float ty of query tx / key tx
    qrow = cuda.blockIdx.y * 8 + tx
    krow = cuda.blockIdx.x * 8 + tx
    tiles[0, tx, ty] = q[qrow * 8 + ty]
    tiles[1, tx, ty] = k[krow * 8 + ty]
    cuda.syncthreads()
    a = float32(0)
    b = float32(0)
    for c in range(0, 8, 2):
        a += tiles[0, ty, c] * tiles[1, tx, c]
        b += tiles[0, ty, c + 1] * tiles[1, tx, c + 1]
    out[m * tokens + n] = a + b


# ---------------- ramp.14 seq_offsets ----------------
@cuda.jit
def seq_offsets_serial(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = 0
        for j in range(i):
            total += lengths[j]
        out[i] = float32(total)


@cuda.jit
def seq_offsets_scan(lengths, out, n):
    # Hillis-Steele inclusive scan over shifted lengths in shared memory
    buf = cuda.shared.array(32, int32)
    i = cuda.threadIdx.x
    v = 0
    if i >= 1 and i <= n:
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


@cuda.jit
def seq_offsets_shfl(lengths, out, n):
    # warp shuffle scan
    i = cuda.threadIdx.x
    v = float32(0)
    if i >= 1 and i <= n:
        v = float32(lengths[i - 1])
    off = 1
    while off < 32:
        u = cuda.shfl_up_sync(0xFFFFFFFF, v, off)
        if i >= off:
            v += u
        off *= 2
    if i <= n:
        out[i] = v



@cuda.jit
def weigh_rows_stride2d(x, weight, out, tokens, hidden):
    # 2-D grid-stride loops over both axes
    h0, t = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    while t < tokens:
        h = h0
        while h < hidden:
            out[t * hidden + h] = x[t * hidden + h] * weight[h]
            h += sx
        t += sy


@cuda.jit
def angle_table_flat(positions, inv_freq, out, tokens, pairs):
    # 2-D launch flattened into one index, then divided back
    bx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    by = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if bx < pairs and by < tokens:
        idx = by * pairs + bx
        t = idx // pairs
        j = idx - t * pairs
        out[idx] = float32(positions[t]) * inv_freq[j]


@cuda.jit
def dot_rows_unroll4(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        base = t * d
        a0 = float32(0)
        a1 = float32(0)
        j = 0
        while j + 1 < d:
            a0 += q[base + j] * k[base + j]
            a1 += q[base + j + 1] * k[base + j + 1]
            j += 2
        if j < d:
            a0 += q[base + j] * k[base + j]
        out[t] = a0 + a1


@cuda.jit
def qk_scores_local(q, k, out, tokens):
    # tiles in shared memory, the thread's query row copied into a local array first
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tiles[0, ty, tx] = q[(cuda.blockIdx.y * 8 + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(cuda.blockIdx.x * 8 + ty) * 8 + tx]
    cuda.syncthreads()
    mine = cuda.local.array(8, float32)
    for c in range(8):
        mine[c] = tiles[0, ty, c]
    total = float32(0)
    for c in range(8):
        total += mine[c] * tiles[1, tx, c]
    out[(cuda.blockIdx.y * 8 + ty) * tokens + cuda.blockIdx.x * 8 + tx] = total

ENTRIES = [
    ("ramp.1", "square_threadIdx", square_tid),
    ("ramp.1", "grid1_local", square_grid),
    ("ramp.2", "weigh_threadIdx", weigh_tid),
    ("ramp.2", "manual_loads_first", weigh_loads_first),
    ("ramp.3", "if_guard", scale_guarded_if),
    ("ramp.3", "early_return", scale_guarded_return),
    ("ramp.4", "grid1_guard", scale_blocks),
    ("ramp.4", "blocks_manual_return", scale_blocks_manual),
    ("ramp.4", "grid_stride", scale_blocks_stride),
    ("ramp.5", "b256_intceil", launch_scale_256),
    ("ramp.5", "b128_mathceil", launch_scale_128_ceil),
    ("ramp.5", "b1024_stride_kernel", launch_scale_1024),
    ("ramp.6", "weigh_grid2", weigh_rows_grid2),
    ("ramp.6", "rows_manual_return", weigh_rows_manual),
    ("ramp.7", "angle_grid2", angle_table_grid2),
    ("ramp.7", "manual_two_returns", angle_table_manual),
    ("ramp.8", "mod_branch", swap_pairs_branch),
    ("ramp.8", "xor_partner", swap_pairs_xor),
    ("ramp.9", "shared_if", rotate_half_shared),
    ("ramp.9", "shared_shift", rotate_half_shared_partner),
    ("ramp.10", "shared_serial", row_sum_squares_serial),
    ("ramp.10", "shared_tree", row_sum_squares_tree),
    ("ramp.11", "shfl_loop", warp_sum_loop),
    ("ramp.11", "shfl_unrolled", warp_sum_unrolled),
    ("ramp.11", "shared_no_shfl", warp_sum_shared),
    ("ramp.12", "for_loop", dot_rows_for),
    ("ramp.12", "while_offset", dot_rows_offset_while),
    ("ramp.13", "tiles_rowload", qk_scores_tiles),
    ("ramp.13", "tiles_transposed_unroll2", qk_scores_tiles_grid),
    ("ramp.14", "serial_sum", seq_offsets_serial),
    ("ramp.14", "shared_hillis_steele", seq_offsets_scan),
    ("ramp.14", "shfl_up_scan", seq_offsets_shfl),
    ("ramp.6", "grid_stride_2d", weigh_rows_stride2d),
    ("ramp.7", "flattened_divmod", angle_table_flat),
    ("ramp.12", "two_accumulators", dot_rows_unroll4),
    ("ramp.13", "tiles_local_row", qk_scores_local),
]
