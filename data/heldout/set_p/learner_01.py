import math
import numba
from numba import cuda, float32, uint64


@cuda.jit
def pair_angles_a(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        u = uint64(idx)
        token = u // n_pairs
        pair = u - token * n_pairs
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit
def pair_angles_b(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    token = u // n_pairs
    pair = u - n_pairs * token
    f = inv_freq[pair]
    pos = positions[token]
    out[idx] = f * float32(pos)


def launch_pair_angles_a(out, positions, inv_freq, n_pairs, total_pairs):
    tpb = 128
    blocks = (total_pairs + tpb - 1) // tpb
    pair_angles_a[blocks, tpb](out, positions, inv_freq, numba.uint64(n_pairs),
                               numba.int64(total_pairs))


def launch_pair_angles_b(out, positions, inv_freq, n_pairs, total_pairs):
    tpb = 1024 if total_pairs >= 1024 else 32 * ((total_pairs + 31) // 32)
    blocks = math.ceil(total_pairs / tpb)
    pair_angles_b[blocks, tpb](out, positions, inv_freq, numba.uint64(n_pairs), total_pairs)


@cuda.jit
def pair_frequencies_a(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        e = -float32(pair) / float32(n_pairs)
        out[pair] = base ** e


@cuda.jit
def pair_frequencies_b(out, n_pairs, base):
    pair = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if pair >= n_pairs:
        return
    hidden = float32(2 * n_pairs)
    e = float32(-2.0) * float32(pair) / hidden
    out[pair] = math.exp(e * math.log(base))


@cuda.jit
def rope_flat_a(x, out, positions, n_pairs, total_pairs, base):
    i = cuda.grid(1)
    if i < total_pairs:
        u = uint64(i)
        token = u // n_pairs
        pair = u - token * n_pairs
        freq = base ** (-float32(pair) / float32(n_pairs))
        ang = float32(positions[token]) * freq
        c = math.cos(ang)
        s = math.sin(ang)
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit
def rope_flat_b(x, out, positions, n_pairs, total_pairs, base):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= total_pairs:
        return
    u = uint64(i)
    token = u // n_pairs
    pair = u - n_pairs * token
    a = x[2 * i]
    b = x[2 * i + 1]
    logb = math.log(base)
    freq = math.exp(float32(-2.0) * float32(pair) / float32(2 * n_pairs) * logb)
    ang = freq * float32(positions[token])
    s = math.sin(ang)
    c = math.cos(ang)
    out[2 * i + 1] = a * s + b * c
    out[2 * i] = a * c - b * s


ENTRIES = [
    ("01.1", "cast-div-sub", pair_angles_a),
    ("01.1", "return-guard", pair_angles_b),
    ("01.2", "tpb128", launch_pair_angles_a),
    ("01.2", "tpb-up-to-1024", launch_pair_angles_b),
    ("01.3", "pow-op", pair_frequencies_a),
    ("01.3", "exp-log", pair_frequencies_b),
    ("01.4", "pow-op", rope_flat_a),
    ("01.4", "exp-log-loads-first", rope_flat_b),
]
