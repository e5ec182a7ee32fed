"""Training kernels for notebook 02's steps (one block per token, the stride loop, its launch).

Variants: where the position is read (before the loop, inside it), a pow per pair or one per
thread and a ratio, two pairs per loop pass, ``range`` against ``while``; the launch with
blocks of 32 to 1024 threads.
"""

import math

from numba import cuda, float32, uint64

# --- 02.1: one block per token, one thread per pair --------------------------------------


@cuda.jit(fastmath=True)
def rows_unsigned(x, out, positions, inv_freq, n_pairs):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    if pair < uint64(n_pairs):
        e = uint64(2) * (token * uint64(n_pairs) + pair)
        a = x[e]
        b = x[e + uint64(1)]
        angle = float32(positions[token]) * inv_freq[pair]
        out[e] = a * math.cos(angle) - b * math.sin(angle)
        out[e + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)


@cuda.jit(fastmath=True)
def rows_position_in_shared(x, out, positions, inv_freq, n_pairs):
    pos = cuda.shared.array(1, float32)
    if cuda.threadIdx.x == 0:
        pos[0] = float32(positions[cuda.blockIdx.x])
    cuda.syncthreads()
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        e = 2 * (cuda.blockIdx.x * n_pairs + pair)
        angle = pos[0] * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        a = x[e]
        b = x[e + 1]
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rows_store_then_load(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        e = 2 * (cuda.blockIdx.x * n_pairs + pair)
        angle = float32(positions[cuda.blockIdx.x]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        a = x[e]
        out[e] = a * c - x[e + 1] * s
        out[e + 1] = a * s + x[e + 1] * c  # x[e + 1] read again after the store


@cuda.jit(fastmath=True)
def rows_row_pointer(x, out, positions, inv_freq, n_pairs):
    row = x[cuda.blockIdx.x * 2 * n_pairs:(cuda.blockIdx.x + 1) * 2 * n_pairs]
    dst = out[cuda.blockIdx.x * 2 * n_pairs:(cuda.blockIdx.x + 1) * 2 * n_pairs]
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        angle = float32(positions[cuda.blockIdx.x]) * inv_freq[pair]
        a = row[2 * pair]
        b = row[2 * pair + 1]
        dst[2 * pair] = a * math.cos(angle) - b * math.sin(angle)
        dst[2 * pair + 1] = a * math.sin(angle) + b * math.cos(angle)


# --- 02.2: the stride loop ---------------------------------------------------------------


@cuda.jit(fastmath=True)
def block2d_range(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    first = token * (n_pairs + n_pairs)
    for pair in range(uint64(cuda.threadIdx.x), n_pairs, uint64(cuda.blockDim.x)):
        angle = pos * math.pow(base, -float32(pair) / float32(n_pairs))
        e = first + pair + pair
        a = x[e]
        b = x[e + uint64(1)]
        c, s = math.cos(angle), math.sin(angle)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def block2d_position_in_loop(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        e = token * (n_pairs + n_pairs) + pair + pair
        a = x[e]
        b = x[e + uint64(1)]
        angle = float32(positions[token]) * math.pow(base, -float32(pair) / float32(n_pairs))
        c, s = math.cos(angle), math.sin(angle)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        pair += uint64(cuda.blockDim.x)


@cuda.jit(fastmath=True)
def block2d_ratio(x, out, positions, n_pairs, base):
    # one pow per thread: the next pair of this thread is blockDim pairs on, its frequency a
    # fixed ratio smaller
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    f = math.pow(base, -float32(pair) / float32(n_pairs))
    ratio = math.pow(base, -float32(step) / float32(n_pairs))
    while pair < n_pairs:
        e = token * (n_pairs + n_pairs) + pair + pair
        a = x[e]
        b = x[e + uint64(1)]
        angle = pos * f
        c, s = math.cos(angle), math.sin(angle)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        f *= ratio
        pair += step


@cuda.jit(fastmath=True)
def block2d_two_per_pass(x, out, positions, n_pairs, base):
    # pairs t and t + blockDim in one pass: four loads in flight before the stores
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    step = uint64(cuda.blockDim.x)
    first = token * (n_pairs + n_pairs)
    p = uint64(cuda.threadIdx.x)
    while p < n_pairs:
        q = p + step
        e = first + p + p
        a = x[e]
        b = x[e + uint64(1)]
        c2 = float32(0.0)
        d2 = float32(0.0)
        if q < n_pairs:
            c2 = x[first + q + q]
            d2 = x[first + q + q + uint64(1)]
        t0 = pos * math.pow(base, -float32(p) / float32(n_pairs))
        out[e] = a * math.cos(t0) - b * math.sin(t0)
        out[e + uint64(1)] = a * math.sin(t0) + b * math.cos(t0)
        if q < n_pairs:
            t1 = pos * math.pow(base, -float32(q) / float32(n_pairs))
            out[first + q + q] = c2 * math.cos(t1) - d2 * math.sin(t1)
            out[first + q + q + uint64(1)] = c2 * math.sin(t1) + d2 * math.cos(t1)
        p += step + step


@cuda.jit(fastmath=True)
def block2d_exp(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    k = -math.log(base) / float32(n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        angle = pos * math.exp(k * float32(pair))
        e = token * (n_pairs + n_pairs) + pair + pair
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * math.cos(angle) - b * math.sin(angle)
        out[e + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)
        pair += uint64(cuda.blockDim.x)


# --- 02.3: the launch --------------------------------------------------------------------


@cuda.jit(fastmath=True)
def block2d_kernel(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        angle = pos * math.pow(base, -float32(pair) / float32(n_pairs))
        e = token * (n_pairs + n_pairs) + pair + pair
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * math.cos(angle) - b * math.sin(angle)
        out[e + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)
        pair += uint64(cuda.blockDim.x)


def _block2d_launch(cap):
    def launch(x, out, positions, n_pairs, base):
        threads = min(32 * ((int(n_pairs) + 31) // 32), cap)
        block2d_kernel[positions.size, threads](x, out, positions, uint64(n_pairs),
                                                float32(base))
    launch.__name__ = f"launch_block2d_{cap}"
    return launch


ENTRIES = [
    ("02.1", "unsigned index", rows_unsigned),
    ("02.1", "position staged in shared", rows_position_in_shared),
    ("02.1", "x reloaded after a store", rows_store_then_load),
    ("02.1", "row slices", rows_row_pointer),
    ("02.2", "range loop", block2d_range),
    ("02.2", "position read in the loop", block2d_position_in_loop),
    ("02.2", "one pow and a ratio", block2d_ratio),
    ("02.2", "two pairs per pass", block2d_two_per_pass),
    ("02.2", "exp instead of pow", block2d_exp),
    *[("02.3", f"block at most {t}", _block2d_launch(t)) for t in (32, 64, 128, 256, 512, 1024)],
]
