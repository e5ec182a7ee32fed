"""Notebook 02: one block per token."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, int64, uint64


# ---------------------------------------------------------------- 02.1
@cuda.jit(fastmath=True)
def rope_rows_plain(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        i = 2 * (token * n_pairs + pair)
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_rows_rowbase(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    token = cuda.blockIdx.x
    row = 2 * n_pairs * token
    a = row + 2 * pair
    pos = float32(positions[token])
    f = inv_freq[pair]
    theta = pos * f
    s = math.sin(theta)
    c = math.cos(theta)
    lo = x[a]
    hi = x[a + 1]
    out[a + 1] = lo * s + hi * c
    out[a] = lo * c - hi * s


# ---------------------------------------------------------------- 02.2
@cuda.jit(fastmath=True)
def my_rope_block2d_while(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) * inv_hidden)
        angle = pos * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        i = uint64(2) * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += step


@cuda.jit(fastmath=True)
def my_rope_block2d_signed(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    n = int64(n_pairs)
    row = token * 2 * n
    pos = float32(positions[token])
    neg_log_base = -math.log(base) / float32(n)  # -2 ln(base) / hidden
    pair = int64(cuda.threadIdx.x)
    while pair < n:
        angle = pos * math.exp(float32(pair) * neg_log_base)
        a = row + 2 * pair
        x0 = x[a]
        x1 = x[a + 1]
        c = math.cos(angle)
        s = math.sin(angle)
        out[a] = x0 * c - x1 * s
        out[a + 1] = x0 * s + x1 * c
        pair += cuda.blockDim.x


# ---------------------------------------------------------------- 02.3
def launch_block2d_min(x, out, positions, n_pairs, base):
    threads = min(((n_pairs + 31) // 32) * 32, 1024)
    my_rope_block2d_while[positions.size, threads](x, out, positions, numba.uint64(n_pairs),
                                                   numba.float32(base))


def launch_block2d_ceil(x, out, positions, n_pairs, base):
    tokens = positions.shape[0]
    warps = math.ceil(n_pairs / 32)
    if warps > 32:
        warps = 32
    my_rope_block2d_signed[tokens, 32 * warps](x, out, positions, uint64(n_pairs),
                                             float32(base))


ENTRIES = [
    ("02.1", "flat_index_guard", rope_rows_plain),
    ("02.1", "row_base_return", rope_rows_rowbase),
    ("02.2", "uint_while_pow", my_rope_block2d_while),
    ("02.2", "signed_while_exp", my_rope_block2d_signed),
    ("02.3", "min_roundup", launch_block2d_min),
    ("02.3", "warps_capped", launch_block2d_ceil),
]
