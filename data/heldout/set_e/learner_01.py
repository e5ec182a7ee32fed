"""Notebook 01 (flat divmod), steps 01.1 .. 01.4."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 01.1 pair_angles
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
    row = u // n_pairs
    col = u - row * n_pairs
    f = inv_freq[col]
    p = float32(positions[row])
    out[u] = p * f


@cuda.jit(fastmath=True)
def pair_angles_all_unsigned(out, positions, inv_freq, n_pairs, total_pairs):
    # every index unsigned from the start: block and thread numbers as uint64
    u = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if u < uint64(total_pairs):
        token = u // n_pairs
        out[u] = inv_freq[u - n_pairs * token] * float32(positions[token])


# ---------------------------------------------------------------- 01.2 launch_pair_angles
def launch_pair_angles_256(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_plain[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                       total_pairs)


def launch_pair_angles_128(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 128
    blocks = -(-total_pairs // threads)
    pair_angles_return[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                        int(total_pairs))


def launch_pair_angles_1024(out, positions, inv_freq, n_pairs, total_pairs):
    threads = min(1024, 32 * ((total_pairs + 31) // 32))
    blocks = math.ceil(total_pairs / threads)
    pair_angles_all_unsigned[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                              total_pairs)


# ---------------------------------------------------------------- 01.3 pair_frequencies
@cuda.jit(fastmath=True)
def pair_frequencies_pow(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        out[pair] = float32(1.0) / math.pow(base, exponent)


@cuda.jit(fastmath=True)
def pair_frequencies_neg_pow(out, n_pairs, base):
    pair = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if pair >= n_pairs:
        return
    # base ** (-pair / n_pairs): 2 pair / hidden with hidden = 2 n_pairs
    out[pair] = math.pow(base, -float32(pair) / float32(n_pairs))


@cuda.jit(fastmath=True)
def pair_frequencies_exp_log(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        log_base = math.log(base)
        out[pair] = math.exp(-log_base * float32(pair) / float32(n_pairs))


# ---------------------------------------------------------------- 01.4 my_rope_flat
@cuda.jit(fastmath=True)
def rope_flat_plain(x, out, positions, n_pairs, total_pairs, base):
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
        x0 = x[i + i]
        x1 = x[i + i + uint64(1)]
        out[i + i] = x0 * c - x1 * s
        out[i + i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_flat_exp_log(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    e = uint64(2) * i
    # loads before any math
    x0 = x[e]
    x1 = x[e + uint64(1)]
    pos = float32(positions[token])
    freq = math.exp(-math.log(base) * float32(pair) / float32(n_pairs))
    theta = pos * freq
    s = math.sin(theta)
    c = math.cos(theta)
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x1 * c + x0 * s


@cuda.jit(fastmath=True)
def rope_flat_divide_by_pow(x, out, positions, n_pairs, total_pairs, base):
    # angle = position / base ** (pair / n_pairs): one pow, a division instead of 1 / pow
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - n_pairs * token
        inv_np = float32(1.0) / float32(n_pairs)
        angle = float32(positions[token]) / math.pow(base, float32(pair) * inv_np)
        c = math.cos(angle)
        s = math.sin(angle)
        j = i << uint64(1)
        a = x[j]
        b = x[j + uint64(1)]
        out[j] = a * c - b * s
        out[j + uint64(1)] = a * s + b * c


ENTRIES = [
    ("01.1", "grid_if_uint", pair_angles_plain),
    ("01.1", "explicit_return", pair_angles_return),
    ("01.1", "all_unsigned_index", pair_angles_all_unsigned),
    ("01.2", "block256", launch_pair_angles_256),
    ("01.2", "block128_negdiv", launch_pair_angles_128),
    ("01.2", "block_fit_1024", launch_pair_angles_1024),
    ("01.3", "one_over_pow", pair_frequencies_pow),
    ("01.3", "negative_exponent_pow", pair_frequencies_neg_pow),
    ("01.3", "exp_log", pair_frequencies_exp_log),
    ("01.4", "plain_pow", rope_flat_plain),
    ("01.4", "exp_log_loads_first", rope_flat_exp_log),
    ("01.4", "divide_by_pow_shift", rope_flat_divide_by_pow),
]
