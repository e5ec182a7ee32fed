import math
from numba import cuda, float32


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


@cuda.jit
def weigh_a(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_b(x, weight, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
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
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = x[i] * scale
        i += stride


def launch_scale_a(x, out, scale, n):
    tpb = 128
    blocks = (n + tpb - 1) // tpb
    scale_blocks_a[blocks, tpb](x, out, scale, n)


def launch_scale_b(x, out, scale, n):
    tpb = 32
    blocks = max(1, math.ceil(n / tpb))
    scale_blocks_b[blocks, tpb](x, out, scale, n)


@cuda.jit
def weigh_rows_a(x, weight, out, tokens, hidden):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if col < hidden and row < tokens:
        out[row * hidden + col] = x[row * hidden + col] * weight[col]


@cuda.jit
def weigh_rows_b(x, weight, out, tokens, hidden):
    c, r = cuda.grid(2)
    if r >= tokens or c >= hidden:
        return
    idx = r * hidden + c
    out[idx] = weight[c] * x[idx]


@cuda.jit
def angle_table_a(positions, inv_freq, out, tokens, pairs):
    p, t = cuda.grid(2)
    if p < pairs and t < tokens:
        out[t * pairs + p] = float32(positions[t]) * inv_freq[p]


@cuda.jit
def angle_table_b(positions, inv_freq, out, tokens, pairs):
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    if p >= pairs:
        return
    pos = positions[t]
    f = inv_freq[p]
    out[t * pairs + p] = f * float32(pos)


@cuda.jit
def swap_pairs_a(x, out):
    # out[2k] = -x[2k+1], out[2k+1] = x[2k]
    t = cuda.blockIdx.x
    i = cuda.threadIdx.x
    h = cuda.blockDim.x
    base = t * h
    if i % 2 == 0:
        out[base + i] = -x[base + i + 1]
    else:
        out[base + i] = x[base + i - 1]


@cuda.jit
def swap_pairs_b(x, out):
    g = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    partner = g ^ 1
    v = x[partner]
    if g & 1:
        out[g] = v
    else:
        out[g] = -v


@cuda.jit
def rotate_half_a(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.blockIdx.x
    i = cuda.threadIdx.x
    h = cuda.blockDim.x
    half = h // 2
    buf[i] = x[t * h + i]
    cuda.syncthreads()
    if i < half:
        out[t * h + i] = -buf[i + half]
    else:
        out[t * h + i] = buf[i - half]


@cuda.jit
def rotate_half_b(x, out):
    buf = cuda.shared.array(64, float32)
    i = cuda.threadIdx.x
    h = cuda.blockDim.x
    row = cuda.blockIdx.x * h
    half = h >> 1
    buf[i] = x[row + i]
    cuda.syncthreads()
    src = (i + half) % h
    v = buf[src]
    out[row + i] = -v if i < half else v


@cuda.jit
def row_sum_squares_a(x, out):
    buf = cuda.shared.array(64, float32)
    r = cuda.blockIdx.x
    i = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[r * n + i]
    buf[i] = v * v
    cuda.syncthreads()
    s = n // 2
    while s > 0:
        if i < s:
            buf[i] += buf[i + s]
        cuda.syncthreads()
        s //= 2
    if i == 0:
        out[r] = buf[0]


@cuda.jit
def row_sum_squares_b(x, out):
    buf = cuda.shared.array(64, float32)
    r = cuda.blockIdx.x
    i = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[r * n + i]
    buf[i] = v * v
    cuda.syncthreads()
    if i == 0:
        acc = float32(0.0)
        for k in range(n):
            acc += buf[k]
        out[r] = acc


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
def warp_sum_b(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xffffffff, v, off)
    total = cuda.shfl_sync(0xffffffff, v, 0)
    out[i] = total


@cuda.jit
def dot_rows_a(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        acc = float32(0.0)
        for j in range(d):
            acc += q[t * d + j] * k[t * d + j]
        out[t] = acc


@cuda.jit
def dot_rows_b(q, k, out, tokens, d):
    t = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if t >= tokens:
        return
    base = t * d
    acc = float32(0.0)
    j = 0
    while j < d:
        acc = cuda.fma(q[base + j], k[base + j], acc)
        j += 1
    out[t] = acc


@cuda.jit
def qk_scores_a(q, k, out, tokens):
    qs = cuda.shared.array((8, 8), float32)
    ks = cuda.shared.array((8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    qrow = cuda.blockIdx.y * 8 + ty
    krow = cuda.blockIdx.x * 8 + ty
    qs[ty, tx] = q[qrow * 8 + tx]
    ks[ty, tx] = k[krow * 8 + tx]
    cuda.syncthreads()
    acc = float32(0.0)
    for j in range(8):
        acc += qs[ty, j] * ks[tx, j]
    out[qrow * tokens + cuda.blockIdx.x * 8 + tx] = acc


@cuda.jit
def qk_scores_b(q, k, out, tokens):
    qs = cuda.shared.array(64, float32)
    ks = cuda.shared.array(64, float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    lin = ty * 8 + tx
    q0 = cuda.blockIdx.y * 64
    k0 = cuda.blockIdx.x * 64
    ks[lin] = k[k0 + lin]
    qs[lin] = q[q0 + lin]
    cuda.syncthreads()
    acc = float32(0.0)
    j = 0
    while j < 8:
        acc = cuda.fma(qs[ty * 8 + j], ks[tx * 8 + j], acc)
        j += 1
    qi = cuda.blockIdx.y * 8 + ty
    kj = cuda.blockIdx.x * 8 + tx
    out[qi * tokens + kj] = acc


@cuda.jit
def seq_offsets_a(lengths, out, n):
    # exclusive prefix sum: out[i] = sum(lengths[:i]), i in 0..n
    i = cuda.threadIdx.x
    if i <= n:
        acc = float32(0.0)
        for j in range(i):
            acc += float32(lengths[j])
        out[i] = acc


@cuda.jit
def seq_offsets_b(lengths, out, n):
    buf = cuda.shared.array(32, float32)
    i = cuda.threadIdx.x
    # shift right by one: slot i holds lengths[i-1]
    if i >= 1 and i <= n:
        buf[i] = float32(lengths[i - 1])
    else:
        buf[i] = float32(0.0)
    cuda.syncthreads()
    off = 1
    while off < 32:
        v = float32(0.0)
        if i >= off:
            v = buf[i - off]
        cuda.syncthreads()
        buf[i] += v
        cuda.syncthreads()
        off *= 2
    if i <= n:
        out[i] = buf[i]


@cuda.jit
def seq_offsets_c(lengths, out, n):
    i = cuda.threadIdx.x
    v = 0
    if i >= 1 and i <= n:
        v = lengths[i - 1]
    off = 1
    while off < 32:
        u = cuda.shfl_up_sync(0xffffffff, v, off)
        if i >= off:
            v += u
        off *= 2
    if i <= n:
        out[i] = float32(v)


ENTRIES = [
    ("ramp.1", "threadidx", square_a),
    ("ramp.2", "threadidx", weigh_a),
    ("ramp.2", "grid1-guard", weigh_b),
    ("ramp.1", "grid1-pow2", square_b),
    ("ramp.3", "if-guard", scale_guarded_a),
    ("ramp.3", "early-return", scale_guarded_b),
    ("ramp.4", "manual-index", scale_blocks_a),
    ("ramp.4", "grid-stride", scale_blocks_b),
    ("ramp.5", "tpb128", launch_scale_a),
    ("ramp.5", "tpb32-gridstride", launch_scale_b),
    ("ramp.6", "manual-2d", weigh_rows_a),
    ("ramp.6", "grid2-return", weigh_rows_b),
    ("ramp.7", "grid2", angle_table_a),
    ("ramp.7", "manual-early-return", angle_table_b),
    ("ramp.8", "mod-branch", swap_pairs_a),
    ("ramp.8", "xor-partner", swap_pairs_b),
    ("ramp.9", "branch", rotate_half_a),
    ("ramp.9", "modulo-src", rotate_half_b),
    ("ramp.10", "tree", row_sum_squares_a),
    ("ramp.10", "thread0-loop", row_sum_squares_b),
    ("ramp.11", "xor-butterfly", warp_sum_a),
    ("ramp.11", "down-then-bcast", warp_sum_b),
    ("ramp.12", "for-loop", dot_rows_a),
    ("ramp.12", "while-fma", dot_rows_b),
    ("ramp.13", "2d-shared", qk_scores_a),
    ("ramp.13", "flat-shared-fma", qk_scores_b),
    ("ramp.14", "serial-per-thread", seq_offsets_a),
    ("ramp.14", "hillis-steele-shared", seq_offsets_b),
    ("ramp.14", "shfl-up-scan", seq_offsets_c),
]
