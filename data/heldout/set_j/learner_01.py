import ropelab
import math
import numba
from numba import cuda, float32, uint64, int64


# 01.1 pair_angles
@cuda.jit(fastmath=True)
def pair_angles_a(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def pair_angles_b(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if i >= uint64(total_pairs):
        return
    token = i // n_pairs
    pair = i - n_pairs * token
    pos = float32(positions[token])
    f = inv_freq[pair]
    out[i] = pos * f


@cuda.jit
def pair_angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    stop = uint64(total_pairs)
    while i < stop:
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]
        i += step


# 01.2 launch
def launch_pair_angles_128(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 128
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_a[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                   numba.int64(total_pairs))


def launch_pair_angles_1024(out, positions, inv_freq, n_pairs, total_pairs):
    threads = min(1024, total_pairs)
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_b[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                   numba.int64(total_pairs))


def launch_pair_angles_64(out, positions, inv_freq, n_pairs, total_pairs):
    tpb = 64
    nblocks = math.ceil(total_pairs / tpb)
    pair_angles_a[nblocks, tpb](out, positions, inv_freq, numba.uint64(n_pairs),
                                numba.int64(total_pairs))


# 01.3 pair_frequencies
@cuda.jit(fastmath=True)
def pair_frequencies_a(out, n_pairs, base):
    p = cuda.grid(1)
    if p < n_pairs:
        hidden = float32(2 * n_pairs)
        e = float32(2 * p) / hidden
        out[p] = float32(1.0) / math.pow(base, e)


@cuda.jit(fastmath=True)
def pair_frequencies_b(out, n_pairs, base):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    e = float32(p) / float32(n_pairs)
    out[p] = math.pow(base, -e)


# 01.4 my_rope_flat
@cuda.jit(fastmath=True)
def my_rope_flat_a(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    e = float32(2 * pair) / float32(2 * n_pairs)
    freq = float32(1.0) / math.pow(base, e)
    angle = float32(positions[token]) * freq
    c = math.cos(angle)
    s = math.sin(angle)
    a = x[2 * i]
    b = x[2 * i + 1]
    out[2 * i] = a * c - b * s
    out[2 * i + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def my_rope_flat_b(x, out, positions, n_pairs, total_pairs, base):
    i = uint64(cuda.grid(1))
    if i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - n_pairs * token
        a = x[i + i]
        b = x[i + i + uint64(1)]
        pos = float32(positions[token])
        freq = math.pow(base, -float32(pair) / float32(n_pairs))
        angle = pos * freq
        s = math.sin(angle)
        c = math.cos(angle)
        out[i + i] = cuda.fma(a, c, -b * s)
        out[i + i + uint64(1)] = cuda.fma(a, s, b * c)


ENTRIES = [
    ("01.1", "grid1_uint_guard_if", pair_angles_a),
    ("01.1", "manual_uint_early_return", pair_angles_b),
    ("01.1", "grid_stride_while", pair_angles_stride),
    ("01.2", "block128", launch_pair_angles_128),
    ("01.2", "block1024_capped", launch_pair_angles_1024),
    ("01.2", "block64_ceil", launch_pair_angles_64),
    ("01.3", "pow_recip", pair_frequencies_a),
    ("01.3", "pow_neg_exponent_early_return", pair_frequencies_b),
    ("01.4", "grid1_early_return", my_rope_flat_a),
    ("01.4", "uint_loads_first_fma", my_rope_flat_b),
]
