"""Notebook 03 (pack4), steps 03.1 .. 03.4."""
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 03.1
@cuda.jit(fastmath=True)
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = 2 * t
    if p < n_pairs:
        pos = float32(positions[token])
        i = 2 * token * n_pairs + 4 * t
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
def rope_two_pairs_pair_by_pair(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if t + t >= n_pairs:
        return
    pos = float32(positions[token])
    base_i = token * (n_pairs + n_pairs) + 4 * t
    for k in range(2):
        p = t + t + k
        angle = pos * inv_freq[p]
        c = math.cos(angle)
        s = math.sin(angle)
        i = base_i + k + k
        a = x[i]
        b = x[i + 1]
        out[i] = a * c - b * s
        out[i + 1] = a * s + b * c


# ---------------------------------------------------------------- 03.2
@cuda.jit(fastmath=True)
def rope_quads(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            j = i + uint64(2)
            a1 = pos * inv_freq[pair + uint64(1)]
            x2 = x[j]
            x3 = x[j + uint64(1)]
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def rope_quads_loads_first(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    local = q - token * quads_per_row
    pair = local + local
    i = (token * n_pairs + pair) * uint64(2)
    two = pair + uint64(1) < n_pairs
    x0 = x[i]
    x1 = x[i + uint64(1)]
    x2 = float32(0.0)
    x3 = float32(0.0)
    if two:
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
    pos = float32(positions[token])
    a0 = pos * inv_freq[pair]
    c0 = math.cos(a0)
    s0 = math.sin(a0)
    out[i] = x0 * c0 - x1 * s0
    out[i + uint64(1)] = x0 * s0 + x1 * c0
    if two:
        a1 = pos * inv_freq[pair + uint64(1)]
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[i + uint64(2)] = x2 * c1 - x3 * s1
        out[i + uint64(3)] = x2 * s1 + x3 * c1


# ---------------------------------------------------------------- 03.3
def launch_quads(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + 1) // 2
    total_quads = positions.size * quads_per_row
    threads = 256
    blocks = (total_quads + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                                numba.uint64(quads_per_row), numba.int64(total_quads))


def launch_quads_64(x, out, positions, inv_freq, n_pairs):
    quads_per_row = -(-n_pairs // 2)
    total_quads = int(positions.shape[0]) * quads_per_row
    threads = 64
    blocks = -(-total_quads // threads)
    rope_quads_loads_first[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                            uint64(quads_per_row), numba.int64(total_quads))


def launch_quads_512(x, out, positions, inv_freq, n_pairs):
    quads_per_row = n_pairs // 2 + (n_pairs & 1)
    total_quads = positions.size * quads_per_row
    threads = min(512, ((total_quads + 31) // 32) * 32)
    blocks = (total_quads + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                uint64(quads_per_row), numba.int64(total_quads))


# ---------------------------------------------------------------- 03.4
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
        two = pair + uint64(1) < n_pairs
        j = i + uint64(2)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[j]
            x3 = x[j + uint64(1)]
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if two:
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def my_rope_pack4_scalar_compute_then_store(x, out, positions, n_pairs, quads_per_row,
                                            total_quads, base):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = uint64(2) * (q - token * quads_per_row)
    i = uint64(2) * (token * n_pairs + pair)
    two = pair + uint64(1) < n_pairs
    # all loads first
    pos = float32(positions[token])
    x0 = x[i]
    x1 = x[i + uint64(1)]
    x2 = float32(0.0)
    x3 = float32(0.0)
    if two:
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
    # both angles, both rotations
    inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
    a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
    a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
    c0 = math.cos(a0)
    s0 = math.sin(a0)
    c1 = math.cos(a1)
    s1 = math.sin(a1)
    y0 = x0 * c0 - x1 * s0
    y1 = x0 * s0 + x1 * c0
    y2 = x2 * c1 - x3 * s1
    y3 = x2 * s1 + x3 * c1
    out[i] = y0
    out[i + uint64(1)] = y1
    if two:
        out[i + uint64(2)] = y2
        out[i + uint64(3)] = y3


ENTRIES = [
    ("03.1", "all_loads_first", rope_two_pairs),
    ("03.1", "pair_loop", rope_two_pairs_pair_by_pair),
    ("03.2", "pair_then_pair", rope_quads),
    ("03.2", "loads_first", rope_quads_loads_first),
    ("03.3", "blocks_256", launch_quads),
    ("03.3", "blocks_64_loads_first", launch_quads_64),
    ("03.3", "blocks_512_capped", launch_quads_512),
    ("03.4", "loads_first_guarded", my_rope_pack4_scalar),
    ("03.4", "compute_all_then_store", my_rope_pack4_scalar_compute_then_store),
]
