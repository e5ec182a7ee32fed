import math
import numba
from numba import cuda, float32, uint64


@cuda.jit
def rope_rows_a(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if t < n_pairs:
        ang = float32(positions[token]) * inv_freq[t]
        c = math.cos(ang)
        s = math.sin(ang)
        e = token * 2 * n_pairs + 2 * t
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


@cuda.jit
def rope_rows_b(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if t >= n_pairs:
        return
    row = cuda.blockIdx.x * (n_pairs + n_pairs)
    a = x[row + t + t]
    b = x[row + t + t + 1]
    pos = float32(positions[cuda.blockIdx.x])
    ang = inv_freq[t] * pos
    s = math.sin(ang)
    c = math.cos(ang)
    out[row + t + t] = cuda.fma(a, c, -b * s)
    out[row + t + t + 1] = cuda.fma(a, s, b * c)


@cuda.jit
def rope_block2d_a(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    row = token * n_pairs * uint64(2)
    pos = float32(positions[token])
    p = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    while p < n_pairs:
        freq = base ** (-float32(p) / float32(n_pairs))
        ang = pos * freq
        c = math.cos(ang)
        s = math.sin(ang)
        e = row + p * uint64(2)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        p += step


@cuda.jit
def rope_block2d_b(x, out, positions, n_pairs, base):
    np_ = numba.int64(n_pairs)
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    logb = math.log(base)
    inv_n = float32(1.0) / float32(np_)
    p = cuda.threadIdx.x
    while p < np_:
        ang = pos * math.exp(-float32(p) * inv_n * logb)
        e = (token * np_ + p) * 2
        a = x[e]
        b = x[e + 1]
        s = math.sin(ang)
        c = math.cos(ang)
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c
        p += cuda.blockDim.x


def launch_block2d_a(x, out, positions, n_pairs, base):
    threads = min(1024, 32 * ((n_pairs + 31) // 32))
    rope_block2d_a[positions.size, threads](x, out, positions, numba.uint64(n_pairs),
                                            numba.float32(base))


def launch_block2d_b(x, out, positions, n_pairs, base):
    warps = math.ceil(n_pairs / 32)
    threads = 1024 if warps > 32 else warps * 32
    grid = (positions.shape[0],)
    rope_block2d_b[grid, (threads,)](x, out, positions, numba.uint64(n_pairs),
                                     numba.float32(base))


ENTRIES = [
    ("02.1", "guard-manual-offsets", rope_rows_a),
    ("02.1", "return-fma", rope_rows_b),
    ("02.2", "uint64-while-pow", rope_block2d_a),
    ("02.2", "int64-while-exp", rope_block2d_b),
    ("02.3", "min-cap", launch_block2d_a),
    ("02.3", "warps-tuple-grid", launch_block2d_b),
]
