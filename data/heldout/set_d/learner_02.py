"""Notebook 02 (block2d), steps 02.1 .. 02.3."""
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 02.1
@cuda.jit(fastmath=True)
def rope_rows(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        i = 2 * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_rows_loads_first(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    token = cuda.blockIdx.x
    row = token * (n_pairs + n_pairs)
    i = row + pair + pair
    x0 = x[i]
    x1 = x[i + 1]
    f = inv_freq[pair]
    pos = float32(positions[token])
    angle = pos * f
    s = math.sin(angle)
    c = math.cos(angle)
    out[i] = x0 * c - x1 * s
    out[i + 1] = x1 * c + x0 * s


# ---------------------------------------------------------------- 02.2
@cuda.jit(fastmath=True)
def my_rope_block2d(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    hidden = float32(n_pairs + n_pairs)
    pos = float32(positions[token])
    row = token * (n_pairs + n_pairs)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) / hidden)
        angle = pos * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += step


@cuda.jit(fastmath=True)
def my_rope_block2d_neg_pow(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        # everything recomputed each trip, pow with a negative exponent
        e = float32(-2.0) * float32(pair) / float32(uint64(2) * n_pairs)
        angle = float32(positions[token]) * math.pow(base, e)
        i = uint64(2) * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        s = math.sin(angle)
        c = math.cos(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)


@cuda.jit(fastmath=True)
def my_rope_block2d_scaled_exp(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    # base ** (-2 p / hidden) = exp(p * k) with k = -ln(base) / n_pairs, k hoisted
    k = -math.log(base) / float32(n_pairs)
    pos = float32(positions[token])
    first = token * n_pairs
    p = t
    while p < n_pairs:
        angle = pos * math.exp(float32(p) * k)
        c = math.cos(angle)
        s = math.sin(angle)
        i = (first + p) + (first + p)
        a = x[i]
        b = x[i + uint64(1)]
        out[i] = a * c - b * s
        out[i + uint64(1)] = a * s + b * c
        p += step


# ---------------------------------------------------------------- 02.3
def _threads_for(n_pairs):
    return min(((n_pairs + 31) // 32) * 32, 1024)


def launch_block2d(x, out, positions, n_pairs, base):
    threads = _threads_for(n_pairs)
    my_rope_block2d[positions.size, threads](x, out, positions, numba.uint64(n_pairs),
                                             numba.float32(base))


def launch_block2d_exp(x, out, positions, n_pairs, base):
    warps = -(-n_pairs // 32)
    threads = 32 * warps
    if threads > 1024:
        threads = 1024
    blocks = positions.shape[0]
    my_rope_block2d_scaled_exp[blocks, threads](x, out, positions, uint64(n_pairs), float32(base))


ENTRIES = [
    ("02.1", "row_thread", rope_rows),
    ("02.1", "loads_first_early_return", rope_rows_loads_first),
    ("02.2", "while_hoisted_row", my_rope_block2d),
    ("02.2", "while_recompute_neg_pow", my_rope_block2d_neg_pow),
    ("02.2", "while_exp_hoisted_log", my_rope_block2d_scaled_exp),
    ("02.3", "pow_kernel", launch_block2d),
    ("02.3", "exp_kernel", launch_block2d_exp),
]
