"""Notebook 01: flat kernel with one unsigned division."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, uint64, int64


# ---------------- 01.1 pair angles
@cuda.jit(fastmath=True)
def pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
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
    p = u - n_pairs * t
    pos = float32(positions[t])
    out[u] = inv_freq[p] * pos


@cuda.jit(fastmath=True)
def pair_angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    # grid-stride loop: one division up front, then token/pair carried forward
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    stride = uint64(cuda.gridsize(1))
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    total = uint64(total_pairs)
    while i < total:
        out[i] = float32(positions[token]) * inv_freq[pair]
        i += stride
        pair += stride
        while pair >= n_pairs:
            pair -= n_pairs
            token += uint64(1)


# ---------------- 01.2 launch
def launch_pair_angles_256(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


def launch_pair_angles_64(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 64
    blocks = math.ceil(total_pairs / threads)
    pair_angles_return[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                        int64(total_pairs))


def launch_pair_angles_1024(out, positions, inv_freq, n_pairs, total_pairs):
    threads = min(1024, 32 * ((total_pairs + 31) // 32))
    blocks = -(-total_pairs // threads)
    pair_angles_stride[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                        total_pairs)


# ---------------- 01.3 pair frequencies
@cuda.jit(fastmath=True)
def pair_frequencies(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        hidden = float32(2 * n_pairs)
        out[pair] = float32(1.0) / math.pow(base, float32(2 * pair) / hidden)


@cuda.jit(fastmath=True)
def pair_frequencies_neg(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair >= n_pairs:
        return
    # base ** (-pair / n_pairs), the 2s cancel
    out[pair] = math.pow(base, -float32(pair) / float32(n_pairs))


@cuda.jit(fastmath=True)
def pair_frequencies_exp(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        e = float32(pair) * (float32(-2.0) / float32(n_pairs + n_pairs))
        out[pair] = math.exp(e * math.log(base))


# ---------------- 01.4 flat rope
@cuda.jit(fastmath=True)
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        hidden = float32(n_pairs + n_pairs)
        theta = float32(positions[token]) / math.pow(base, float32(pair + pair) / hidden)
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[2 * i]
        x1 = x[2 * i + uint64(1)]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_flat_negexp(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    tok = u // n_pairs
    p = u - tok * n_pairs
    inv_freq = math.pow(base, -float32(p) / float32(n_pairs))
    ang = float32(positions[tok]) * inv_freq
    lo = u + u
    a = x[lo]
    b = x[lo + uint64(1)]
    cs = math.cos(ang)
    sn = math.sin(ang)
    out[lo + uint64(1)] = a * sn + b * cs
    out[lo] = a * cs - b * sn


@cuda.jit(fastmath=True)
def my_rope_flat_stride(x, out, positions, n_pairs, total_pairs, base):
    # grid-stride loop, exp/log for the power, token/pair carried without dividing again
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    inv_hidden = float32(1.0) / float32(n_pairs * uint64(2))
    log_base = math.log(base)
    stride = uint64(cuda.gridsize(1))
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    total = uint64(total_pairs)
    while i < total:
        freq = math.exp(-float32(pair + pair) * inv_hidden * log_base)
        theta = float32(positions[token]) * freq
        s = math.sin(theta)
        c = math.cos(theta)
        j = i * uint64(2)
        x0 = x[j]
        x1 = x[j + uint64(1)]
        out[j] = x0 * c - x1 * s
        out[j + uint64(1)] = x0 * s + x1 * c
        i += stride
        pair += stride
        while pair >= n_pairs:
            pair -= n_pairs
            token += uint64(1)


ENTRIES = [
    ("01.1", "plain", pair_angles),
    ("01.1", "early_return", pair_angles_return),
    ("01.1", "grid_stride", pair_angles_stride),
    ("01.2", "blocks256", launch_pair_angles_256),
    ("01.2", "ceil64", launch_pair_angles_64),
    ("01.2", "fit_upto1024_stride", launch_pair_angles_1024),
    ("01.3", "recip_pow", pair_frequencies),
    ("01.3", "negative_exponent", pair_frequencies_neg),
    ("01.3", "exp_log", pair_frequencies_exp),
    ("01.4", "plain", my_rope_flat),
    ("01.4", "neg_exponent_return", my_rope_flat_negexp),
    ("01.4", "grid_stride_explog", my_rope_flat_stride),
]
