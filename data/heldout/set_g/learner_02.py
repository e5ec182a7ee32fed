"""Notebook 02: one block per token, the stride loop, the launch."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, uint64


# ---------------- 02.1 one block per token
@cuda.jit(fastmath=True)
def rope_rows(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        i = 2 * (token * n_pairs + pair)
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_rows_rowbase(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    row = cuda.blockIdx.x * (n_pairs + n_pairs)
    pos = float32(positions[cuda.blockIdx.x])
    ang = pos * inv_freq[pair]
    sn = math.sin(ang)
    cs = math.cos(ang)
    a = x[row + 2 * pair]
    b = x[row + 2 * pair + 1]
    out[row + 2 * pair + 1] = a * sn + b * cs
    out[row + 2 * pair] = a * cs - b * sn


# ---------------- 02.2 stride loop
@cuda.jit(fastmath=True)
def my_rope_block2d(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    hidden = float32(n_pairs + n_pairs)
    pos = float32(positions[token])
    while pair < n_pairs:
        inv = float32(1.0) / math.pow(base, float32(pair + pair) / hidden)
        theta = pos * inv
        c = math.cos(theta)
        s = math.sin(theta)
        i = uint64(2) * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += step


@cuda.jit(fastmath=True)
def my_rope_block2d_explog(x, out, positions, n_pairs, base):
    # row pointer advanced by 2*blockDim each trip; frequency by exp(-k * ln base)
    t = uint64(cuda.threadIdx.x)
    bd = uint64(cuda.blockDim.x)
    row_start = uint64(cuda.blockIdx.x) * (n_pairs + n_pairs)
    pos = float32(positions[cuda.blockIdx.x])
    k = -math.log(base) / float32(n_pairs)
    pair = t
    i = row_start + t + t
    while pair < n_pairs:
        theta = pos * math.exp(k * float32(pair))
        s = math.sin(theta)
        c = math.cos(theta)
        a = x[i]
        b = x[i + uint64(1)]
        out[i] = a * c - b * s
        out[i + uint64(1)] = a * s + b * c
        pair += bd
        i += bd + bd


# ---------------- 02.3 launch
def launch_block2d(x, out, positions, n_pairs, base):
    tokens = positions.size
    threads = min(1024, ((n_pairs + 31) // 32) * 32)
    my_rope_block2d[tokens, threads](x, out, positions, uint64(n_pairs), float32(base))


def launch_block2d_ceil(x, out, positions, n_pairs, base):
    warps = math.ceil(n_pairs / 32)
    threads = 32 * warps
    if threads > 1024:
        threads = 1024
    my_rope_block2d_explog[positions.shape[0], threads](
        x, out, positions, numba.uint64(n_pairs), numba.float32(base))


ENTRIES = [
    ("02.1", "plain", rope_rows),
    ("02.1", "row_base_return", rope_rows_rowbase),
    ("02.2", "while_stride", my_rope_block2d),
    ("02.2", "pointer_advance_explog", my_rope_block2d_explog),
    ("02.3", "min_1024", launch_block2d),
    ("02.3", "ceil_warps_cap", launch_block2d_ceil),
]
