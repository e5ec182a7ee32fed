"""Notebook 03: two pairs (a quad) per thread."""
import ropelab  # noqa: F401

import math

import numba
import numpy as np
from numba import cuda, float32, int64, uint64


# ---------------------------------------------------------------- 03.1
@cuda.jit(fastmath=True)
def rope_two_pairs_plain(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = 2 * t
    if p < n_pairs:
        i = 2 * token * n_pairs + 4 * t
        pos = float32(positions[token])
        a0 = pos * inv_freq[p]
        a1 = pos * inv_freq[p + 1]
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        out[i] = x0 * c0 - x1 * s0
        out[i + 1] = x0 * s0 + x1 * c0
        out[i + 2] = x2 * c1 - x3 * s1
        out[i + 3] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def rope_two_pairs_loop(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if t + t >= n_pairs:
        return
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    first = token * (n_pairs + n_pairs) + (t << 2)
    for k in range(2):
        p = t + t + k
        j = first + 2 * k
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        a = x[j]
        b = x[j + 1]
        out[j] = a * c - b * s
        out[j + 1] = a * s + b * c


# ---------------------------------------------------------------- 03.2
@cuda.jit(fastmath=True)
def rope_quads_plain(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        c = math.cos(a0)
        s = math.sin(a0)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            a1 = pos * inv_freq[pair + uint64(1)]
            c = math.cos(a1)
            s = math.sin(a1)
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
            out[i + uint64(2)] = x2 * c - x3 * s
            out[i + uint64(3)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def rope_quads_count(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    # how many pairs this quad holds (1 or 2), then one loop over them
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    one = uint64(1)
    token = q // quads_per_row
    first_pair = (q - token * quads_per_row) << one
    count = n_pairs - first_pair
    if count > uint64(2):
        count = uint64(2)
    pos = float32(positions[token])
    base_i = (token * n_pairs + first_pair) << one
    k = uint64(0)
    while k < count:
        p = first_pair + k
        j = base_i + (k << one)
        theta = pos * inv_freq[p]
        xa = x[j]
        xb = x[j + one]
        c = math.cos(theta)
        s = math.sin(theta)
        out[j] = xa * c - xb * s
        out[j + one] = xa * s + xb * c
        k += one


# ---------------------------------------------------------------- 03.3
def launch_quads_128(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + 1) // 2
    total_quads = positions.size * quads_per_row
    threads = 128
    blocks = (total_quads + threads - 1) // threads
    rope_quads_plain[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                                      numba.uint64(quads_per_row), numba.int64(total_quads))


def launch_quads_fit(x, out, positions, inv_freq, n_pairs):
    qpr = -(-n_pairs // 2)
    total = int(positions.shape[0]) * qpr
    threads = min(512, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    rope_quads_count[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                      uint64(qpr), int64(total))


# ---------------------------------------------------------------- 03.4
@cuda.jit(fastmath=True)
def pack4_loads_first(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        has_second = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if has_second:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if has_second:
            j = i + uint64(2)
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def pack4_compute_then_store(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) * uint64(2)
    i = (token * n_pairs + pair) * uint64(2)
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
    a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
    x0 = x[i]
    x1 = x[i + uint64(1)]
    c0 = math.cos(a0)
    s0 = math.sin(a0)
    y0 = x0 * c0 - x1 * s0
    y1 = x0 * s0 + x1 * c0
    if pair + uint64(1) < n_pairs:
        a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        y2 = x2 * c1 - x3 * s1
        y3 = x2 * s1 + x3 * c1
        out[i] = y0
        out[i + uint64(1)] = y1
        out[i + uint64(2)] = y2
        out[i + uint64(3)] = y3
    else:
        out[i] = y0
        out[i + uint64(1)] = y1


ENTRIES = [
    ("03.1", "unrolled_four_floats", rope_two_pairs_plain),
    ("03.1", "two_step_loop", rope_two_pairs_loop),
    ("03.2", "second_pair_if", rope_quads_plain),
    ("03.2", "pair_count_loop", rope_quads_count),
    ("03.3", "blocks_128", launch_quads_128),
    ("03.3", "fit_512", launch_quads_fit),
    ("03.4", "loads_hoisted", pack4_loads_first),
    ("03.4", "results_then_stores", pack4_compute_then_store),
]
