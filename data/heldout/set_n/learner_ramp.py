import math
from numba import cuda, float32, int32


@cuda.jit
def square_a(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_b(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v ** 2


@cuda.jit
def weigh_a(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_b(x, weight, out):
    i = cuda.grid(1)
    if i < out.size:
        w = weight[i]
        out[i] = w * x[i]


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
    out[i] = scale * x[i]


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
    out[i] = x[i] * scale


@cuda.jit
def scale_blocks_stride(x, out, scale, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += step


def launch_scale_a(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks_a[blocks, threads](x, out, float32(scale), n)


def launch_scale_b(x, out, scale, n):
    threads = 64
    blocks = math.ceil(n / threads)
    scale_blocks_stride[blocks, threads](x, out, scale, n)


def launch_scale_c(x, out, scale, n):
    # smallest number of warps that fits in one block, else 1024 per block
    if n <= 1024:
        threads = ((n + 31) // 32) * 32
        blocks = 1
    else:
        threads = 1024
        blocks = -(-n // 1024)
    scale_blocks_b[blocks, threads](x, out, scale, n)


@cuda.jit
def weigh_rows_a(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if h < hidden and t < tokens:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_b(x, weight, out, tokens, hidden):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    h = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    if h >= hidden:
        return
    idx = t * hidden + h
    out[idx] = weight[h] * x[idx]


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
    sign = float32(1.0) if (i & 1) else float32(-1.0)
    out[i] = sign * x[partner]


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
    n = cuda.blockDim.x
    g = cuda.grid(1)
    row[j] = x[g]
    cuda.syncthreads()
    half = n >> 1
    src = (j + half) % n
    v = row[src]
    if j < half:
        v = -v
    out[g] = v


@cuda.jit
def row_sum_squares_a(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    r = cuda.blockIdx.x
    v = x[r * n + t]
    buf[t] = v * v
    cuda.syncthreads()
    if t == 0:
        s = float32(0)
        for k in range(n):
            s += buf[k]
        out[r] = s


@cuda.jit
def row_sum_squares_b(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[cuda.grid(1)]
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


@cuda.jit
def warp_sum_a(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_b(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    v = v + cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    v = v + cuda.shfl_xor_sync(0xFFFFFFFF, v, 2)
    v = v + cuda.shfl_xor_sync(0xFFFFFFFF, v, 4)
    v = v + cuda.shfl_xor_sync(0xFFFFFFFF, v, 8)
    v = v + cuda.shfl_xor_sync(0xFFFFFFFF, v, 16)
    out[i] = v


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
    base = t * d
    total = float32(0.0)
    i = 0
    while i < d:
        a = q[base + i]
        b = k[base + i]
        total = total + a * b
        i += 1
    out[t] = total


@cuda.jit
def qk_scores_a(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    tiles[0, ty, tx] = q[(8 * by + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(8 * bx + ty) * 8 + tx]
    cuda.syncthreads()
    s = float32(0)
    for c in range(8):
        s += tiles[0, ty, c] * tiles[1, tx, c]
    out[(8 * by + ty) * tokens + 8 * bx + tx] = s


@cuda.jit
def qk_scores_b(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    qrow0 = cuda.blockIdx.y * 8
    krow0 = cuda.blockIdx.x * 8
    # thread (tx, ty) loads element ty of row tx for both tiles
    tiles[0, tx, ty] = q[(qrow0 + tx) * 8 + ty]
    tiles[1, tx, ty] = k[(krow0 + tx) * 8 + ty]
    cuda.syncthreads()
    m = qrow0 + ty
    n = krow0 + tx
    acc = float32(0.0)
    c = 7
    while c >= 0:
        acc += tiles[0, ty, c] * tiles[1, tx, c]
        c -= 1
    out[m * tokens + n] = acc


@cuda.jit
def seq_offsets_a(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        s = float32(0)
        for j in range(i):
            s += float32(lengths[j])
        out[i] = s


@cuda.jit
def seq_offsets_b(lengths, out, n):
    # Hillis-Steele inclusive scan in shared memory, shifted by one
    buf = cuda.shared.array(32, float32)
    i = cuda.threadIdx.x
    if i >= 1 and i <= n:
        buf[i] = float32(lengths[i - 1])
    else:
        buf[i] = float32(0)
    cuda.syncthreads()
    off = 1
    while off < 32:
        v = buf[i]
        if i >= off:
            v += buf[i - off]
        cuda.syncthreads()
        buf[i] = v
        cuda.syncthreads()
        off *= 2
    if i <= n:
        out[i] = buf[i]


@cuda.jit
def seq_offsets_c(lengths, out, n):
    # warp scan with shuffles
    i = cuda.threadIdx.x
    v = int32(0)
    if i >= 1 and i <= n:
        v = lengths[i - 1]
    d = 1
    while d < 32:
        u = cuda.shfl_up_sync(0xFFFFFFFF, v, d)
        if i >= d:
            v += u
        d *= 2
    if i <= n:
        out[i] = float32(v)


ENTRIES = [
    ("ramp.1", "threadIdx mul", square_a),
    ("ramp.1", "grid(1) pow2", square_b),
    ("ramp.2", "threadIdx", weigh_a),
    ("ramp.2", "grid guarded by out.size", weigh_b),
    ("ramp.3", "if guard", scale_guarded_a),
    ("ramp.3", "early return", scale_guarded_b),
    ("ramp.4", "explicit global index", scale_blocks_a),
    ("ramp.4", "grid(1) early return", scale_blocks_b),
    ("ramp.4", "grid-stride loop", scale_blocks_stride),
    ("ramp.5", "256 threads ceil-div", launch_scale_a),
    ("ramp.5", "64 threads math.ceil, stride kernel", launch_scale_b),
    ("ramp.5", "one fitted block or 1024s", launch_scale_c),
    ("ramp.6", "grid(2) combined guard", weigh_rows_a),
    ("ramp.6", "explicit indices, two returns", weigh_rows_b),
    ("ramp.7", "grid(2)", angle_table_a),
    ("ramp.7", "explicit, nested ifs", angle_table_b),
    ("ramp.8", "even/odd branch", swap_pairs_a),
    ("ramp.8", "xor partner and sign", swap_pairs_b),
    ("ramp.9", "two-branch read", rotate_half_a),
    ("ramp.9", "modular partner then negate", rotate_half_b),
    ("ramp.10", "thread 0 serial sum", row_sum_squares_a),
    ("ramp.10", "tree reduction", row_sum_squares_b),
    ("ramp.11", "loop butterfly 16..1", warp_sum_a),
    ("ramp.11", "unrolled butterfly 1..16", warp_sum_b),
    ("ramp.12", "for loop", dot_rows_a),
    ("ramp.12", "while loop early return", dot_rows_b),
    ("ramp.13", "row-major tile load", qk_scores_a),
    ("ramp.13", "transposed tile load, reverse loop", qk_scores_b),
    ("ramp.14", "each thread sums its prefix", seq_offsets_a),
    ("ramp.14", "Hillis-Steele shared scan", seq_offsets_b),
    ("ramp.14", "shfl_up warp scan", seq_offsets_c),
]
