import ropelab
from numba import cuda, float32, uint64
import math

# 01.1: one thread per pair; unsigned index, one division, remainder by multiply-subtract.
@cuda.jit(fastmath=True)
def pair_angles_basic(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]


# 01.1: grid-stride loop over pairs, all index math in uint64.
@cuda.jit(fastmath=True)
def pair_angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    while i < total:
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]
        i += stride


# 01.2 (launched): 64 threads per block, blocks = ceil(total_pairs / 64).
def launch_pair_angles_64(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 64
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_basic[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


# 01.2: 128 threads per block, launching the grid-stride kernel.
def launch_pair_angles_128(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 128
    blocks = -(-total_pairs // threads)
    pair_angles_stride[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


# 01.2: block = total_pairs rounded up to a warp, capped at 512; tokens x pairs from the arrays.
def launch_pair_angles_fit(out, positions, inv_freq, n_pairs, total_pairs):
    total = positions.size * inv_freq.size
    threads = min(512, 32 * ((total + 31) // 32))
    blocks = (total + threads - 1) // threads
    pair_angles_basic[blocks, threads](out, positions, inv_freq, uint64(inv_freq.size), total)


# 01.3: 1 / pow(base, 2 pair / hidden), exponent as a float32 quotient.
@cuda.jit(fastmath=True)
def pair_frequencies_recip(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        out[pair] = float32(1.0) / math.pow(base, exponent)


# 01.3: pow with a negative exponent, -pair / n_pairs (same as -2 pair / hidden).
@cuda.jit(fastmath=True)
def pair_frequencies_negexp(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        out[pair] = math.pow(base, -float32(pair) / float32(n_pairs))


# 01.3: exp(-(2 pair / hidden) * log(base)), all float32.
@cuda.jit(fastmath=True)
def pair_frequencies_explog(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        inv_hidden = float32(0.5) / float32(n_pairs)
        out[pair] = math.exp(-float32(2 * pair) * inv_hidden * math.log(base))


# 01.4: the seed's flat kernel: one thread per pair, pow per thread, cos and sin.
@cuda.jit(fastmath=True)
def rope_flat_basic(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        hidden = float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) / hidden)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# 01.4: grid-stride loop over pairs, frequency as pow(base, -pair / n_pairs).
@cuda.jit(fastmath=True)
def rope_flat_stride(x, out, positions, n_pairs, total_pairs, base):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    inv_n = float32(1.0) / float32(n_pairs)
    while i < total:
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, -float32(pair) * inv_n)
        angle = float32(positions[token]) * f
        e = uint64(2) * i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x1 * c + x0 * s
        i += stride


# 01.4: angle as position / base**(2 pair / hidden) (a division instead of a reciprocal).
@cuda.jit(fastmath=True)
def rope_flat_divide(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    angle = float32(positions[token]) / math.pow(base, float32(pair) / float32(n_pairs))
    c = math.cos(angle)
    s = math.sin(angle)
    a = i + i
    b = a + uint64(1)
    x0 = x[a]
    x1 = x[b]
    out[a] = x0 * c - x1 * s
    out[b] = x0 * s + x1 * c


ENTRIES = [
    ("01.1", "angles_basic", pair_angles_basic),
    ("01.1", "angles_stride", pair_angles_stride),
    ("01.2", "launch_angles_64", launch_pair_angles_64),
    ("01.2", "launch_angles_128_stride", launch_pair_angles_128),
    ("01.2", "launch_angles_fit_512", launch_pair_angles_fit),
    ("01.3", "freqs_reciprocal", pair_frequencies_recip),
    ("01.3", "freqs_negative_exponent", pair_frequencies_negexp),
    ("01.3", "freqs_exp_log", pair_frequencies_explog),
    ("01.4", "flat_basic", rope_flat_basic),
    ("01.4", "flat_stride", rope_flat_stride),
    ("01.4", "flat_divide_by_pow", rope_flat_divide),
]
