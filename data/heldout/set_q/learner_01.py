"""Notebook 01 steps: flat index, one unsigned division."""
import math

from numba import cuda, float32, int64, uint64


# ---------------- 01.1 pair_angles
@cuda.jit(fastmath=True)
def pair_angles_a(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]


@cuda.jit("void(float32[::1], int32[::1], float32[::1], uint64, int64)", fastmath=True)
def pair_angles_b(out, positions, inv_freq, n_pairs, total_pairs):
    # everything unsigned, including the guard
    i = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if i >= uint64(total_pairs):
        return
    token = i // n_pairs
    pair = i - n_pairs * token
    f = inv_freq[pair]
    p = float32(positions[token])
    out[i] = f * p


@cuda.jit(fastmath=True)
def pair_angles_c(out, positions, inv_freq, n_pairs, total_pairs):
    # grid-stride loop over unsigned pair numbers
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    while i < total:
        token = i // n_pairs
        out[i] = float32(positions[token]) * inv_freq[i - token * n_pairs]
        i += stride


# ---------------- 01.2 launch_pair_angles
def launch_pair_angles_a(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    pair_angles_a[blocks, threads](out, positions, inv_freq, uint64(n_pairs), int64(total_pairs))


def launch_pair_angles_b(out, positions, inv_freq, n_pairs, total_pairs):
    # a block per row's worth of warps, capped at 1024
    threads = min(1024, max(32, 32 * ((int(total_pairs) + 31) // 32)))
    blocks = math.ceil(int(total_pairs) / threads)
    pair_angles_b[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                   int64(total_pairs))


def launch_pair_angles_c(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 96  # whole warps, not a power of two
    blocks = -(-int(total_pairs) // threads)
    pair_angles_c[(blocks, 1, 1), (threads, 1, 1)](out, positions, inv_freq, uint64(n_pairs),
                                                  int64(total_pairs))


# ---------------- 01.3 pair_frequencies
@cuda.jit(fastmath=True)
def pair_frequencies_a(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        hidden = 2 * n_pairs
        e = float32(2 * pair) / float32(hidden)
        out[pair] = float32(1.0) / math.pow(base, e)


@cuda.jit(fastmath=True)
def pair_frequencies_b(out, n_pairs, base):
    # exp / log instead of pow, exponent as pair / n_pairs
    pair = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if pair >= n_pairs:
        return
    e = float32(pair) / float32(n_pairs)
    out[pair] = math.exp(-e * math.log(base))


@cuda.jit
def pair_frequencies_c(out, n_pairs, base):
    # no fastmath, negative exponent straight into pow
    pair = cuda.grid(1)
    if pair < n_pairs:
        inv_hidden = float32(1.0) / float32(2 * n_pairs)
        out[pair] = math.pow(base, float32(-2.0) * float32(pair) * inv_hidden)


# ---------------- 01.4 my_rope_flat
@cuda.jit(fastmath=True)
def my_rope_flat_a(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    hidden = float32(n_pairs + n_pairs)
    freq = float32(1.0) / math.pow(base, float32(pair + pair) / hidden)
    theta = float32(positions[token]) * freq
    c = math.cos(theta)
    s = math.sin(theta)
    two = uint64(2)
    e = i * two
    x0 = x[e]
    x1 = x[e + uint64(1)]
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit("void(float32[::1], float32[::1], int32[::1], uint64, int64, float32)",
          fastmath=True)
def my_rope_flat_b(x, out, positions, n_pairs, total_pairs, base):
    # loads first, exp/log frequency, signed element index
    idx = cuda.grid(1)
    if idx < total_pairs:
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        u = uint64(idx)
        token = u // n_pairs
        pair = u - token * n_pairs
        ln_base = math.log(base)
        freq = math.exp(-(float32(pair) / float32(n_pairs)) * ln_base)
        angle = float32(positions[token]) * freq
        s = math.sin(angle)
        c = math.cos(angle)
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x1 * c + x0 * s


@cuda.jit(fastmath=True)
def my_rope_flat_c(x, out, positions, n_pairs, total_pairs, base):
    # grid-stride over unsigned pairs, pow with a negative exponent
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    neg_two_over_hidden = float32(-1.0) / float32(n_pairs)
    while i < total:
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * math.pow(base, float32(pair) * neg_two_over_hidden)
        c = math.cos(angle)
        s = math.sin(angle)
        a = x[i + i]
        b = x[i + i + uint64(1)]
        out[i + i] = cuda.fma(a, c, -(b * s))
        out[i + i + uint64(1)] = cuda.fma(a, s, b * c)
        i += stride


# ---------------- extra entry
@cuda.jit(fastmath=True)
def pair_frequencies_d(out, n_pairs, base):
    # the ** operator on float32 operands instead of math.pow
    pair = cuda.grid(1)
    if pair < n_pairs:
        out[pair] = float32(1.0) / base ** (float32(2 * pair) / float32(2 * n_pairs))


ENTRIES = [
    ("01.1", "signed-guard-then-uint64", pair_angles_a),
    ("01.1", "all-unsigned-eager-sig", pair_angles_b),
    ("01.1", "uint64-grid-stride", pair_angles_c),
    ("01.2", "256-ceil", launch_pair_angles_a),
    ("01.2", "warp-rounded-cap1024-math.ceil", launch_pair_angles_b),
    ("01.2", "96-tuple-3d-gridstride", launch_pair_angles_c),
    ("01.3", "pow-reciprocal", pair_frequencies_a),
    ("01.3", "exp-log", pair_frequencies_b),
    ("01.3", "pow-negexp-nofastmath", pair_frequencies_c),
    ("01.3", "power-operator", pair_frequencies_d),
    ("01.4", "pow-reciprocal-uint64-index", my_rope_flat_a),
    ("01.4", "loads-first-exp-log", my_rope_flat_b),
    ("01.4", "grid-stride-pow-neg-fma", my_rope_flat_c),
]
