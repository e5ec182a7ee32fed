import math
from numba import cuda, float32, uint64


@cuda.jit
def table_read_a(x, out, positions, inv_freq, n_pairs, total_pairs):
    i = cuda.grid(1)
    if i < total_pairs:
        u = uint64(i)
        token = u // n_pairs
        pair = u - token * n_pairs
        ang = float32(positions[token]) * inv_freq[pair]
        c = math.cos(ang)
        s = math.sin(ang)
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit
def table_read_b(x, out, positions, inv_freq, n_pairs, total_pairs):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= total_pairs:
        return
    u = uint64(i)
    token = u // n_pairs
    f = inv_freq[u - n_pairs * token]
    a = x[i + i]
    b = x[i + i + 1]
    ang = f * float32(positions[token])
    s = math.sin(ang)
    c = math.cos(ang)
    out[i + i] = cuda.fma(a, c, -b * s)
    out[i + i + 1] = cuda.fma(a, s, b * c)


ENTRIES = [
    ("04.1", "plain", table_read_a),
    ("04.1", "fma-loads-first", table_read_b),
]


@cuda.jit
def cache_a(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    i = cuda.grid(1)
    if i < total_pairs:
        u = uint64(i)
        token = u // n_pairs
        pair = u - token * n_pairs
        pos = positions[token]
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit
def cache_b(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    i = cuda.grid(1)
    g = cuda.gridsize(1)
    while i < total_pairs:
        u = uint64(i)
        token = u // n_pairs
        pair = u - n_pairs * token
        a = x[i * 2]
        b = x[i * 2 + 1]
        row = positions[token]
        s = sin_cache[row, pair]
        c = cos_cache[row, pair]
        out[i * 2] = a * c - b * s
        out[i * 2 + 1] = a * s + b * c
        i += g


ENTRIES += [
    ("04.3", "2d-index", cache_a),
    ("04.3", "grid-stride", cache_b),
]
