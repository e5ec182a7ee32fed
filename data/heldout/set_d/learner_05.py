"""Notebook 05 (pair sincos), steps 05.1 .. 05.4."""
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 05.1
@cuda.jit(fastmath=True)
def rope_one_angle(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_one_angle_grid_stride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    nthreads = cuda.gridsize(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        angle = float32(positions[token]) * math.pow(base, exponent_step * float32(pair))
        s = math.sin(angle)
        c = math.cos(angle)
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c
        idx += nthreads


# ---------------------------------------------------------------- 05.2
@cuda.jit(fastmath=True)
def my_rope_strided(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                    stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        row = uint64(2) * token * n_pairs
        slot = j
        while slot < n_pairs:
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            e = row + slot + slot
            x0 = x[e]
            x1 = x[e + uint64(1)]
            out[e] = x0 * c - x1 * s
            out[e + uint64(1)] = x0 * s + x1 * c
            f *= stride_ratio
            slot += stride


@cuda.jit(fastmath=True)
def my_rope_strided_four_slots(x, out, positions, n_pairs, stride, total_threads, base,
                               exponent_step, stride_ratio):
    # at most four slots a thread: an unrolled-by-hand loop of four guarded slots
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    token = i // stride
    j = i - token * stride
    pos = float32(positions[token])
    f = math.pow(base, exponent_step * float32(j))
    e = uint64(2) * (token * n_pairs + j)
    jump = stride + stride
    slot = j
    for _ in range(4):
        if slot < n_pairs:
            x0 = x[e]
            x1 = x[e + uint64(1)]
            angle = pos * f
            s = math.sin(angle)
            c = math.cos(angle)
            out[e] = x0 * c - x1 * s
            out[e + uint64(1)] = x0 * s + x1 * c
        f = f * stride_ratio
        slot += stride
        e += jump


# ---------------------------------------------------------------- 05.3
def launch_strided(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = float(base) ** (exponent_step * stride)
    threads = 256
    blocks = (total_threads + threads - 1) // threads
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                     total_threads, float32(base), float32(exponent_step),
                                     float32(stride_ratio))


def launch_strided_64(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total_threads = tokens * stride
    exponent_step = -2.0 / float(hidden)
    stride_ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = -(-total_threads // threads)
    my_rope_strided_four_slots[blocks, threads](
        x, out, positions, numba.uint64(n_pairs), numba.uint64(stride),
        numba.int64(total_threads), numba.float32(base), numba.float32(exponent_step),
        numba.float32(stride_ratio))


# ---------------------------------------------------------------- 05.4
@cuda.jit(fastmath=True)
def rope_pair_sincos_heads(x, out, positions, heads, half_dim, stride, total_threads, step,
                           partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        slot = j
        while slot < half_dim:
            a = first + slot * step
            b = a + partner
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f *= stride_ratio
            slot += stride


@cuda.jit(fastmath=True)
def rope_pair_sincos_heads_ptr_step(x, out, positions, heads, half_dim, stride, total_threads,
                                    step, partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    head_row = i // stride
    j = i - head_row * stride
    token = head_row // heads
    a = (head_row * half_dim) * uint64(2) + j * step
    jump = stride * step
    pos = float32(positions[token])
    f = math.pow(base, exponent_step * float32(j))
    slot = j
    while slot < half_dim:
        x0 = x[a]
        x1 = x[a + partner]
        angle = pos * f
        s = math.sin(angle)
        c = math.cos(angle)
        out[a] = x0 * c - x1 * s
        out[a + partner] = x1 * c + x0 * s
        a += jump
        f = f * stride_ratio
        slot += stride


ENTRIES = [
    ("05.1", "if_guard", rope_one_angle),
    ("05.1", "grid_stride_loads_first", rope_one_angle_grid_stride),
    ("05.2", "while_slots", my_rope_strided),
    ("05.2", "four_guarded_slots", my_rope_strided_four_slots),
    ("05.3", "blocks_256", launch_strided),
    ("05.3", "blocks_64_four_slots", launch_strided_64),
    ("05.4", "while_slots", rope_pair_sincos_heads),
    ("05.4", "pointer_step", rope_pair_sincos_heads_ptr_step),
]
