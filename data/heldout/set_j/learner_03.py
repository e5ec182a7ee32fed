import ropelab
import math
import numba
from numba import cuda, float32, uint64, int64


# 03.1 rope_two_pairs
@cuda.jit(fastmath=True)
def two_pairs_a(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p0 = 2 * t
    if p0 < n_pairs:
        pos = float32(positions[token])
        e = token * 2 * n_pairs + 4 * t
        a0 = x[e]
        b0 = x[e + 1]
        a1 = x[e + 2]
        b1 = x[e + 3]
        th0 = pos * inv_freq[p0]
        th1 = pos * inv_freq[p0 + 1]
        c0 = math.cos(th0)
        s0 = math.sin(th0)
        c1 = math.cos(th1)
        s1 = math.sin(th1)
        out[e] = a0 * c0 - b0 * s0
        out[e + 1] = a0 * s0 + b0 * c0
        out[e + 2] = a1 * c1 - b1 * s1
        out[e + 3] = a1 * s1 + b1 * c1


@cuda.jit(fastmath=True)
def two_pairs_loop(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if 2 * t >= n_pairs:
        return
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    row = token * 2 * n_pairs
    for k in range(2):
        p = 2 * t + k
        th = pos * inv_freq[p]
        c = math.cos(th)
        s = math.sin(th)
        a = x[row + 2 * p]
        b = x[row + 2 * p + 1]
        out[row + 2 * p] = a * c - b * s
        out[row + 2 * p + 1] = a * s + b * c


# 03.2 rope_quads
@cuda.jit(fastmath=True)
def quads_a(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    p0 = (q - token * quads_per_row) * uint64(2)
    pos = float32(positions[token])
    row = token * n_pairs * uint64(2)
    e = row + p0 * uint64(2)
    th = pos * inv_freq[p0]
    c = math.cos(th)
    s = math.sin(th)
    a = x[e]
    b = x[e + uint64(1)]
    out[e] = a * c - b * s
    out[e + uint64(1)] = a * s + b * c
    p1 = p0 + uint64(1)
    if p1 < n_pairs:
        th = pos * inv_freq[p1]
        c = math.cos(th)
        s = math.sin(th)
        a = x[e + uint64(2)]
        b = x[e + uint64(3)]
        out[e + uint64(2)] = a * c - b * s
        out[e + uint64(3)] = a * s + b * c


@cuda.jit(fastmath=True)
def quads_b(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if q < uint64(total_quads):
        token = q // quads_per_row
        local = q - quads_per_row * token
        pair = local + local
        pos = float32(positions[token])
        e = (token * n_pairs + pair) * uint64(2)
        two = pair + uint64(1) < n_pairs
        a0 = x[e]
        b0 = x[e + uint64(1)]
        a1 = float32(0.0)
        b1 = float32(0.0)
        if two:
            a1 = x[e + uint64(2)]
            b1 = x[e + uint64(3)]
        t0 = pos * inv_freq[pair]
        c0 = math.cos(t0)
        s0 = math.sin(t0)
        out[e] = cuda.fma(a0, c0, -b0 * s0)
        out[e + uint64(1)] = cuda.fma(a0, s0, b0 * c0)
        if two:
            t1 = pos * inv_freq[pair + uint64(1)]
            c1 = math.cos(t1)
            s1 = math.sin(t1)
            out[e + uint64(2)] = cuda.fma(a1, c1, -b1 * s1)
            out[e + uint64(3)] = cuda.fma(a1, s1, b1 * c1)


# 03.3 launch_quads
def launch_quads_a(x, out, positions, inv_freq, n_pairs):
    tokens = positions.size
    qpr = (n_pairs + 1) // 2
    total = tokens * qpr
    threads = 64
    blocks = (total + threads - 1) // threads
    quads_a[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                             numba.uint64(qpr), numba.int64(total))


def launch_quads_b(x, out, positions, inv_freq, n_pairs):
    qpr = math.ceil(n_pairs / 2)
    total = positions.shape[0] * qpr
    threads = min(256, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    quads_b[blocks, threads](x, out, positions, inv_freq, numba.uint64(n_pairs),
                             numba.uint64(qpr), numba.int64(total))


# 03.4 my_rope_pack4_scalar
@cuda.jit(fastmath=True)
def pack4_a(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    p0 = (q - token * quads_per_row) * uint64(2)
    p1 = p0 + uint64(1)
    e = (token * n_pairs + p0) * uint64(2)
    has2 = p1 < n_pairs
    a0 = x[e]
    b0 = x[e + uint64(1)]
    a1 = float32(0.0)
    b1 = float32(0.0)
    if has2:
        a1 = x[e + uint64(2)]
        b1 = x[e + uint64(3)]
    pos = float32(positions[token])
    inv_n = float32(1.0) / float32(n_pairs)
    f0 = math.pow(base, -float32(p0) * inv_n)
    t0 = pos * f0
    out[e] = a0 * math.cos(t0) - b0 * math.sin(t0)
    out[e + uint64(1)] = a0 * math.sin(t0) + b0 * math.cos(t0)
    if has2:
        f1 = math.pow(base, -float32(p1) * inv_n)
        t1 = pos * f1
        c1 = math.cos(t1)
        s1 = math.sin(t1)
        out[e + uint64(2)] = a1 * c1 - b1 * s1
        out[e + uint64(3)] = a1 * s1 + b1 * c1


@cuda.jit(fastmath=True)
def pack4_b(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    q = uint64(cuda.grid(1))
    if q < uint64(total_quads):
        token = q // quads_per_row
        p0 = uint64(2) * (q - quads_per_row * token)
        e = uint64(2) * (token * n_pairs + p0)
        pos = float32(positions[token])
        hidden = float32(uint64(2) * n_pairs)
        last = p0 + uint64(1) >= n_pairs
        a0 = x[e]
        b0 = x[e + uint64(1)]
        if last:
            f0 = float32(1.0) / base ** (float32(2.0) * float32(p0) / hidden)
            t0 = pos * f0
            c0 = math.cos(t0)
            s0 = math.sin(t0)
            out[e] = a0 * c0 - b0 * s0
            out[e + uint64(1)] = a0 * s0 + b0 * c0
        else:
            a1 = x[e + uint64(2)]
            b1 = x[e + uint64(3)]
            f0 = float32(1.0) / base ** (float32(2.0) * float32(p0) / hidden)
            f1 = float32(1.0) / base ** (float32(2.0) * float32(p0 + uint64(1)) / hidden)
            t0 = pos * f0
            t1 = pos * f1
            c0 = math.cos(t0)
            s0 = math.sin(t0)
            c1 = math.cos(t1)
            s1 = math.sin(t1)
            out[e] = a0 * c0 - b0 * s0
            out[e + uint64(1)] = a0 * s0 + b0 * c0
            out[e + uint64(2)] = a1 * c1 - b1 * s1
            out[e + uint64(3)] = a1 * s1 + b1 * c1


# 03.2 third version: grid-stride over quads
@cuda.jit(fastmath=True)
def quads_stride(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    stop = uint64(total_quads)
    while q < stop:
        token = q // quads_per_row
        p0 = (q - token * quads_per_row) * uint64(2)
        pos = float32(positions[token])
        e = (token * n_pairs + p0) * uint64(2)
        for k in range(2):
            p = p0 + uint64(k)
            if p < n_pairs:
                th = pos * inv_freq[p]
                c = math.cos(th)
                s = math.sin(th)
                ee = e + uint64(2 * k)
                a = x[ee]
                b = x[ee + uint64(1)]
                out[ee] = a * c - b * s
                out[ee + uint64(1)] = a * s + b * c
        q += step

ENTRIES = [
    ("03.1", "unrolled_loads_first", two_pairs_a),
    ("03.1", "loop_two_early_return", two_pairs_loop),
    ("03.2", "grid1_store_then_second", quads_a),
    ("03.2", "manual_uint_loads_first_fma", quads_b),
    ("03.3", "block64", launch_quads_a),
    ("03.3", "block256_fit", launch_quads_b),
    ("03.4", "cond_loads_then_stores", pack4_a),
    ("03.4", "branch_last_vs_full", pack4_b),
    ("03.2", "grid_stride_while_loop2", quads_stride),
]
