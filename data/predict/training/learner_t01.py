"""Training kernels for notebook 01's steps (flat index, division, frequencies, flat RoPE).

Variants a learner writes: one or two divisions, unsigned or 32-bit index math, a pow per pair
or a table, grid-stride loops, and for the launch step block sizes from 32 to 1024.
"""

import math

from numba import cuda, float32, int64, uint32, uint64

# --- 01.1: angles, token and pair from one division --------------------------------------


@cuda.jit(fastmath=True)
def angles_two_divisions(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        out[i] = float32(positions[i // n_pairs]) * inv_freq[i % n_pairs]


@cuda.jit(fastmath=True)
def angles_u32(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint32(idx)  # fits: the rows here hold a few million pairs
        n = uint32(n_pairs)
        token = i // n
        pair = i - token * n
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def angles_grid_stride(out, positions, inv_freq, n_pairs, total_pairs):
    idx = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    while idx < uint64(total_pairs):
        token = idx // n_pairs
        out[idx] = float32(positions[token]) * inv_freq[idx - token * n_pairs]
        idx += step


@cuda.jit(fastmath=True)
def angles_position_first(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        p = float32(positions[token])
        f = inv_freq[i - token * n_pairs]
        out[i] = p * f


# --- 01.2: the launch of the angle kernel ------------------------------------------------


@cuda.jit(fastmath=True)
def angles_kernel(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        out[i] = float32(positions[token]) * inv_freq[i - token * n_pairs]


@cuda.jit(fastmath=True)
def angles_kernel_strided(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        out[i] = float32(positions[token]) * inv_freq[i - token * n_pairs]
        i += uint64(cuda.gridsize(1))


def _angles_launch(threads):
    def launch(out, positions, inv_freq, n_pairs, total_pairs):
        blocks = (int(total_pairs) + threads - 1) // threads
        angles_kernel[blocks, threads](out, positions, inv_freq, uint64(n_pairs),
                                       int64(total_pairs))
    launch.__name__ = f"launch_pair_angles_{threads}"
    return launch


def launch_angles_grid_stride(out, positions, inv_freq, n_pairs, total_pairs):
    blocks = min(264, (int(total_pairs) + 511) // 512)  # two blocks per SM, then loop
    angles_kernel_strided[blocks, 512](out, positions, inv_freq, uint64(n_pairs),
                                       int64(total_pairs))


def launch_angles_python_ints(out, positions, inv_freq, n_pairs, total_pairs):
    # the scalars passed as they come (Python ints: int64 in the kernel)
    blocks = (total_pairs + 255) // 256
    angles_kernel[blocks, 256](out, positions, inv_freq, n_pairs, total_pairs)


# --- 01.3: each pair's frequency in float32 ----------------------------------------------


@cuda.jit(fastmath=True)
def freqs_exp_log(out, n_pairs, base):
    p = cuda.grid(1)
    if p < n_pairs:
        e = float32(-2.0) * float32(p) / float32(2 * n_pairs)
        out[p] = math.exp(e * math.log(base))


@cuda.jit(fastmath=True)
def freqs_reciprocal(out, n_pairs, base):
    p = cuda.grid(1)
    if p < n_pairs:
        out[p] = float32(1.0) / math.pow(base, float32(p) / float32(n_pairs))


@cuda.jit(fastmath=True)
def freqs_exp2(out, n_pairs, base):
    p = cuda.grid(1)
    if p < n_pairs:
        out[p] = math.pow(float32(2.0), -float32(p) * math.log2(base) / float32(n_pairs))


@cuda.jit(fastmath=True)
def freqs_repeated_multiply(out, n_pairs, base):
    # base ** (-p / n_pairs) as p multiplications by one ratio: slow and drifting, but
    # within the step's tolerance for these rows
    p = cuda.grid(1)
    if p < n_pairs:
        ratio = math.pow(base, float32(-1.0) / float32(n_pairs))
        f = float32(1.0)
        k = 0
        while k < p % 16:
            f *= ratio
            k += 1
        out[p] = f * math.pow(base, -float32(p - p % 16) / float32(n_pairs))


# --- 01.4: flat RoPE from an empty body --------------------------------------------------


@cuda.jit(fastmath=True)
def flat_exp(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.exp(float32(pair) * (-math.log(base) / float32(n_pairs)))
        angle = float32(positions[token]) * f
        a = x[i + i]
        b = x[i + i + uint64(1)]
        c, s = math.cos(angle), math.sin(angle)
        out[i + i] = a * c - b * s
        out[i + i + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def flat_loads_last(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) / math.pow(base, float32(pair) / float32(n_pairs))
        c = math.cos(angle)
        s = math.sin(angle)
        e = uint64(2) * i
        out[e] = x[e] * c - x[e + uint64(1)] * s
        out[e + uint64(1)] = x[e] * s + x[e + uint64(1)] * c  # reloaded after the store


@cuda.jit(fastmath=True)
def flat_grid_stride(x, out, positions, n_pairs, total_pairs, base):
    i = uint64(cuda.grid(1))
    inv = float32(1.0) / float32(n_pairs)
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * math.pow(base, -float32(pair) * inv)
        a = x[i + i]
        b = x[i + i + uint64(1)]
        c, s = math.cos(angle), math.sin(angle)
        out[i + i] = a * c - b * s
        out[i + i + uint64(1)] = a * s + b * c
        i += uint64(cuda.gridsize(1))


@cuda.jit(fastmath=True)
def flat_u32(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint32(idx)
        n = uint32(n_pairs)
        token = i // n
        pair = i - token * n
        f = math.pow(base, float32(-2.0) * float32(pair) / float32(2 * n))
        angle = float32(positions[token]) * f
        e = uint32(2) * i
        a = x[e]
        b = x[e + uint32(1)]
        out[e] = a * math.cos(angle) - b * math.sin(angle)
        out[e + uint32(1)] = a * math.sin(angle) + b * math.cos(angle)


@cuda.jit(fastmath=True)
def flat_sincos_twice(x, out, positions, n_pairs, total_pairs, base):
    # cos and sin evaluated once per float instead of once per pair
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        pos = float32(positions[token])
        a = x[i + i]
        b = x[i + i + uint64(1)]
        ang0 = pos * math.pow(base, -float32(pair) / float32(n_pairs))
        out[i + i] = a * math.cos(ang0) - b * math.sin(ang0)
        ang1 = pos * math.pow(base, -float32(pair) / float32(n_pairs))
        out[i + i + uint64(1)] = a * math.sin(ang1) + b * math.cos(ang1)


ENTRIES = [
    ("01.1", "two divisions", angles_two_divisions),
    ("01.1", "32-bit division", angles_u32),
    ("01.1", "grid-stride loop", angles_grid_stride),
    ("01.1", "position read first", angles_position_first),
    *[("01.2", f"block {t}", _angles_launch(t)) for t in (32, 64, 128, 256, 512, 1024)],
    ("01.2", "grid-stride 264 blocks of 512", launch_angles_grid_stride),
    ("01.2", "Python int scalars", launch_angles_python_ints),
    ("01.3", "exp of log", freqs_exp_log),
    ("01.3", "reciprocal of pow", freqs_reciprocal),
    ("01.3", "pow of 2", freqs_exp2),
    ("01.3", "repeated multiply", freqs_repeated_multiply),
    ("01.4", "exp of log", flat_exp),
    ("01.4", "loads after the first store", flat_loads_last),
    ("01.4", "grid-stride loop", flat_grid_stride),
    ("01.4", "32-bit index math", flat_u32),
    ("01.4", "sin/cos per float", flat_sincos_twice),
]
