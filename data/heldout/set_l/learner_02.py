import ropelab  # noqa: F401
import math

import numba
from numba import cuda, float32, uint64


# ---------------- 02.1 rope_rows ----------------
@cuda.jit(fastmath=True)
def rope_rows(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        a = 2 * (token * n_pairs + pair)
        x0 = x[a]
        x1 = x[a + 1]
        out[a] = x0 * c - x1 * s
        out[a + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_rows_return(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    row = cuda.blockIdx.x * 2 * n_pairs
    a = row + 2 * pair
    pos = float32(positions[cuda.blockIdx.x])
    s = math.sin(pos * inv_freq[pair])
    c = math.cos(pos * inv_freq[pair])
    out[a] = x[a] * c - x[a + 1] * s
    out[a + 1] = x[a] * s + x[a + 1] * c


# ---------------- 02.2 my_rope_block2d ----------------
@cuda.jit(fastmath=True)
def my_rope_block2d(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    row = uint64(2) * token * n_pairs
    pos = float32(positions[token])
    hidden = float32(uint64(2) * n_pairs)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(uint64(2) * pair) / hidden)
        theta = pos * inv_freq
        c = math.cos(theta)
        s = math.sin(theta)
        a = row + uint64(2) * pair
        x0 = x[a]
        x1 = x[a + uint64(1)]
        out[a] = x0 * c - x1 * s
        out[a + uint64(1)] = x0 * s + x1 * c
        pair += step


@cuda.jit(fastmath=True)
def my_rope_block2d_signed(x, out, positions, n_pairs, base):
    # signed loop counter, n_pairs converted once
    np_ = numba.int64(n_pairs)
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    logb = math.log(base)
    inv_n = float32(1.0) / float32(np_)
    pair = cuda.threadIdx.x
    while pair < np_:
        theta = pos * math.exp(-float32(pair) * inv_n * logb)
        s = math.sin(theta)
        c = math.cos(theta)
        a = 2 * (token * np_ + pair)
        out[a] = x[a] * c - x[a + 1] * s
        out[a + 1] = x[a] * s + x[a + 1] * c
        pair += cuda.blockDim.x


@cuda.jit
def my_rope_block2d_precise(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        freq = math.pow(base, -float32(pair) / float32(n_pairs))
        theta = float32(positions[token]) * freq
        c = math.cos(theta)
        s = math.sin(theta)
        a = (uint64(token) * n_pairs + pair) * uint64(2)
        b = a + uint64(1)
        y0 = x[a] * c - x[b] * s
        y1 = x[a] * s + x[b] * c
        out[a] = y0
        out[b] = y1
        pair += uint64(cuda.blockDim.x)


# ---------------- 02.3 launch_block2d ----------------
def launch_block2d(x, out, positions, n_pairs, base):
    threads = min(1024, ((n_pairs + 31) // 32) * 32)
    my_rope_block2d[positions.size, threads](x, out, positions, uint64(n_pairs), float32(base))


def launch_block2d_ceil(x, out, positions, n_pairs, base):
    warps = math.ceil(n_pairs / 32)
    threads = 32 * warps
    if threads > 1024:
        threads = 1024
    blocks = positions.shape[0]
    my_rope_block2d_signed[blocks, threads](x, out, positions, numba.uint64(n_pairs),
                                            numba.float32(base))


def launch_block2d_bits(x, out, positions, n_pairs, base):
    threads = (n_pairs + 31) & ~31
    threads = 1024 if threads > 1024 else threads
    my_rope_block2d_precise[len(positions), threads](x, out, positions, uint64(n_pairs),
                                                     float32(base))



@cuda.jit
def rope_rows_uint(x, out, positions, inv_freq, n_pairs):
    # unsigned indices, accurate sin/cos
    pair = uint64(cuda.threadIdx.x)
    n = uint64(n_pairs)
    if pair < n:
        token = uint64(cuda.blockIdx.x)
        a = (token * n + pair) << uint64(1)
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        u = x[a]
        v = x[a + uint64(1)]
        out[a] = u * c - v * s
        out[a + uint64(1)] = u * s + v * c

ENTRIES = [
    ("02.1", "guard_if", rope_rows),
    ("02.1", "early_return", rope_rows_return),
    ("02.2", "uint_while_pow", my_rope_block2d),
    ("02.2", "signed_while_explog", my_rope_block2d_signed),
    ("02.2", "uint_while_precise_negpow", my_rope_block2d_precise),
    ("02.3", "min_floor_div", launch_block2d),
    ("02.3", "mathceil_cap_if", launch_block2d_ceil),
    ("02.3", "bitmask_round", launch_block2d_bits),
    ("02.1", "uint_shift_precise", rope_rows_uint),
]
