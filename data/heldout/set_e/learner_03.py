"""Notebook 03 (pack4), steps 03.1 .. 03.4."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 03.1 rope_two_pairs
@cuda.jit(fastmath=True)
def two_pairs_plain(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if 2 * t < n_pairs:
        e = 2 * token * n_pairs + 4 * t
        pos = float32(positions[token])
        a0 = pos * inv_freq[2 * t]
        a1 = pos * inv_freq[2 * t + 1]
        x0 = x[e]
        x1 = x[e + 1]
        x2 = x[e + 2]
        x3 = x[e + 3]
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[e] = x0 * c0 - x1 * s0
        out[e + 1] = x0 * s0 + x1 * c0
        out[e + 2] = x2 * c1 - x3 * s1
        out[e + 3] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def two_pairs_loop(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if t + t >= n_pairs:
        return
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    for k in range(2):
        p = 2 * t + k
        e = 2 * (token * n_pairs + p)
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        u = x[e]
        v = x[e + 1]
        out[e] = u * c - v * s
        out[e + 1] = u * s + v * c


# ---------------------------------------------------------------- 03.2 rope_quads
@cuda.jit(fastmath=True)
def quads_plain(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        e = uint64(2) * (token * n_pairs + pair)
        a = pos * inv_freq[pair]
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            a = pos * inv_freq[pair + uint64(1)]
            c = math.cos(a)
            s = math.sin(a)
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
            out[e + uint64(2)] = x2 * c - x3 * s
            out[e + uint64(3)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def quads_loop(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    first = (q - token * quads_per_row) << uint64(1)
    last = first + uint64(2)
    if last > n_pairs:
        last = n_pairs
    pos = float32(positions[token])
    p = first
    while p < last:
        e = (token * n_pairs + p) << uint64(1)
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        u = x[e]
        v = x[e + uint64(1)]
        out[e] = u * c - v * s
        out[e + uint64(1)] = u * s + v * c
        p += uint64(1)


@cuda.jit(fastmath=True)
def quads_loads_first(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = (q - quads_per_row * token) + (q - quads_per_row * token)
        e = (token * n_pairs + pair) * uint64(2)
        has_second = pair + uint64(1) < n_pairs
        pos = float32(positions[token])
        f0 = inv_freq[pair]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        f1 = float32(0.0)
        x2 = float32(0.0)
        x3 = float32(0.0)
        if has_second:
            f1 = inv_freq[pair + uint64(1)]
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
        c0 = math.cos(pos * f0)
        s0 = math.sin(pos * f0)
        out[e] = x0 * c0 - x1 * s0
        out[e + uint64(1)] = x0 * s0 + x1 * c0
        if has_second:
            c1 = math.cos(pos * f1)
            s1 = math.sin(pos * f1)
            out[e + uint64(2)] = x2 * c1 - x3 * s1
            out[e + uint64(3)] = x2 * s1 + x3 * c1


# ---------------------------------------------------------------- 03.3 launch_quads
def launch_quads_256(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + 1) // 2
    total_quads = positions.size * quads_per_row
    threads = 256
    blocks = (total_quads + threads - 1) // threads
    quads_plain[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                                 numba.uint64(quads_per_row), total_quads)


def launch_quads_64(x, out, positions, inv_freq, n_pairs):
    qpr = -(-n_pairs // 2)
    tokens = positions.shape[0]
    total = int(tokens * qpr)
    blocks = math.ceil(total / 64)
    quads_loop[blocks, 64](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr), total)


def launch_quads_fit(x, out, positions, inv_freq, n_pairs):
    qpr = n_pairs // 2 + (n_pairs & 1)
    total = positions.size * qpr
    threads = min(1024, 32 * ((total + 31) // 32))
    blocks = -(-total // threads)
    quads_loads_first[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                       uint64(qpr), total)


# ---------------------------------------------------------------- 03.4 my_rope_pack4_scalar
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
        second = pair + uint64(1) < n_pairs
        # every load first
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
def pack4_compute_then_store(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # loads, then all the math, then all the stores; the second pair's results are only
    # stored when it exists
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) << uint64(1)
    i = (token * n_pairs + pair) << uint64(1)
    has2 = pair + uint64(1) < n_pairs
    pos = float32(positions[token])
    x0 = x[i]
    x1 = x[i + uint64(1)]
    x2 = float32(0.0)
    x3 = float32(0.0)
    if has2:
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
    k = -math.log(base) / float32(n_pairs)
    f0 = math.exp(k * float32(pair))
    f1 = math.exp(k * float32(pair + uint64(1)))
    c0 = math.cos(pos * f0)
    s0 = math.sin(pos * f0)
    c1 = math.cos(pos * f1)
    s1 = math.sin(pos * f1)
    y0 = x0 * c0 - x1 * s0
    y1 = x0 * s0 + x1 * c0
    y2 = x2 * c1 - x3 * s1
    y3 = x2 * s1 + x3 * c1
    out[i] = y0
    out[i + uint64(1)] = y1
    if has2:
        out[i + uint64(2)] = y2
        out[i + uint64(3)] = y3


@cuda.jit(fastmath=True)
def pack4_two_branches(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # a full quad and a lone pair take separate paths, each loading before it stores
    idx = cuda.grid(1)
    if idx < total_quads:
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



# ---------------------------------------------------------------- extra approaches
@cuda.jit(fastmath=True)
def two_pairs_interleaved(x, out, positions, inv_freq, n_pairs):
    # pair by pair: the first pair stored before the second is loaded
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = t + t
    if p < n_pairs:
        pos = float32(positions[token])
        e = (token * n_pairs + p) * 2
        a = x[e]
        b = x[e + 1]
        th = pos * inv_freq[p]
        out[e] = a * math.cos(th) - b * math.sin(th)
        out[e + 1] = a * math.sin(th) + b * math.cos(th)
        a = x[e + 2]
        b = x[e + 3]
        th = pos * inv_freq[p + 1]
        out[e + 2] = a * math.cos(th) - b * math.sin(th)
        out[e + 3] = a * math.sin(th) + b * math.cos(th)

ENTRIES = [
    ("03.1", "unrolled_loads_first", two_pairs_plain),
    ("03.1", "loop_two_early_return", two_pairs_loop),
    ("03.2", "if_second_pair", quads_plain),
    ("03.2", "clamped_while_loop", quads_loop),
    ("03.2", "loads_first_flag", quads_loads_first),
    ("03.3", "block256", launch_quads_256),
    ("03.3", "block64_ceil", launch_quads_64),
    ("03.3", "block_fit_1024", launch_quads_fit),
    ("03.4", "zero_default_loads", pack4_loads_first),
    ("03.4", "exp_log_store_last", pack4_compute_then_store),
    ("03.4", "two_branches", pack4_two_branches),
    ("03.1", "pair_by_pair_interleaved", two_pairs_interleaved),
]
