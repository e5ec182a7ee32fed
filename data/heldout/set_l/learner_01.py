import ropelab  # noqa: F401
import math

import numba
from numba import cuda, float32, uint64


# ---------------- 01.1 pair_angles ----------------
@cuda.jit(fastmath=True)
def pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]


@cuda.jit
def pair_angles_manual(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - n_pairs * token
    p = float32(positions[token])
    f = inv_freq[pair]
    out[idx] = p * f


# ---------------- 01.2 launch_pair_angles ----------------
def launch_pair_angles_256(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


def launch_pair_angles_128(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 128
    blocks = math.ceil(total_pairs / threads)
    pair_angles_manual[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                        numba.int64(total_pairs))


def launch_pair_angles_1024(out, positions, inv_freq, n_pairs, total_pairs):
    threads = min(1024, ((total_pairs + 31) >> 5) << 5)
    blocks = -(-total_pairs // threads)
    pair_angles[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


# ---------------- 01.3 pair_frequencies ----------------
@cuda.jit(fastmath=True)
def pair_frequencies_pow(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        hidden = float32(2 * n_pairs)
        out[pair] = float32(1.0) / math.pow(base, float32(2 * pair) / hidden)


@cuda.jit(fastmath=True)
def pair_frequencies_negpow(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair >= n_pairs:
        return
    out[pair] = math.pow(base, -float32(pair) / float32(n_pairs))


@cuda.jit
def pair_frequencies_explog(out, n_pairs, base):
    pair = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if pair < n_pairs:
        e = float32(pair) / float32(n_pairs)
        out[pair] = math.exp(-e * math.log(base))


# ---------------- 01.4 my_rope_flat ----------------
@cuda.jit(fastmath=True)
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    inv_freq = float32(1.0) / math.pow(base, float32(2 * pair) / float32(2 * n_pairs))
    theta = float32(positions[token]) * inv_freq
    c = math.cos(theta)
    s = math.sin(theta)
    a = uint64(2) * i
    x0 = x[a]
    x1 = x[a + uint64(1)]
    out[a] = x0 * c - x1 * s
    out[a + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_flat_explog(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        freq = math.exp(-(float32(pair) / float32(n_pairs)) * math.log(base))
        theta = float32(positions[token]) * freq
        s = math.sin(theta)
        c = math.cos(theta)
        out[2 * idx] = x[2 * idx] * c - x[2 * idx + 1] * s
        out[2 * idx + 1] = x[2 * idx] * s + x[2 * idx + 1] * c


@cuda.jit
def my_rope_flat_precise(x, out, positions, n_pairs, total_pairs, base):
    # no fastmath: accurate pow/sin/cos
    idx = cuda.grid(1)
    stride = cuda.gridsize(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * math.pow(base, -float32(pair) / float32(n_pairs))
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c
        idx += stride



@cuda.jit(fastmath=True)
def pair_angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    step = cuda.gridsize(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        out[idx] = float32(positions[token]) * inv_freq[i - token * n_pairs]
        idx += step

ENTRIES = [
    ("01.1", "grid1_uint", pair_angles),
    ("01.1", "manual_return", pair_angles_manual),
    ("01.2", "b256", launch_pair_angles_256),
    ("01.2", "b128_numba_types", launch_pair_angles_128),
    ("01.2", "fit_warps_cap1024_shift", launch_pair_angles_1024),
    ("01.3", "recip_pow", pair_frequencies_pow),
    ("01.3", "negative_exponent_pow", pair_frequencies_negpow),
    ("01.3", "exp_log_nofastmath", pair_frequencies_explog),
    ("01.4", "pow_recip_uint_index", my_rope_flat),
    ("01.4", "exp_log_signed_index", my_rope_flat_explog),
    ("01.4", "precise_grid_stride", my_rope_flat_precise),
    ("01.1", "grid_stride", pair_angles_stride),
]
