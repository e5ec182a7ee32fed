"""Notebook 01: flat index -> (token, pair) with one unsigned division."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, int64, uint64


# ---------------------------------------------------------------- 01.1
@cuda.jit(fastmath=True)
def pair_angles_plain(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def pair_angles_return(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    t = u // n_pairs
    f = inv_freq[u - t * n_pairs]
    p = positions[t]
    out[u] = f * float32(p)


# ---------------------------------------------------------------- 01.2
def launch_pair_angles_256(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_plain[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                       numba.int64(total_pairs))


def launch_pair_angles_128(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 128
    blocks = math.ceil(total_pairs / threads)
    pair_angles_return[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                        int64(total_pairs))


def launch_pair_angles_1024(out, positions, inv_freq, n_pairs, total_pairs):
    threads = min(1024, 32 * ((total_pairs + 31) // 32))
    blocks = -(-total_pairs // threads)
    pair_angles_plain[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                        int64(total_pairs))


# ---------------------------------------------------------------- 01.3
@cuda.jit(fastmath=True)
def pair_frequencies_plain(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        out[pair] = float32(1.0) / math.pow(base, exponent)


@cuda.jit(fastmath=True)
def pair_frequencies_negpow(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair >= n_pairs:
        return
    inv_hidden = float32(1.0) / float32(2 * n_pairs)
    out[pair] = math.pow(base, -float32(2 * pair) * inv_hidden)


@cuda.jit(fastmath=True)
def pair_frequencies_explog(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        e = float32(pair) / float32(n_pairs)  # 2 pair / hidden
        out[pair] = math.exp(-e * math.log(base))


# ---------------------------------------------------------------- 01.4
@cuda.jit(fastmath=True)
def my_rope_flat_plain(x, out, positions, n_pairs, total_pairs, base):
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
        x0 = x[uint64(2) * i]
        x1 = x[uint64(2) * i + uint64(1)]
        out[uint64(2) * i] = x0 * c - x1 * s
        out[uint64(2) * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_flat_divide(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    e = float32(pair) / float32(n_pairs)
    angle = float32(positions[token]) / math.pow(base, e)
    a = i + i
    x0 = x[a]
    x1 = x[a + uint64(1)]
    s = math.sin(angle)
    c = math.cos(angle)
    out[a] = x0 * c - x1 * s
    out[a + uint64(1)] = x1 * c + x0 * s


@cuda.jit(fastmath=True)
def my_rope_flat_explog(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        inv_freq = math.exp(float32(-2.0) * float32(pair) * math.log(base)
                            / float32(n_pairs + n_pairs))
        angle = float32(positions[token]) * inv_freq
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        c = math.cos(angle)
        s = math.sin(angle)
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


ENTRIES = [
    ("01.1", "uint_div_guard", pair_angles_plain),
    ("01.1", "early_return", pair_angles_return),
    ("01.2", "blocks_256", launch_pair_angles_256),
    ("01.2", "blocks_128_ceil", launch_pair_angles_128),
    ("01.2", "fit_warps_1024", launch_pair_angles_1024),
    ("01.3", "recip_pow", pair_frequencies_plain),
    ("01.3", "negative_exponent_pow", pair_frequencies_negpow),
    ("01.3", "exp_log", pair_frequencies_explog),
    ("01.4", "recip_pow_mul", my_rope_flat_plain),
    ("01.4", "divide_by_pow", my_rope_flat_divide),
    ("01.4", "exp_log_freq", my_rope_flat_explog),
]
