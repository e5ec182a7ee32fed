"""Set F, notebook 01 (01_flat_divmod.ipynb): steps 01.1 .. 01.4."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, int64, uint64


# ---- 01.1: pair_angles --------------------------------------------------------------------
@cuda.jit(fastmath=True)
def pair_angles_plain(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def pair_angles_gridstride(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    end = uint64(total_pairs)
    while i < end:
        token = i // n_pairs
        pair = i - n_pairs * token
        out[i] = inv_freq[pair] * float32(positions[token])
        i += step


@cuda.jit(fastmath=True)
def pair_angles_return(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    row = u // n_pairs
    col = u - row * n_pairs
    pos = float32(positions[row])
    out[idx] = pos * inv_freq[col]


# ---- 01.2: launch_pair_angles -------------------------------------------------------------
def launch_pair_angles_256(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_plain[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                       int64(total_pairs))


def launch_pair_angles_1024(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 1024 if total_pairs > 1024 else 32 * ((total_pairs + 31) // 32)
    blocks = math.ceil(total_pairs / threads)
    pair_angles_return[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                        numba.int64(total_pairs))


def launch_pair_angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 128
    blocks = min((total_pairs + threads - 1) // threads, 16)
    pair_angles_gridstride[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                            int64(total_pairs))


# ---- 01.3: pair_frequencies ---------------------------------------------------------------
@cuda.jit(fastmath=True)
def pair_frequencies_pow(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        out[pair] = float32(1.0) / math.pow(base, exponent)


@cuda.jit(fastmath=True)
def pair_frequencies_negpow(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair >= n_pairs:
        return
    e = float32(-2.0) * float32(pair) / float32(2 * n_pairs)
    out[pair] = math.pow(base, e)


@cuda.jit(fastmath=True)
def pair_frequencies_explog(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        # base ** -(p / n_pairs) = exp(-(p / n_pairs) ln base)
        frac = float32(pair) / float32(n_pairs)
        out[pair] = math.exp(-frac * math.log(base))


# ---- 01.4: my_rope_flat -------------------------------------------------------------------
@cuda.jit(fastmath=True)
def rope_flat_plain(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) / float32(n_pairs + n_pairs))
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[uint64(2) * i]
        x1 = x[uint64(2) * i + uint64(1)]
        out[uint64(2) * i] = x0 * c - x1 * s
        out[uint64(2) * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_flat_divide(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    row = u // n_pairs
    p = u - row * n_pairs
    hidden = float32(n_pairs + n_pairs)
    # angle = position / base ** (2p / hidden)
    angle = float32(positions[row]) / math.pow(base, float32(p + p) / hidden)
    j = u + u
    a = x[j]
    b = x[j + uint64(1)]
    s = math.sin(angle)
    c = math.cos(angle)
    out[j] = a * c - b * s
    out[j + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def rope_flat_explog_stride(x, out, positions, n_pairs, total_pairs, base):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    end = uint64(total_pairs)
    log_base = math.log(base)
    inv_n = float32(1.0) / float32(n_pairs)
    while i < end:
        token = i // n_pairs
        pair = i - token * n_pairs
        freq = math.exp(-float32(pair) * inv_n * log_base)
        angle = float32(positions[token]) * freq
        c = math.cos(angle)
        s = math.sin(angle)
        k = uint64(2) * i
        x0 = x[k]
        x1 = x[k + uint64(1)]
        out[k] = x0 * c - x1 * s
        out[k + uint64(1)] = x0 * s + x1 * c
        i += step


ENTRIES = [
    ("01.1", "plain", pair_angles_plain),
    ("01.1", "gridstride", pair_angles_gridstride),
    ("01.1", "early_return", pair_angles_return),
    ("01.2", "threads_256", launch_pair_angles_256),
    ("01.2", "threads_1024", launch_pair_angles_1024),
    ("01.2", "gridstride_capped", launch_pair_angles_stride),
    ("01.3", "pow_reciprocal", pair_frequencies_pow),
    ("01.3", "negative_exponent", pair_frequencies_negpow),
    ("01.3", "exp_log", pair_frequencies_explog),
    ("01.4", "plain", rope_flat_plain),
    ("01.4", "divide_by_pow", rope_flat_divide),
    ("01.4", "exp_log_gridstride", rope_flat_explog_stride),
]
