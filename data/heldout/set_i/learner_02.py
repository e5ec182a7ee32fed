import ropelab  # noqa: F401
import math
import numba
from numba import cuda, uint64, float32


@cuda.jit
def rope_rows(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if t < n_pairs:
        angle = float32(positions[token]) * inv_freq[t]
        c = math.cos(angle)
        s = math.sin(angle)
        e = token * 2 * n_pairs + 2 * t
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


@cuda.jit
def rope_rows_v2(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if t >= n_pairs:
        return
    pos = float32(positions[token])
    row = token * (n_pairs + n_pairs)
    e = row + t + t
    s, c = math.sin(pos * inv_freq[t]), math.cos(pos * inv_freq[t])
    a = x[e]
    b = x[e + 1]
    out[e] = a * c - b * s
    out[e + 1] = b * c + a * s


@cuda.jit
def my_rope_block2d(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    p = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    pos = float32(positions[token])
    hidden = float32(n_pairs) * float32(2.0)
    row = token * n_pairs * uint64(2)
    while p < n_pairs:
        inv_freq = float32(1.0) / (base ** (float32(2.0) * float32(p) / hidden))
        angle = pos * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = row + uint64(2) * p
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        p += step


@cuda.jit
def my_rope_block2d_v2(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    inv_np = float32(1.0) / float32(n_pairs)
    row = token * (n_pairs + n_pairs)
    p = uint64(cuda.threadIdx.x)
    while p < n_pairs:
        angle = pos * math.pow(base, -float32(p) * inv_np)
        s = math.sin(angle)
        c = math.cos(angle)
        e = row + p + p
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        p += uint64(cuda.blockDim.x)


def launch_block2d(x, out, positions, n_pairs, base):
    tokens = positions.size
    threads = min(((n_pairs + 31) // 32) * 32, 1024)
    my_rope_block2d[tokens, threads](x, out, positions, numba.uint64(n_pairs), numba.float32(base))


def launch_block2d_v2(x, out, positions, n_pairs, base):
    tokens = positions.shape[0]
    warps = math.ceil(n_pairs / 32)
    threads = 32 * min(warps, 32)
    my_rope_block2d_v2[tokens, threads](x, out, positions, numba.uint64(n_pairs), numba.float32(base))


ENTRIES = [
    ("02.1", "plain", rope_rows),
    ("02.1", "early_return", rope_rows_v2),
    ("02.2", "while_stride", my_rope_block2d),
    ("02.2", "while_stride_pow", my_rope_block2d_v2),
    ("02.3", "min_threads", launch_block2d),
    ("02.3", "warps_capped", launch_block2d_v2),
]
