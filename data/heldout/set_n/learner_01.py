import math
import numba
from numba import cuda, float32, uint64, int64


@cuda.jit(fastmath=True)
def pair_angles_a(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit
def pair_angles_b(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    t = u // n_pairs
    j = u - n_pairs * t
    p = float32(positions[t])
    out[u] = inv_freq[j] * p


@cuda.jit
def pair_angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    while i < total:
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]
        i += step


def launch_pair_angles_a(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_a[blocks, threads](out, positions, inv_freq, uint64(n_pairs), int64(total_pairs))


def launch_pair_angles_b(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 96  # three warps
    blocks = math.ceil(total_pairs / threads)
    pair_angles_b[blocks, threads](out, positions, inv_freq, numba.uint64(n_pairs),
                                   numba.int64(total_pairs))


def launch_pair_angles_c(out, positions, inv_freq, n_pairs, total_pairs):
    threads = min(1024, 32 * ((total_pairs + 31) // 32))
    blocks = -(-total_pairs // threads)
    pair_angles_stride[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                        int64(total_pairs))


@cuda.jit(fastmath=True)
def pair_frequencies_a(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        hidden = float32(2 * n_pairs)
        out[pair] = float32(1.0) / math.pow(base, float32(2 * pair) / hidden)


@cuda.jit
def pair_frequencies_b(out, n_pairs, base):
    pair = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if pair >= n_pairs:
        return
    e = float32(pair) / float32(n_pairs)
    out[pair] = math.pow(base, -e)


@cuda.jit(fastmath=True)
def pair_frequencies_c(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        e = float32(-2.0) * float32(pair) / float32(2 * n_pairs)
        out[pair] = math.exp(e * math.log(base))


@cuda.jit(fastmath=True)
def my_rope_flat_a(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        hidden = float32(2 * n_pairs)
        inv_freq = float32(1.0) / math.pow(base, float32(2 * pair) / hidden)
        theta = float32(positions[token]) * inv_freq
        c = math.cos(theta)
        s = math.sin(theta)
        a = x[2 * i]
        b = x[2 * i + 1]
        out[2 * i] = a * c - b * s
        out[2 * i + 1] = a * s + b * c


@cuda.jit
def my_rope_flat_b(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    t = u // n_pairs
    p = u - t * n_pairs
    expo = float32(-1.0) * float32(p) / float32(n_pairs)
    freq = math.pow(base, expo)
    ang = freq * float32(positions[t])
    e0 = uint64(2) * u
    x0 = x[e0]
    x1 = x[e0 + uint64(1)]
    cs = math.cos(ang)
    sn = math.sin(ang)
    out[e0] = x0 * cs - x1 * sn
    out[e0 + uint64(1)] = x1 * cs + x0 * sn


@cuda.jit(fastmath=True)
def my_rope_flat_c(x, out, positions, n_pairs, total_pairs, base):
    i = uint64(cuda.grid(1))
    if i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - n_pairs * token
        # frequency through exp/log instead of pow
        ln_base = math.log(base)
        f = math.exp(float32(-2.0) * float32(pair) * ln_base / float32(2 * n_pairs))
        theta = float32(positions[token]) * f
        s = math.sin(theta)
        c = math.cos(theta)
        lo = x[i + i]
        hi = x[i + i + uint64(1)]
        out[i + i] = lo * c - hi * s
        out[i + i + uint64(1)] = lo * s + hi * c


ENTRIES = [
    ("01.1", "guard then uint64 divide", pair_angles_a),
    ("01.1", "early return, index with u", pair_angles_b),
    ("01.1", "uint64 grid-stride loop", pair_angles_stride),
    ("01.2", "256 threads", launch_pair_angles_a),
    ("01.2", "96 threads math.ceil", launch_pair_angles_b),
    ("01.2", "fitted warps cap 1024, stride kernel", launch_pair_angles_c),
    ("01.3", "1/pow with hidden", pair_frequencies_a),
    ("01.3", "pow with negative exponent p/n, no fastmath", pair_frequencies_b),
    ("01.3", "exp(log) form", pair_frequencies_c),
    ("01.4", "fastmath pow, loads after trig", my_rope_flat_a),
    ("01.4", "no fastmath, negative-exponent pow", my_rope_flat_b),
    ("01.4", "exp/log frequency, uint64 guard", my_rope_flat_c),
]
