import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numba
from numba import cuda, float32, int64, uint64


# ---- 02.1 rope_rows ----
@cuda.jit
def rope_rows(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        row = 2 * token * n_pairs
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        a = x[row + 2 * pair]
        b = x[row + 2 * pair + 1]
        out[row + 2 * pair] = a * c - b * s
        out[row + 2 * pair + 1] = a * s + b * c


@cuda.jit
def rope_rows_ret(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    token = cuda.blockIdx.x
    e = (token * n_pairs + pair) * 2
    a = x[e]
    b = x[e + 1]
    pos = float32(positions[token])
    f = inv_freq[pair]
    th = pos * f
    s = math.sin(th)
    c = math.cos(th)
    out[e] = cuda.fma(a, c, -(b * s))
    out[e + 1] = cuda.fma(b, c, a * s)


# ---- 02.2 my_rope_block2d ----
@cuda.jit
def my_rope_block2d(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    stride = uint64(cuda.blockDim.x)
    row = token * n_pairs * uint64(2)
    pos = float32(positions[token])
    denom = float32(n_pairs + n_pairs)
    while pair < n_pairs:
        f = float32(1.0) / math.pow(base, float32(pair + pair) / denom)
        angle = pos * f
        c = math.cos(angle)
        s = math.sin(angle)
        e = row + pair + pair
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        pair += stride


@cuda.jit
def my_rope_block2d_neg(x, out, positions, n_pairs, base):
    t = cuda.threadIdx.x
    bd = cuda.blockDim.x
    tok = cuda.blockIdx.x
    npairs = int64(n_pairs)
    start = tok * npairs * 2
    step = float32(-1.0) / float32(npairs)
    p = t
    while p < npairs:
        angle = float32(positions[tok]) * math.pow(base, step * float32(p))
        i0 = start + 2 * p
        x0 = x[i0]
        x1 = x[i0 + 1]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i0] = x0 * c - x1 * s
        out[i0 + 1] = x0 * s + x1 * c
        p += bd


@cuda.jit
def my_rope_block2d_explog(x, out, positions, n_pairs, base):
    tid = uint64(cuda.threadIdx.x)
    nthr = uint64(cuda.blockDim.x)
    tok = uint64(cuda.blockIdx.x)
    lnb = math.log(base)
    k = float32(-2.0) / float32(n_pairs * uint64(2))
    pos = float32(positions[tok])
    rowp = tok * n_pairs
    p = tid
    while p < n_pairs:
        e = (rowp + p) * uint64(2)
        a = x[e]
        b = x[e + uint64(1)]
        th = pos * math.exp(k * float32(p) * lnb)
        s = math.sin(th)
        c = math.cos(th)
        out[e] = cuda.fma(a, c, -(b * s))
        out[e + uint64(1)] = cuda.fma(a, s, b * c)
        p += nthr


# ---- 02.3 launch ----
def launch_block2d(x, out, positions, n_pairs, base):
    threads = ((n_pairs + 31) // 32) * 32
    if threads > 1024:
        threads = 1024
    my_rope_block2d[positions.size, threads](x, out, positions, numba.uint64(n_pairs),
                                             numba.float32(base))


def launch_block2d_neg(x, out, positions, n_pairs, base):
    warps = min((n_pairs + 31) // 32, 32)
    my_rope_block2d_neg[positions.size, warps * 32](x, out, positions, numba.uint64(n_pairs),
                                                    numba.float32(base))


def launch_block2d_explog(x, out, positions, n_pairs, base):
    threads = min(1024, -(-n_pairs // 32) * 32)
    my_rope_block2d_explog[int(positions.size), threads](x, out, positions,
                                                         numba.uint64(n_pairs),
                                                         numba.float32(base))


ENTRIES = [
    ("02.1", "guard_interleaved", rope_rows),
    ("02.1", "early_return_fma_loads_first", rope_rows_ret),
    ("02.2", "uint64_stride_recip_pow", my_rope_block2d),
    ("02.2", "int64_stride_neg_pow", my_rope_block2d_neg),
    ("02.2", "exp_log_fma_loads_first", my_rope_block2d_explog),
    ("02.3", "roundup_cap", launch_block2d),
    ("02.3", "warps_min_neg_kernel", launch_block2d_neg),
    ("02.3", "explog_kernel", launch_block2d_explog),
]
