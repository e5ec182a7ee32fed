import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numba
import numpy as np
from numba import cuda, float32, int64, uint64


# ---- 03.1 rope_two_pairs ----
@cuda.jit
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = 2 * t
    if p < n_pairs:
        e = 2 * token * n_pairs + 4 * t
        pos = float32(positions[token])
        x0 = x[e]
        x1 = x[e + 1]
        x2 = x[e + 2]
        x3 = x[e + 3]
        a0 = pos * inv_freq[p]
        a1 = pos * inv_freq[p + 1]
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[e] = x0 * c0 - x1 * s0
        out[e + 1] = x0 * s0 + x1 * c0
        out[e + 2] = x2 * c1 - x3 * s1
        out[e + 3] = x2 * s1 + x3 * c1


@cuda.jit
def rope_two_pairs_loop(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if t * 2 >= n_pairs:
        return
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    base = token * n_pairs * 2 + t * 4
    for k in range(2):
        ang = pos * inv_freq[2 * t + k]
        c = math.cos(ang)
        s = math.sin(ang)
        a = x[base + 2 * k]
        b = x[base + 2 * k + 1]
        out[base + 2 * k] = a * c - b * s
        out[base + 2 * k + 1] = a * s + b * c


@cuda.jit
def rope_two_pairs_fma(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    tok = cuda.blockIdx.x
    if t + t < n_pairs:
        e = (tok * n_pairs + t + t) * 2
        f0 = inv_freq[t + t]
        f1 = inv_freq[t + t + 1]
        pos = float32(positions[tok])
        v0 = x[e]
        v1 = x[e + 1]
        v2 = x[e + 2]
        v3 = x[e + 3]
        c0 = math.cos(pos * f0)
        s0 = math.sin(pos * f0)
        out[e] = cuda.fma(v0, c0, -(v1 * s0))
        out[e + 1] = cuda.fma(v0, s0, v1 * c0)
        c1 = math.cos(pos * f1)
        s1 = math.sin(pos * f1)
        out[e + 2] = cuda.fma(v2, c1, -(v3 * s1))
        out[e + 3] = cuda.fma(v2, s1, v3 * c1)


# ---- 03.2 rope_quads ----
@cuda.jit
def rope_quads(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        e = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        a = pos * inv_freq[pair]
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            a2 = pos * inv_freq[pair + uint64(1)]
            c2 = math.cos(a2)
            s2 = math.sin(a2)
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
            out[e + uint64(2)] = x2 * c2 - x3 * s2
            out[e + uint64(3)] = x2 * s2 + x3 * c2


@cuda.jit
def rope_quads_loadsfirst(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_quads:
        return
    q = uint64(idx)
    one = uint64(1)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) << one
    e = (token * n_pairs + pair) << one
    two = pair + one < n_pairs
    pos = float32(positions[token])
    x0 = x[e]
    x1 = x[e + one]
    f0 = inv_freq[pair]
    x2 = float32(0.0)
    x3 = float32(0.0)
    f1 = float32(0.0)
    if two:
        x2 = x[e + uint64(2)]
        x3 = x[e + uint64(3)]
        f1 = inv_freq[pair + one]
    c = math.cos(pos * f0)
    s = math.sin(pos * f0)
    out[e] = x0 * c - x1 * s
    out[e + one] = x0 * s + x1 * c
    if two:
        c = math.cos(pos * f1)
        s = math.sin(pos * f1)
        out[e + uint64(2)] = x2 * c - x3 * s
        out[e + uint64(3)] = x2 * s + x3 * c


# ---- 03.3 launch_quads ----
def launch_quads(x, out, positions, inv_freq, n_pairs):
    qpr = (n_pairs + 1) // 2
    total = positions.size * qpr
    threads = 64
    blocks = (total + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                                numba.uint64(qpr), numba.int64(total))


def launch_quads_big(x, out, positions, inv_freq, n_pairs):
    qpr = -(-n_pairs // 2)
    total = int(positions.size) * qpr
    threads = 768
    if total < threads:
        threads = 32 * ((total + 31) // 32)
    blocks = -(-total // threads)
    rope_quads_loadsfirst[blocks, threads](x, out, positions, inv_freq, np.uint64(n_pairs),
                                           np.uint64(qpr), np.int64(total))


# ---- 03.4 my_rope_pack4_scalar ----
@cuda.jit
def my_rope_pack4_scalar(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        has2 = pair + uint64(1) < n_pairs
        pos = float32(positions[token])
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if has2:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        hid = float32(n_pairs + n_pairs)
        f0 = float32(1.0) / math.pow(base, float32(pair + pair) / hid)
        a0 = pos * f0
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0
        if has2:
            f1 = float32(1.0) / math.pow(base, float32(pair + pair + uint64(2)) / hid)
            a1 = pos * f1
            c1 = math.cos(a1)
            s1 = math.sin(a1)
            out[i + uint64(2)] = x2 * c1 - x3 * s1
            out[i + uint64(3)] = x2 * s1 + x3 * c1


@cuda.jit
def my_rope_pack4_scalar_ret(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) * uint64(2)
    i = (token * n_pairs + pair) * uint64(2)
    pos = float32(positions[token])
    step = float32(-2.0) / float32(n_pairs * uint64(2))
    if pair + uint64(1) < n_pairs:
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
        f0 = math.pow(base, step * float32(pair))
        f1 = math.pow(base, step * float32(pair + uint64(1)))
        c0 = math.cos(pos * f0)
        s0 = math.sin(pos * f0)
        c1 = math.cos(pos * f1)
        s1 = math.sin(pos * f1)
        out[i] = cuda.fma(x0, c0, -x1 * s0)
        out[i + uint64(1)] = cuda.fma(x0, s0, x1 * c0)
        out[i + uint64(2)] = cuda.fma(x2, c1, -x3 * s1)
        out[i + uint64(3)] = cuda.fma(x2, s1, x3 * c1)
    else:
        x0 = x[i]
        x1 = x[i + uint64(1)]
        f0 = math.pow(base, step * float32(pair))
        c0 = math.cos(pos * f0)
        s0 = math.sin(pos * f0)
        out[i] = cuda.fma(x0, c0, -x1 * s0)
        out[i + uint64(1)] = cuda.fma(x0, s0, x1 * c0)


ENTRIES = [
    ("03.1", "unrolled_loads_first", rope_two_pairs),
    ("03.1", "early_return_k_loop", rope_two_pairs_loop),
    ("03.1", "fma_freqs_first", rope_two_pairs_fma),
    ("03.2", "interleaved_second_pair", rope_quads),
    ("03.2", "loads_first_shift_index", rope_quads_loadsfirst),
    ("03.3", "block64", launch_quads),
    ("03.3", "block768_loads_first", launch_quads_big),
    ("03.4", "guard_predicated_loads", my_rope_pack4_scalar),
    ("03.4", "early_return_two_paths_fma", my_rope_pack4_scalar_ret),
]
