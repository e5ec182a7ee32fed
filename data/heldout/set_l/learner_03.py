import ropelab  # noqa: F401
import math

import numba
from numba import cuda, float32, int64, uint64


# ---------------- 03.1 rope_two_pairs ----------------
@cuda.jit(fastmath=True)
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p0 = 2 * t
    if p0 < n_pairs:
        pos = float32(positions[token])
        i = 2 * token * n_pairs + 4 * t
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        a0 = pos * inv_freq[p0]
        a1 = pos * inv_freq[p0 + 1]
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
    # two iterations of a small loop, pairs interleaved load/compute/store
    t = cuda.threadIdx.x
    if 2 * t >= n_pairs:
        return
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    row = token * (n_pairs + n_pairs)
    for k in range(2):
        p = 2 * t + k
        a = row + 2 * p
        theta = pos * inv_freq[p]
        c = math.cos(theta)
        s = math.sin(theta)
        u = x[a]
        v = x[a + 1]
        out[a] = u * c - v * s
        out[a + 1] = u * s + v * c


@cuda.jit
def rope_two_pairs_local(x, out, positions, inv_freq, n_pairs):
    # the four floats staged in a local array; accurate sin/cos
    t = cuda.threadIdx.x
    token = cuda.blockIdx.x
    if t + t < n_pairs:
        buf = cuda.local.array(4, float32)
        i = (token * n_pairs + t + t) * 2
        for k in range(4):
            buf[k] = x[i + k]
        pos = float32(positions[token])
        for k in range(2):
            th = pos * inv_freq[t + t + k]
            c = math.cos(th)
            s = math.sin(th)
            out[i + 2 * k] = buf[2 * k] * c - buf[2 * k + 1] * s
            out[i + 2 * k + 1] = buf[2 * k] * s + buf[2 * k + 1] * c


# ---------------- 03.2 rope_quads ----------------
@cuda.jit(fastmath=True)
def rope_quads(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        th = pos * inv_freq[pair]
        c = math.cos(th)
        s = math.sin(th)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            th = pos * inv_freq[pair + uint64(1)]
            c = math.cos(th)
            s = math.sin(th)
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
            out[i + uint64(2)] = x2 * c - x3 * s
            out[i + uint64(3)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def rope_quads_count(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    # how many pairs this quad has, then one loop over them
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_quads:
        return
    q = uint64(idx)
    one = uint64(1)
    token = q // quads_per_row
    first = (q - token * quads_per_row) << one
    count = uint64(2)
    if first + one >= n_pairs:
        count = one
    pos = float32(positions[token])
    base_i = (token * n_pairs + first) << one
    k = uint64(0)
    while k < count:
        p = first + k
        a = base_i + (k << one)
        th = pos * inv_freq[p]
        c = math.cos(th)
        s = math.sin(th)
        x0 = x[a]
        x1 = x[a + one]
        out[a] = x0 * c - x1 * s
        out[a + one] = x0 * s + x1 * c
        k += one


# ---------------- 03.3 launch_quads ----------------
def launch_quads(x, out, positions, inv_freq, n_pairs):
    tokens = positions.size
    qpr = (n_pairs + 1) // 2
    total = tokens * qpr
    threads = 256
    blocks = (total + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                                int64(total))


def launch_quads_fit(x, out, positions, inv_freq, n_pairs):
    tokens = positions.shape[0]
    qpr = math.ceil(n_pairs / 2)
    total = tokens * qpr
    threads = min(1024, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    rope_quads_count[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                                      numba.uint64(qpr), numba.int64(total))


def launch_quads_64(x, out, positions, inv_freq, n_pairs):
    qpr = (n_pairs >> 1) + (n_pairs & 1)
    total = len(positions) * qpr
    blocks = -(-total // 64)
    rope_quads[blocks, 64](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                           int64(total))


# ---------------- 03.4 my_rope_pack4_scalar ----------------
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
        j = i + uint64(2)
        # all loads first
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if has_second:
            x2 = x[j]
            x3 = x[j + uint64(1)]
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if has_second:
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def my_rope_pack4_scalar_grouped(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # loads, then all the math for both pairs, then all stores; freq by exp/log
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    one = uint64(1)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) << one
    i = (token * n_pairs + pair) << one
    second = pair + one < n_pairs
    x0 = x[i]
    x1 = x[i + one]
    x2 = x0
    x3 = x1
    if second:
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
    pos = float32(positions[token])
    k = -math.log(base) / float32(n_pairs)
    f0 = math.exp(float32(pair) * k)
    f1 = math.exp(float32(pair + one) * k)
    c0 = math.cos(pos * f0)
    s0 = math.sin(pos * f0)
    c1 = math.cos(pos * f1)
    s1 = math.sin(pos * f1)
    y0 = x0 * c0 - x1 * s0
    y1 = x0 * s0 + x1 * c0
    y2 = x2 * c1 - x3 * s1
    y3 = x2 * s1 + x3 * c1
    out[i] = y0
    out[i + one] = y1
    if second:
        out[i + uint64(2)] = y2
        out[i + uint64(3)] = y3


@cuda.jit
def my_rope_pack4_scalar_local(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # local scratch of four floats, accurate math
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        npairs_here = 1
        if pair + uint64(1) < n_pairs:
            npairs_here = 2
        buf = cuda.local.array(4, float32)
        for k in range(2 * npairs_here):
            buf[k] = x[i + uint64(k)]
        pos = float32(positions[token])
        for k in range(npairs_here):
            p = pair + uint64(k)
            th = pos * math.pow(base, -float32(p) / float32(n_pairs))
            c = math.cos(th)
            s = math.sin(th)
            out[i + uint64(2 * k)] = buf[2 * k] * c - buf[2 * k + 1] * s
            out[i + uint64(2 * k + 1)] = buf[2 * k] * s + buf[2 * k + 1] * c


ENTRIES = [
    ("03.1", "four_loads_then_math", rope_two_pairs),
    ("03.1", "loop2_interleaved", rope_two_pairs_loop),
    ("03.1", "local_array_precise", rope_two_pairs_local),
    ("03.2", "if_second_pair", rope_quads),
    ("03.2", "count_while_shifts", rope_quads_count),
    ("03.3", "b256_floordiv", launch_quads),
    ("03.3", "fit_mathceil", launch_quads_fit),
    ("03.3", "b64_bitops", launch_quads_64),
    ("03.4", "cond_loads_first_pow", my_rope_pack4_scalar),
    ("03.4", "grouped_explog", my_rope_pack4_scalar_grouped),
    ("03.4", "local_scratch_precise", my_rope_pack4_scalar_local),
]
