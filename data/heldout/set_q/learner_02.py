"""Notebook 02 steps: block per token, no integer division."""
import math

from numba import cuda, float32, int64, uint64


# ---------------- 02.1 rope_rows
@cuda.jit(fastmath=True)
def rope_rows_a(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        e = 2 * (token * n_pairs + pair)
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


@cuda.jit("void(float32[::1], float32[::1], int32[::1], float32[::1], int64)")
def rope_rows_b(x, out, positions, inv_freq, n_pairs):
    # row base pointer first, early return, no fastmath
    pair = int64(cuda.threadIdx.x)
    if pair >= n_pairs:
        return
    token = int64(cuda.blockIdx.x)
    row = token * n_pairs * 2
    pos = float32(positions[token])
    angle = pos * inv_freq[pair]
    sn = math.sin(angle)
    cs = math.cos(angle)
    a = x[row + 2 * pair]
    b = x[row + 2 * pair + 1]
    out[row + 2 * pair + 1] = a * sn + b * cs
    out[row + 2 * pair] = a * cs - b * sn


# ---------------- 02.2 my_rope_block2d
@cuda.jit(fastmath=True)
def my_rope_block2d_a(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    pos = float32(positions[token])
    hidden = float32(n_pairs + n_pairs)
    row = token * n_pairs * uint64(2)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) / hidden)
        theta = pos * inv_freq
        c = math.cos(theta)
        s = math.sin(theta)
        e = row + pair + pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        pair += step


@cuda.jit(fastmath=True)
def my_rope_block2d_b(x, out, positions, n_pairs, base):
    # signed loop counters, exp/log frequencies, log(base) hoisted
    npairs = int64(n_pairs)
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    ln_base = math.log(base)
    inv_n = float32(1.0) / float32(npairs)
    pos = float32(positions[token])
    start = 2 * token * npairs
    p = int64(t)
    while p < npairs:
        freq = math.exp(-float32(p) * inv_n * ln_base)
        ang = pos * freq
        a = x[start + 2 * p]
        b = x[start + 2 * p + 1]
        s = math.sin(ang)
        c = math.cos(ang)
        out[start + 2 * p] = a * c - b * s
        out[start + 2 * p + 1] = a * s + b * c
        p = p + nthreads


@cuda.jit("void(float32[::1], float32[::1], int32[::1], uint64, float32)")
def my_rope_block2d_c(x, out, positions, n_pairs, base):
    # no fastmath; pow with a negative exponent; loop with an explicit trip counter
    tid = uint64(cuda.threadIdx.x)
    bdim = uint64(cuda.blockDim.x)
    token = uint64(cuda.blockIdx.x)
    neg_scale = float32(-1.0) / float32(n_pairs)
    k = uint64(0)
    while True:
        pair = tid + k * bdim
        if pair >= n_pairs:
            break
        angle = float32(positions[token]) * math.pow(base, float32(pair) * neg_scale)
        idx = (token * n_pairs + pair) * uint64(2)
        x0 = x[idx]
        x1 = x[idx + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[idx] = cuda.fma(x0, c, -x1 * s)
        out[idx + uint64(1)] = cuda.fma(x1, c, x0 * s)
        k += uint64(1)


# ---------------- 02.3 launch_block2d
def launch_block2d_a(x, out, positions, n_pairs, base):
    threads = min(1024, ((n_pairs + 31) // 32) * 32)
    my_rope_block2d_a[positions.size, threads](x, out, positions, uint64(n_pairs),
                                               float32(base))


def launch_block2d_b(x, out, positions, n_pairs, base):
    warps = math.ceil(n_pairs / 32)
    threads = 32 * warps
    if threads > 1024:
        threads = 1024
    tokens = positions.shape[0]
    my_rope_block2d_b[(tokens,), (threads,)](x, out, positions, uint64(n_pairs), float32(base))


def launch_block2d_c(x, out, positions, n_pairs, base):
    threads = -(-int(n_pairs) // 32) << 5
    threads = max(32, min(threads, 1024))
    my_rope_block2d_c[len(positions), threads](x, out, positions, uint64(n_pairs),
                                               float32(base))


# ---------------- third entries
@cuda.jit(fastmath=True)
def rope_rows_c(x, out, positions, inv_freq, n_pairs):
    # unsigned index math, partner offsets, fma
    pair = uint64(cuda.threadIdx.x)
    np_ = uint64(n_pairs)
    if pair < np_:
        token = uint64(cuda.blockIdx.x)
        e = (token * np_ + pair) << uint64(1)
        f = inv_freq[pair]
        theta = f * float32(positions[token])
        c = math.cos(theta)
        s = math.sin(theta)
        a = x[e]
        b = x[e | uint64(1)]
        out[e] = cuda.fma(a, c, -(b * s))
        out[e | uint64(1)] = cuda.fma(b, c, a * s)


ENTRIES = [
    ("02.1", "if-guard-fastmath", rope_rows_a),
    ("02.1", "eager-sig-row-base-early-return", rope_rows_b),
    ("02.1", "uint64-shift-or-fma", rope_rows_c),
    ("02.2", "uint64-while-pow-reciprocal", my_rope_block2d_a),
    ("02.2", "int64-while-exp-log", my_rope_block2d_b),
    ("02.2", "trip-counter-break-pow-neg-fma", my_rope_block2d_c),
    ("02.3", "min-ceil-to-warp", launch_block2d_a),
    ("02.3", "math.ceil-warps-tuple", launch_block2d_b),
    ("02.3", "shift-rounding-len", launch_block2d_c),
]
