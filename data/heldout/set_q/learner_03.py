"""Notebook 03 steps: two pairs (a quad) per thread."""
import math

import numpy as np
from numba import cuda, float32, int64, uint64


# ---------------- 03.1 rope_two_pairs
@cuda.jit(fastmath=True)
def rope_two_pairs_a(x, out, positions, inv_freq, n_pairs):
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


@cuda.jit
def rope_two_pairs_b(x, out, positions, inv_freq, n_pairs):
    # a two-trip inner loop over the thread's pairs, no fastmath, early return
    t = int64(cuda.threadIdx.x)
    if t + t >= n_pairs:
        return
    token = int64(cuda.blockIdx.x)
    pos = float32(positions[token])
    first = token * n_pairs + t + t
    for k in range(2):
        pair = t + t + k
        e = 2 * (first + k)
        theta = pos * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        a = x[e]
        b = x[e + 1]
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c


# ---------------- 03.2 rope_quads
@cuda.jit(fastmath=True)
def rope_quads_a(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
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
            j = i + uint64(2)
            a1 = pos * inv_freq[pair + uint64(1)]
            c = math.cos(a1)
            s = math.sin(a1)
            x2 = x[j]
            x3 = x[j + uint64(1)]
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit("void(float32[::1], float32[::1], int32[::1], float32[::1], uint64, uint64, int64)")
def rope_quads_b(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    # unsigned guard, the pair count of this quad as a loop bound, no fastmath
    q = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if q >= uint64(total_quads):
        return
    token = q // quads_per_row
    local_q = q - quads_per_row * token
    first = local_q + local_q
    last = first + uint64(2)
    if last > n_pairs:
        last = n_pairs
    pos = float32(positions[token])
    row = token * n_pairs
    p = first
    while p < last:
        ang = pos * inv_freq[p]
        e = (row + p) * uint64(2)
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * math.cos(ang) - b * math.sin(ang)
        out[e + uint64(1)] = a * math.sin(ang) + b * math.cos(ang)
        p += uint64(1)


@cuda.jit(fastmath=True)
def rope_quads_c(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    # grid-stride over unsigned quads, loads of both pairs before any store
    q = uint64(cuda.grid(1))
    total = uint64(total_quads)
    stride = uint64(cuda.gridsize(1))
    one = uint64(1)
    while q < total:
        token = q // quads_per_row
        pair = (q - token * quads_per_row) * uint64(2)
        i = (token * n_pairs + pair) * uint64(2)
        has2 = pair + one < n_pairs
        x0 = x[i]
        x1 = x[i + one]
        x2 = float32(0)
        x3 = float32(0)
        if has2:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        out[i] = cuda.fma(x0, math.cos(a0), -x1 * math.sin(a0))
        out[i + one] = cuda.fma(x0, math.sin(a0), x1 * math.cos(a0))
        if has2:
            a1 = pos * inv_freq[pair + one]
            out[i + uint64(2)] = cuda.fma(x2, math.cos(a1), -x3 * math.sin(a1))
            out[i + uint64(3)] = cuda.fma(x2, math.sin(a1), x3 * math.cos(a1))
        q += stride


# ---------------- 03.3 launch_quads
def launch_quads_a(x, out, positions, inv_freq, n_pairs):
    qpr = (n_pairs + 1) // 2
    total = positions.size * qpr
    threads = 256
    blocks = (total + threads - 1) // threads
    rope_quads_a[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                                  int64(total))


def launch_quads_b(x, out, positions, inv_freq, n_pairs):
    qpr = np.uint64(math.ceil(n_pairs / 2))
    total = np.int64(positions.shape[0]) * np.int64(qpr)
    threads = 64
    blocks = int(-(-int(total) // threads))
    rope_quads_b[blocks, threads](x, out, positions, inv_freq, np.uint64(n_pairs), qpr, total)


def launch_quads_c(x, out, positions, inv_freq, n_pairs):
    qpr = -(-n_pairs // 2)
    total = len(positions) * qpr
    threads = min(1024, 32 * ((total + 31) // 32))
    blocks = (total + threads - 1) // threads
    rope_quads_c[(blocks,), (threads,)](x, out, positions, inv_freq, uint64(n_pairs),
                                        uint64(qpr), int64(total))


# ---------------- 03.4 my_rope_pack4_scalar
@cuda.jit(fastmath=True)
def my_rope_pack4_scalar_a(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        second = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if second:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if second:
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[i + uint64(2)] = x2 * c - x3 * s
            out[i + uint64(3)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def my_rope_pack4_scalar_b(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # two code paths: a full quad (four loads, four stores) and the lone tail pair;
    # frequencies by exp/log
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) * uint64(2)
    i = (token * n_pairs + pair) * uint64(2)
    pos = float32(positions[token])
    k = -math.log(base) / float32(n_pairs)
    if pair + uint64(1) < n_pairs:
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
        a0 = pos * math.exp(k * float32(pair))
        a1 = pos * math.exp(k * float32(pair + uint64(1)))
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
        a0 = pos * math.exp(k * float32(pair))
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0


# ---------------- third entries
@cuda.jit(fastmath=True)
def rope_two_pairs_c(x, out, positions, inv_freq, n_pairs):
    # unsigned math, second pair computed and stored before the first
    t = uint64(cuda.threadIdx.x)
    np_ = uint64(n_pairs)
    p0 = t + t
    if p0 >= np_:
        return
    token = uint64(cuda.blockIdx.x)
    base_i = token * np_ * uint64(2) + t * uint64(4)
    pos = float32(positions[token])
    a1 = pos * inv_freq[p0 + uint64(1)]
    a0 = pos * inv_freq[p0]
    y0 = x[base_i + uint64(2)]
    y1 = x[base_i + uint64(3)]
    out[base_i + uint64(2)] = y0 * math.cos(a1) - y1 * math.sin(a1)
    out[base_i + uint64(3)] = y0 * math.sin(a1) + y1 * math.cos(a1)
    z0 = x[base_i]
    z1 = x[base_i + uint64(1)]
    out[base_i] = z0 * math.cos(a0) - z1 * math.sin(a0)
    out[base_i + uint64(1)] = z0 * math.sin(a0) + z1 * math.cos(a0)


@cuda.jit(fastmath=True)
def my_rope_pack4_scalar_c(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # clamped second-pair index: always four loads in bounds, second store only when real
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        has2 = pair + uint64(1) < n_pairs
        j = i + uint64(2) if has2 else i
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[j]
        x3 = x[j + uint64(1)]
        pos = float32(positions[token])
        neg_inv_np = float32(-1.0) / float32(n_pairs)
        f0 = math.pow(base, float32(pair) * neg_inv_np)
        f1 = math.pow(base, float32(pair + uint64(1)) * neg_inv_np)
        a0 = pos * f0
        a1 = pos * f1
        out[i] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[i + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if has2:
            out[j] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[j + uint64(1)] = x2 * math.sin(a1) + x3 * math.cos(a1)


ENTRIES = [
    ("03.1", "four-loads-then-math", rope_two_pairs_a),
    ("03.1", "two-trip-loop-nofastmath", rope_two_pairs_b),
    ("03.1", "uint64-second-pair-first", rope_two_pairs_c),
    ("03.2", "starter-order-if-second", rope_quads_a),
    ("03.2", "eager-sig-bounded-while", rope_quads_b),
    ("03.2", "grid-stride-loads-first-fma", rope_quads_c),
    ("03.3", "256-python-ints", launch_quads_a),
    ("03.3", "64-numpy-scalars", launch_quads_b),
    ("03.3", "warp-rounded-cap1024-tuple", launch_quads_c),
    ("03.4", "conditional-loads-zero-init", my_rope_pack4_scalar_a),
    ("03.4", "full-quad-vs-tail-paths-exp-log", my_rope_pack4_scalar_b),
    ("03.4", "clamped-index-four-loads-pow-neg", my_rope_pack4_scalar_c),
]
