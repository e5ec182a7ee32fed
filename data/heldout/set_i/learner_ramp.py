import ropelab  # noqa: F401
import math
from numba import cuda, float32


@cuda.jit
def square(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * x[i]


@cuda.jit
def square_v2(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v * v


@cuda.jit
def weigh(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def scale_guarded(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_guarded_v2(x, out, scale, n):
    i = cuda.threadIdx.x
    if i >= n:
        return
    out[i] = scale * x[i]


@cuda.jit
def scale_blocks(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_v2(x, out, scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * scale


def launch_scale(x, out, scale, n):
    threads = 256
    blocks = (n + threads - 1) // threads
    scale_blocks[blocks, threads](x, out, scale, n)


def launch_scale_v2(x, out, scale, n):
    threads = 64 if n <= 4096 else 128
    blocks = math.ceil(n / threads)
    scale_blocks_v2[blocks, threads](x, out, scale, n)


@cuda.jit
def weigh_rows(x, weight, out, tokens, hidden):
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    t = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if c < hidden and t < tokens:
        out[t * hidden + c] = x[t * hidden + c] * weight[c]


@cuda.jit
def weigh_rows_v2(x, weight, out, tokens, hidden):
    c, t = cuda.grid(2)
    if t >= tokens or c >= hidden:
        return
    i = t * hidden + c
    out[i] = x[i] * weight[c]


@cuda.jit
def angle_table(positions, inv_freq, out, tokens, pairs):
    p, t = cuda.grid(2)
    if p < pairs and t < tokens:
        out[t * pairs + p] = float32(positions[t]) * inv_freq[p]


@cuda.jit
def swap_pairs(x, out):
    t = cuda.blockIdx.x
    c = cuda.threadIdx.x
    h = cuda.blockDim.x
    base = t * h
    if c % 2 == 0:
        out[base + c] = -x[base + c + 1]
    else:
        out[base + c] = x[base + c - 1]


@cuda.jit
def swap_pairs_v2(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    partner = i ^ 1
    v = x[partner]
    if (i & 1) == 0:
        v = -v
    out[i] = v


@cuda.jit
def rotate_half(x, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.blockIdx.x
    c = cuda.threadIdx.x
    h = cuda.blockDim.x
    half = h // 2
    buf[c] = x[t * h + c]
    cuda.syncthreads()
    if c < half:
        out[t * h + c] = -buf[c + half]
    else:
        out[t * h + c] = buf[c - half]


@cuda.jit
def row_sum_squares(x, out):
    buf = cuda.shared.array(64, float32)
    r = cuda.blockIdx.x
    c = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[r * n + c]
    buf[c] = v * v
    cuda.syncthreads()
    s = n // 2
    while s > 0:
        if c < s:
            buf[c] += buf[c + s]
        cuda.syncthreads()
        s //= 2
    if c == 0:
        out[r] = buf[0]


@cuda.jit
def row_sum_squares_v2(x, out):
    buf = cuda.shared.array(64, float32)
    r = cuda.blockIdx.x
    c = cuda.threadIdx.x
    n = cuda.blockDim.x
    v = x[r * n + c]
    buf[c] = v * v
    cuda.syncthreads()
    if c == 0:
        acc = float32(0.0)
        for j in range(n):
            acc += buf[j]
        out[r] = acc


@cuda.jit
def warp_sum(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_v2(x, out):
    i = cuda.grid(1)
    v = x[i]
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 16)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 8)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 4)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 2)
    v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    out[i] = v


@cuda.jit
def dot_rows(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        acc = float32(0.0)
        for j in range(d):
            acc += q[t * d + j] * k[t * d + j]
        out[t] = acc


@cuda.jit
def qk_scores(q, k, out, tokens):
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
def seq_offsets(lengths, out, n):
    buf = cuda.shared.array(32, float32)
    i = cuda.threadIdx.x
    if i >= 1 and i <= n:
        buf[i] = float32(lengths[i - 1])
    else:
        buf[i] = float32(0.0)
    cuda.syncthreads()
    if i <= n:
        acc = float32(0.0)
        for j in range(i + 1):
            acc += buf[j]
        out[i] = acc


@cuda.jit
def seq_offsets_v2(lengths, out, n):
    i = cuda.threadIdx.x
    v = float32(0.0)
    if i >= 1 and i <= n:
        v = float32(lengths[i - 1])
    m = 1
    while m < 32:
        o = cuda.shfl_up_sync(0xFFFFFFFF, v, m)
        if i >= m:
            v += o
        m *= 2
    if i <= n:
        out[i] = v


ENTRIES = [
    ("ramp.1", "threadIdx", square),
    ("ramp.1", "grid1", square_v2),
    ("ramp.2", "plain", weigh),
    ("ramp.3", "if_guard", scale_guarded),
    ("ramp.3", "early_return", scale_guarded_v2),
    ("ramp.4", "manual_index", scale_blocks),
    ("ramp.4", "grid1", scale_blocks_v2),
    ("ramp.5", "256_threads", launch_scale),
    ("ramp.5", "small_blocks", launch_scale_v2),
    ("ramp.6", "manual_2d", weigh_rows),
    ("ramp.6", "grid2", weigh_rows_v2),
    ("ramp.7", "grid2", angle_table),
    ("ramp.8", "mod_branch", swap_pairs),
    ("ramp.8", "xor_partner", swap_pairs_v2),
    ("ramp.9", "shared", rotate_half),
    ("ramp.10", "tree", row_sum_squares),
    ("ramp.10", "serial_thread0", row_sum_squares_v2),
    ("ramp.11", "loop", warp_sum),
    ("ramp.11", "unrolled", warp_sum_v2),
    ("ramp.12", "loop", dot_rows),
    ("ramp.13", "tiled", qk_scores),
    ("ramp.14", "shared_serial", seq_offsets),
    ("ramp.14", "shfl_scan", seq_offsets_v2),
]
