import ropelab  # noqa: F401
import math
import numba
from numba import cuda, uint64, float32


@cuda.jit
def pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit
def pair_angles_v2(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - n_pairs * token
    pos = positions[token]
    f = inv_freq[pair]
    out[i] = f * float32(pos)


def launch_pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 64
    blocks = (total_pairs + threads - 1) // threads
    pair_angles[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                 numba.int64(total_pairs))


def launch_pair_angles_v2(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    if total_pairs < threads:
        threads = 32 * ((total_pairs + 31) // 32)
    blocks = math.ceil(total_pairs / threads)
    pair_angles_v2[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                    numba.int64(total_pairs))


@cuda.jit
def pair_frequencies(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        e = float32(pair) / float32(n_pairs)
        out[pair] = float32(1.0) / (base ** e)


@cuda.jit
def pair_frequencies_v2(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        e = float32(-2.0) * float32(pair) / float32(2 * n_pairs)
        out[pair] = math.pow(base, e)


@cuda.jit
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        hidden = float32(n_pairs) * float32(2.0)
        inv_freq = float32(1.0) / (base ** (float32(2.0) * float32(pair) / hidden))
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit
def my_rope_flat_v2(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    expo = float32(pair) / float32(n_pairs)
    inv_freq = math.pow(base, -expo)
    angle = float32(positions[token]) * inv_freq
    s = math.sin(angle)
    c = math.cos(angle)
    e = idx * 2
    x0 = x[e]
    x1 = x[e + 1]
    out[e] = x0 * c - x1 * s
    out[e + 1] = x1 * c + x0 * s


ENTRIES = [
    ("01.1", "uint_div", pair_angles),
    ("01.1", "early_return", pair_angles_v2),
    ("01.2", "64_threads", launch_pair_angles),
    ("01.2", "256_threads", launch_pair_angles_v2),
    ("01.3", "reciprocal_pow", pair_frequencies),
    ("01.3", "neg_exponent", pair_frequencies_v2),
    ("01.4", "reciprocal_pow", my_rope_flat),
    ("01.4", "neg_pow", my_rope_flat_v2),
]
