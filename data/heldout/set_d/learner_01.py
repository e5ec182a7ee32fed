"""Notebook 01 (flat divmod), steps 01.1 .. 01.4."""
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 01.1
@cuda.jit(fastmath=True)
def pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def pair_angles_unsigned_index(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if i >= uint64(total_pairs):
        return
    token = i // n_pairs
    pair = i - n_pairs * token
    f = inv_freq[pair]
    pos = float32(positions[token])
    out[i] = pos * f


# ---------------------------------------------------------------- 01.2
def launch_pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                 numba.int64(total_pairs))


def launch_pair_angles_128(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 128
    blocks = -(-total_pairs // threads)
    pair_angles_unsigned_index[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                        numba.int64(total_pairs))


# ---------------------------------------------------------------- 01.3
@cuda.jit(fastmath=True)
def pair_frequencies(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        out[pair] = float32(1.0) / math.pow(base, exponent)


@cuda.jit(fastmath=True)
def pair_frequencies_neg_exp(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair >= n_pairs:
        return
    exponent = float32(-2.0) * float32(pair) / float32(2 * n_pairs)
    out[pair] = math.pow(base, exponent)


# ---------------------------------------------------------------- 01.4
@cuda.jit(fastmath=True)
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_flat_neg_pow(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    # loads first, then the index math
    x0 = x[idx + idx]
    x1 = x[idx + idx + 1]
    token = i // n_pairs
    pair = i - token * n_pairs
    hidden = float32(n_pairs + n_pairs)
    f = math.pow(base, -float32(pair + pair) / hidden)
    angle = float32(positions[token]) * f
    s = math.sin(angle)
    c = math.cos(angle)
    out[idx + idx] = x0 * c - x1 * s
    out[idx + idx + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_flat_explog(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        # base ** (-2 pair / hidden) = exp(-(2 pair / hidden) * ln(base))
        ratio = float32(pair) / float32(n_pairs)
        f = math.exp(-ratio * math.log(base))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        a = x[2 * idx]
        b = x[2 * idx + 1]
        out[2 * idx] = a * c - b * s
        out[2 * idx + 1] = a * s + b * c


ENTRIES = [
    ("01.1", "if_guard", pair_angles),
    ("01.1", "unsigned_explicit_index", pair_angles_unsigned_index),
    ("01.2", "blocks_256", launch_pair_angles),
    ("01.2", "blocks_128_unsigned_kernel", launch_pair_angles_128),
    ("01.3", "recip_pow", pair_frequencies),
    ("01.3", "neg_exponent_pow", pair_frequencies_neg_exp),
    ("01.4", "recip_pow", my_rope_flat),
    ("01.4", "loads_first_neg_pow", my_rope_flat_neg_pow),
    ("01.4", "exp_log", my_rope_flat_explog),
]
