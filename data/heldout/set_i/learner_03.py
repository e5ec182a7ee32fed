import ropelab  # noqa: F401
import math
import numba
from numba import cuda, uint64, float32


@cuda.jit
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = 2 * t
    if p < n_pairs:
        pos = float32(positions[token])
        e = token * 2 * n_pairs + 4 * t
        a0 = pos * inv_freq[p]
        a1 = pos * inv_freq[p + 1]
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        x0 = x[e]
        x1 = x[e + 1]
        x2 = x[e + 2]
        x3 = x[e + 3]
        out[e] = x0 * c0 - x1 * s0
        out[e + 1] = x0 * s0 + x1 * c0
        out[e + 2] = x2 * c1 - x3 * s1
        out[e + 3] = x2 * s1 + x3 * c1


@cuda.jit
def rope_two_pairs_v2(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if 2 * t >= n_pairs:
        return
    pos = float32(positions[token])
    row = token * 2 * n_pairs
    for k in range(2):
        p = 2 * t + k
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        e = row + 2 * p
        a = x[e]
        b = x[e + 1]
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c


@cuda.jit
def rope_quads(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        j = q - token * quads_per_row
        p = uint64(2) * j
        pos = float32(positions[token])
        e = token * uint64(2) * n_pairs + uint64(2) * p
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        if p + uint64(1) < n_pairs:
            ang = pos * inv_freq[p + uint64(1)]
            c = math.cos(ang)
            s = math.sin(ang)
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
            out[e + uint64(2)] = x2 * c - x3 * s
            out[e + uint64(3)] = x2 * s + x3 * c


@cuda.jit
def rope_quads_v2(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    j = q - token * quads_per_row
    pos = float32(positions[token])
    row = token * (n_pairs + n_pairs)
    first = j + j
    last = first + uint64(2)
    if last > n_pairs:
        last = n_pairs
    for p in range(first, last):
        ang = pos * inv_freq[p]
        s = math.sin(ang)
        c = math.cos(ang)
        e = row + p + p
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c


def launch_quads(x, out, positions, inv_freq, n_pairs):
    tokens = positions.size
    qpr = (n_pairs + 1) // 2
    total = tokens * qpr
    threads = 64
    blocks = (total + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                                numba.uint64(qpr), numba.int64(total))


def launch_quads_v2(x, out, positions, inv_freq, n_pairs):
    tokens = positions.shape[0]
    qpr = math.ceil(n_pairs / 2)
    total = tokens * qpr
    threads = min(256, 32 * ((total + 31) // 32))
    blocks = math.ceil(total / threads)
    rope_quads_v2[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                                   numba.uint64(qpr), numba.int64(total))


@cuda.jit
def my_rope_pack4_scalar(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    j = q - token * quads_per_row
    p = j + j
    e = token * (n_pairs + n_pairs) + p + p
    two = p + uint64(1) < n_pairs
    pos = float32(positions[token])
    x0 = x[e]
    x1 = x[e + uint64(1)]
    x2 = float32(0.0)
    x3 = float32(0.0)
    if two:
        x2 = x[e + uint64(2)]
        x3 = x[e + uint64(3)]
    inv_np = float32(1.0) / float32(n_pairs)
    f0 = math.pow(base, -float32(p) * inv_np)
    a0 = pos * f0
    c0 = math.cos(a0)
    s0 = math.sin(a0)
    out[e] = x0 * c0 - x1 * s0
    out[e + uint64(1)] = x0 * s0 + x1 * c0
    if two:
        f1 = math.pow(base, -float32(p + uint64(1)) * inv_np)
        a1 = pos * f1
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[e + uint64(2)] = x2 * c1 - x3 * s1
        out[e + uint64(3)] = x2 * s1 + x3 * c1


ENTRIES = [
    ("03.1", "unrolled", rope_two_pairs),
    ("03.1", "loop2", rope_two_pairs_v2),
    ("03.2", "unrolled_tail_if", rope_quads),
    ("03.2", "range_loop", rope_quads_v2),
    ("03.3", "64_threads", launch_quads),
    ("03.3", "256_threads", launch_quads_v2),
    ("03.4", "loads_first", my_rope_pack4_scalar),
]
