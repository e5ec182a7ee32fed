"""Notebook 05: one angle per pair, strided slots with one pow per thread."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, int64, uint64


# ---------------------------------------------------------------- 05.1
@cuda.jit(fastmath=True)
def rope_one_angle_pow(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[i + i]
        x1 = x[i + i + uint64(1)]
        out[i + i] = x0 * c - x1 * s
        out[i + i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_one_angle_explog(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    token = u // n_pairs
    pair = u - token * n_pairs
    # base ** e = exp(e ln base): one lg2 (the log) and one ex2
    f = math.exp(exponent_step * float32(pair) * math.log(base))
    theta = f * float32(positions[token])
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    s = math.sin(theta)
    c = math.cos(theta)
    out[2 * idx] = x0 * c - x1 * s
    out[2 * idx + 1] = x0 * s + x1 * c


# ---------------------------------------------------------------- 05.2
@cuda.jit(fastmath=True)
def my_rope_strided_while(x, out, positions, n_pairs, stride, total_threads, base,
                          exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        row = uint64(2) * token * n_pairs
        while j < n_pairs:
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            a = row + uint64(2) * j
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def my_rope_strided_angle_step(x, out, positions, n_pairs, stride, total_threads, base,
                               exponent_step, stride_ratio):
    # keeps the angle itself and multiplies it by stride_ratio from slot to slot
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    one = uint64(1)
    u = uint64(idx)
    token = u // stride
    j = u - token * stride
    theta = float32(positions[token]) * math.pow(base, exponent_step * float32(j))
    a = (token * n_pairs + j) << one
    hop = stride << one
    while j < n_pairs:
        x0 = x[a]
        x1 = x[a + one]
        s = math.sin(theta)
        c = math.cos(theta)
        out[a + one] = x0 * s + x1 * c
        out[a] = x0 * c - x1 * s
        theta *= stride_ratio
        a += hop
        j += stride


# ---------------------------------------------------------------- 05.3
def launch_strided_64(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = (total_threads + threads - 1) // threads
    my_rope_strided_while[blocks, threads](
        x, out, positions, numba.uint64(n_pairs), numba.uint64(stride),
        numba.int64(total_threads), numba.float32(base), numba.float32(exponent_step),
        numba.float32(stride_ratio))


def launch_strided_fit(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = math.ceil(n_pairs / 4)
    total = tokens * stride
    e = -2.0 / float(hidden)
    ratio = math.pow(float(base), e * stride)
    threads = min(1024, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    my_rope_strided_angle_step[blocks, threads](
        x, out, positions, uint64(n_pairs), uint64(stride), int64(total), float32(base),
        float32(e), float32(ratio))


# ---------------------------------------------------------------- 05.4
@cuda.jit(fastmath=True)
def pair_sincos_heads_while(x, out, positions, heads, half_dim, stride, total_threads, step,
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
        while j < half_dim:
            a = first + j * step
            b = a + partner
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f *= stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def pair_sincos_heads_unrolled(x, out, positions, heads, half_dim, stride, total_threads,
                               step, partner, base, exponent_step, stride_ratio):
    # stride = ceil(half_dim / 4): a thread has at most four slots, written out one by one
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    u = uint64(idx)
    head_row = u // stride
    j = u - head_row * stride
    first = head_row * half_dim * uint64(2)
    pos = float32(positions[head_row // heads])
    f = math.pow(base, exponent_step * float32(j))
    hop = stride * step
    a = first + j * step
    for k in range(4):
        if j < half_dim:
            b = a + partner
            theta = pos * f
            xa = x[a]
            xb = x[b]
            c = math.cos(theta)
            s = math.sin(theta)
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
        j += stride
        a += hop
        f *= stride_ratio


ENTRIES = [
    ("05.1", "pow_freq", rope_one_angle_pow),
    ("05.1", "exp_log_freq", rope_one_angle_explog),
    ("05.2", "freq_times_ratio", my_rope_strided_while),
    ("05.2", "angle_times_ratio", my_rope_strided_angle_step),
    ("05.3", "blocks_64", launch_strided_64),
    ("05.3", "fit_1024", launch_strided_fit),
    ("05.4", "while_slots", pair_sincos_heads_while),
    ("05.4", "four_slots_unrolled", pair_sincos_heads_unrolled),
]
