"""Notebook 03: two pairs per thread, quads, their launch, loads before stores."""
import ropelab  # noqa: F401

import math

import numpy as np
from numba import cuda, float32, uint64, int64


# ---------------- 03.1 two pairs per thread
@cuda.jit(fastmath=True)
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = 2 * t
    if p < n_pairs:
        i = 2 * token * n_pairs + 4 * t
        pos = float32(positions[token])
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        a0 = pos * inv_freq[p]
        a1 = pos * inv_freq[p + 1]
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[i] = x0 * c0 - x1 * s0
        out[i + 1] = x0 * s0 + x1 * c0
        out[i + 2] = x2 * c1 - x3 * s1
        out[i + 3] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def rope_two_pairs_loop(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if t + t >= n_pairs:
        return
    pos = float32(positions[cuda.blockIdx.x])
    base_i = cuda.blockIdx.x * (n_pairs + n_pairs) + 4 * t
    for k in range(2):
        p = t + t + k
        i = base_i + k + k
        th = pos * inv_freq[p]
        c = math.cos(th)
        s = math.sin(th)
        a = x[i]
        b = x[i + 1]
        out[i] = a * c - b * s
        out[i + 1] = a * s + b * c


# ---------------- 03.2 quads on a flat grid
@cuda.jit(fastmath=True)
def rope_quads(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        i = uint64(2) * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        a = pos * inv_freq[pair]
        c = math.cos(a)
        s = math.sin(a)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            j = i + uint64(2)
            x2 = x[j]
            x3 = x[j + uint64(1)]
            a = pos * inv_freq[pair + uint64(1)]
            c = math.cos(a)
            s = math.sin(a)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def rope_quads_loop(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    first = (q - token * quads_per_row) * uint64(2)
    last = first + uint64(2)
    if last > n_pairs:
        last = n_pairs
    pos = float32(positions[token])
    row = token * (n_pairs + n_pairs)
    p = first
    while p < last:
        th = pos * inv_freq[p]
        s = math.sin(th)
        c = math.cos(th)
        e = row + p + p
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        p += uint64(1)


# ---------------- 03.3 launch
def launch_quads(x, out, positions, inv_freq, n_pairs):
    tokens = positions.size
    qpr = (n_pairs + 1) // 2
    total = tokens * qpr
    threads = 256
    blocks = (total + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                                int64(total))


def launch_quads_64(x, out, positions, inv_freq, n_pairs):
    qpr = math.ceil(n_pairs / 2)
    total = positions.shape[0] * qpr
    threads = 64
    blocks = math.ceil(total / threads)
    rope_quads_loop[blocks, threads](x, out, positions, inv_freq, np.uint64(n_pairs),
                                     np.uint64(qpr), total)


def launch_quads_fit(x, out, positions, inv_freq, n_pairs):
    qpr = -(-n_pairs // 2)
    total = positions.size * qpr
    threads = min(1024, 32 * ((total + 31) // 32))
    blocks = -(-total // threads)
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                                total)


# ---------------- 03.4 loads before stores
@cuda.jit(fastmath=True)
def my_rope_pack4_scalar(x, out, positions, n_pairs, quads_per_row, total_quads, base):
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
def my_rope_pack4_branches(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # two complete paths: full quad (4 loads, then 4 stores) or lone last pair
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = uint64(2) * (q - token * quads_per_row)
    i = uint64(2) * (token * n_pairs + pair)
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
    if pair + uint64(1) < n_pairs:
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0
        out[i + uint64(2)] = x2 * c1 - x3 * s1
        out[i + uint64(3)] = x2 * s1 + x3 * c1
    else:
        x0 = x[i]
        x1 = x[i + uint64(1)]
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0


@cuda.jit(fastmath=True)
def my_rope_pack4_ratio(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # one pow: the second pair's frequency is the first's times base**(-2/hidden)
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        second = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x0
        x3 = x1
        if second:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        f0 = math.pow(base, -float32(pair + pair) * inv_hidden)
        f1 = f0 * math.pow(base, float32(-2.0) * inv_hidden)
        a0 = pos * f0
        out[i] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[i + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if second:
            a1 = pos * f1
            out[i + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[i + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


ENTRIES = [
    ("03.1", "unrolled", rope_two_pairs),
    ("03.1", "inner_loop", rope_two_pairs_loop),
    ("03.2", "plain", rope_quads),
    ("03.2", "clamped_pair_loop", rope_quads_loop),
    ("03.3", "blocks256", launch_quads),
    ("03.3", "ceil64_numpy_types", launch_quads_64),
    ("03.3", "fit_upto1024", launch_quads_fit),
    ("03.4", "loads_hoisted", my_rope_pack4_scalar),
    ("03.4", "two_paths", my_rope_pack4_branches),
    ("03.4", "freq_ratio", my_rope_pack4_ratio),
]
