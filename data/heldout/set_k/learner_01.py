import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numba
from numba import cuda, float32, int64, uint64


# ---- 01.1 pair_angles ----
@cuda.jit
def pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit
def pair_angles_manual(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    t = u // n_pairs
    f = inv_freq[u - t * n_pairs]
    p = positions[t]
    out[u] = f * float32(p)


@cuda.jit
def pair_angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    step = cuda.gridsize(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        out[idx] = float32(positions[token]) * inv_freq[i - token * n_pairs]
        idx += step


# ---- 01.2 launch ----
def launch_pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                 numba.int64(total_pairs))


def launch_pair_angles_96(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 96
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_manual[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                        numba.int64(total_pairs))


def launch_pair_angles_few(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 1024
    if total_pairs < threads:
        threads = ((total_pairs + 31) // 32) * 32
    blocks = min(4, (total_pairs + threads - 1) // threads)
    pair_angles_stride[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                        numba.int64(total_pairs))


# ---- 01.3 pair_frequencies ----
@cuda.jit
def pair_frequencies(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        out[pair] = float32(1.0) / math.pow(base, exponent)


@cuda.jit
def pair_frequencies_neg(out, n_pairs, base):
    pair = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if pair >= n_pairs:
        return
    e = float32(-2.0) * float32(pair) / float32(2 * n_pairs)
    out[pair] = math.pow(base, e)


@cuda.jit
def pair_frequencies_exp(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        lb = math.log(base)
        e = float32(pair) / float32(n_pairs)
        out[pair] = math.exp(-e * lb)


# ---- 01.4 my_rope_flat ----
@cuda.jit
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) / float32(n_pairs + n_pairs))
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit
def my_rope_flat_loads_first(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    e = i + i
    x0 = x[e]
    x1 = x[e + 1]
    token = i // n_pairs
    pos = positions[token]
    pair = i - token * n_pairs
    expo = float32(-2.0) * float32(pair) / float32(n_pairs * uint64(2))
    angle = float32(pos) * math.pow(base, expo)
    c = math.cos(angle)
    s = math.sin(angle)
    out[e] = cuda.fma(x0, c, -x1 * s)
    out[e + 1] = cuda.fma(x0, s, x1 * c)


@cuda.jit
def my_rope_flat_stride(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    nth = cuda.gridsize(1)
    half_inv = float32(1.0) / float32(n_pairs)
    k = idx
    while k < total_pairs:
        i = uint64(k)
        k += nth
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, -float32(pair) * half_inv)
        a = float32(positions[token]) * f
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


ENTRIES = [
    ("01.1", "grid1_uint_div", pair_angles),
    ("01.1", "manual_early_return", pair_angles_manual),
    ("01.1", "grid_stride_loop", pair_angles_stride),
    ("01.2", "block256", launch_pair_angles),
    ("01.2", "block96_manual", launch_pair_angles_96),
    ("01.2", "block1024_4blocks_stride", launch_pair_angles_few),
    ("01.3", "recip_pow", pair_frequencies),
    ("01.3", "neg_exponent_pow", pair_frequencies_neg),
    ("01.3", "exp_log", pair_frequencies_exp),
    ("01.4", "guard_pow_interleaved", my_rope_flat),
    ("01.4", "loads_first_negpow_fma", my_rope_flat_loads_first),
    ("01.4", "range_gridstride", my_rope_flat_stride),
]
