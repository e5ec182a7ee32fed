import ropelab  # noqa: F401
import math
import numba
import numpy as np
from numba import cuda, uint64, float32


@cuda.jit
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
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit
def rope_one_angle_v2(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    angle = float32(positions[token]) * (base ** (exponent_step * float32(pair)))
    s = math.sin(angle)
    c = math.cos(angle)
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    out[e] = a * c - b * s
    out[e + uint64(1)] = a * s + b * c


@cuda.jit
def my_rope_strided(x, out, positions, n_pairs, stride, total_threads, base,
                    exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        row = i // stride
        j = i - row * stride
        pos = float32(positions[row])
        f = math.pow(base, exponent_step * float32(j))
        rb = row * uint64(2) * n_pairs
        p = j
        while p < n_pairs:
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            e = rb + uint64(2) * p
            x0 = x[e]
            x1 = x[e + uint64(1)]
            out[e] = x0 * c - x1 * s
            out[e + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            p += stride


@cuda.jit
def my_rope_strided_v2(x, out, positions, n_pairs, stride, total_threads, base,
                       exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    row = i // stride
    j = i - row * stride
    pos = float32(positions[row])
    f = base ** (exponent_step * float32(j))
    rb = row * (n_pairs + n_pairs)
    for k in range(4):
        p = j + uint64(k) * stride
        if p < n_pairs:
            angle = pos * f
            s = math.sin(angle)
            c = math.cos(angle)
            e = rb + p + p
            a = x[e]
            b = x[e + uint64(1)]
            out[e] = a * c - b * s
            out[e + uint64(1)] = a * s + b * c
        f *= stride_ratio


def launch_strided(x, out, positions, tokens, hidden, base=10000.0):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total = tokens * stride
    exponent_step = np.float32(-2.0 / hidden)
    ratio = np.float32(base ** (float(exponent_step) * stride))
    threads = 64
    blocks = (total + threads - 1) // threads
    my_rope_strided[blocks, threads](
        x, out, positions, numba.uint64(n_pairs), numba.uint64(stride), numba.int64(total),
        numba.float32(base), numba.float32(exponent_step), numba.float32(ratio))


def launch_strided_v2(x, out, positions, tokens, hidden, base=10000.0):
    n_pairs = hidden // 2
    stride = math.ceil(n_pairs / 4)
    total = tokens * stride
    es = -2.0 / hidden
    ratio = base ** (es * stride)
    threads = min(256, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    my_rope_strided_v2[blocks, threads](
        x, out, positions, numba.uint64(n_pairs), numba.uint64(stride), numba.int64(total),
        numba.float32(base), numba.float32(es), numba.float32(ratio))


@cuda.jit
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
        p = j
        while p < half_dim:
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            a = first + p * step
            b = a + partner
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f *= stride_ratio
            p += stride


ENTRIES = [
    ("05.1", "math_pow", rope_one_angle),
    ("05.1", "pow_operator", rope_one_angle_v2),
    ("05.2", "while_stride", my_rope_strided),
    ("05.2", "unrolled4_guard", my_rope_strided_v2),
    ("05.3", "64_threads", launch_strided),
    ("05.3", "256_threads", launch_strided_v2),
    ("05.4", "while_stride", rope_pair_sincos_heads),
]
