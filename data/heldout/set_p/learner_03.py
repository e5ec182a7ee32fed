import math
from numba import cuda, float32


@cuda.jit
def rope_two_pairs_a(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if 2 * t < n_pairs:
        pos = float32(positions[token])
        e = token * 2 * n_pairs + 4 * t
        a0 = pos * inv_freq[2 * t]
        a1 = pos * inv_freq[2 * t + 1]
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
def rope_two_pairs_b(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if t + t >= n_pairs:
        return
    row = cuda.blockIdx.x * n_pairs * 2
    pos = float32(positions[cuda.blockIdx.x])
    for k in range(2):
        p = 2 * t + k
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        e = row + 2 * p
        a = x[e]
        b = x[e + 1]
        out[e] = cuda.fma(a, c, -b * s)
        out[e + 1] = cuda.fma(a, s, b * c)


ENTRIES = [
    ("03.1", "unrolled-four-loads", rope_two_pairs_a),
    ("03.1", "loop-two-pairs-fma", rope_two_pairs_b),
]

from numba import uint64


@cuda.jit
def rope_quads_a(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = cuda.grid(1)
    if q < total_quads:
        u = uint64(q)
        token = u // quads_per_row
        j = u - token * quads_per_row
        p = j * uint64(2)
        pos = float32(positions[token])
        e = (token * n_pairs + p) * uint64(2)
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        if p + uint64(1) < n_pairs:
            ang2 = pos * inv_freq[p + uint64(1)]
            c2 = math.cos(ang2)
            s2 = math.sin(ang2)
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
            out[e + uint64(2)] = x2 * c2 - x3 * s2
            out[e + uint64(3)] = x2 * s2 + x3 * c2


@cuda.jit
def rope_quads_b(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if q >= total_quads:
        return
    u = uint64(q)
    token = u // quads_per_row
    p = (u - quads_per_row * token) << uint64(1)
    last = p + uint64(2)
    if last > n_pairs:
        last = n_pairs
    pos = float32(positions[token])
    row = token * n_pairs
    while p < last:
        e = (row + p) << uint64(1)
        a = x[e]
        b = x[e + uint64(1)]
        ang = inv_freq[p] * pos
        s = math.sin(ang)
        c = math.cos(ang)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        p += uint64(1)


ENTRIES += [
    ("03.2", "two-pair-branch", rope_quads_a),
    ("03.2", "while-to-last", rope_quads_b),
]

import numba


def launch_quads_a(x, out, positions, inv_freq, n_pairs):
    qpr = (n_pairs + 1) // 2
    total = positions.size * qpr
    tpb = 64
    blocks = (total + tpb - 1) // tpb
    rope_quads_a[blocks, tpb](x, out, positions, inv_freq, numba.uint64(n_pairs),
                              numba.uint64(qpr), numba.int64(total))


def launch_quads_b(x, out, positions, inv_freq, n_pairs):
    qpr = math.ceil(n_pairs / 2)
    total = positions.shape[0] * qpr
    tpb = min(512, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / tpb)
    rope_quads_b[blocks, tpb](x, out, positions, inv_freq, numba.uint64(n_pairs),
                              numba.uint64(qpr), numba.int64(total))


ENTRIES += [
    ("03.3", "tpb64", launch_quads_a),
    ("03.3", "tpb-up-to-512", launch_quads_b),
]


@cuda.jit
def pack4_a(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    q = cuda.grid(1)
    if q < total_quads:
        u = uint64(q)
        token = u // quads_per_row
        p = (u - token * quads_per_row) * uint64(2)
        two = p + uint64(1) < n_pairs
        e = (token * n_pairs + p) * uint64(2)
        pos = float32(positions[token])
        x0 = x[e]
        x1 = x[e + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
        inv_n = float32(1.0) / float32(n_pairs)
        f0 = base ** (-float32(p) * inv_n)
        a0 = pos * f0
        out[e] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[e + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if two:
            f1 = base ** (-float32(p + uint64(1)) * inv_n)
            a1 = pos * f1
            out[e + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[e + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


ENTRIES += [
    ("03.4", "loads-first-pow", pack4_a),
]


@cuda.jit
def pack4_b(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    q = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if q >= total_quads:
        return
    u = uint64(q)
    token = u // quads_per_row
    p = (u - quads_per_row * token) << uint64(1)
    pos = float32(positions[token])
    e = (token * n_pairs + p) << uint64(1)
    has2 = p + uint64(1) < n_pairs
    # every global load first
    a = x[e]
    b = x[e + uint64(1)]
    c_ = float32(0.0)
    d = float32(0.0)
    if has2:
        c_ = x[e + uint64(2)]
        d = x[e + uint64(3)]
    lb = math.log(base)
    hidden = float32(n_pairs + n_pairs)
    ang0 = pos * math.exp(float32(-2.0) * float32(p) / hidden * lb)
    ang1 = pos * math.exp(float32(-2.0) * float32(p + uint64(1)) / hidden * lb)
    s0 = math.sin(ang0)
    k0 = math.cos(ang0)
    s1 = math.sin(ang1)
    k1 = math.cos(ang1)
    out[e] = a * k0 - b * s0
    out[e + uint64(1)] = a * s0 + b * k0
    if has2:
        out[e + uint64(2)] = c_ * k1 - d * s1
        out[e + uint64(3)] = c_ * s1 + d * k1


ENTRIES += [
    ("03.4", "angles-up-front-exp", pack4_b),
]
