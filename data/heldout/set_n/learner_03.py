import math
from numba import cuda, float32, uint64, int64


@cuda.jit(fastmath=True)
def two_pairs_a(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p0 = 2 * t
    if p0 < n_pairs:
        pos = float32(positions[token])
        e = token * 2 * n_pairs + 2 * p0
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


@cuda.jit
def two_pairs_b(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    if 2 * t >= n_pairs:
        return
    tok = cuda.blockIdx.x
    pos = float32(positions[tok])
    base = tok * 2 * n_pairs + 4 * t
    for k in range(2):
        p = 2 * t + k
        th = pos * inv_freq[p]
        c = math.cos(th)
        s = math.sin(th)
        e = base + 2 * k
        a = x[e]
        b = x[e + 1]
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def quads_a(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = cuda.grid(1)
    if q < total_quads:
        u = uint64(q)
        token = u // quads_per_row
        j = u - token * quads_per_row
        p = uint64(2) * j
        pos = float32(positions[token])
        e = token * uint64(2) * n_pairs + uint64(2) * p
        th = pos * inv_freq[p]
        c = math.cos(th)
        s = math.sin(th)
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        if p + uint64(1) < n_pairs:
            th = pos * inv_freq[p + uint64(1)]
            c = math.cos(th)
            s = math.sin(th)
            a = x[e + uint64(2)]
            b = x[e + uint64(3)]
            out[e + uint64(2)] = a * c - b * s
            out[e + uint64(3)] = a * s + b * c


@cuda.jit
def quads_b(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if q >= total_quads:
        return
    u = uint64(q)
    tok = u // quads_per_row
    first = (u - quads_per_row * tok) * uint64(2)
    last = first + uint64(2)
    if last > n_pairs:
        last = n_pairs
    pos = float32(positions[tok])
    row = tok * (n_pairs + n_pairs)
    p = first
    while p < last:
        th = inv_freq[p] * pos
        e = row + p + p
        lo = x[e]
        hi = x[e + uint64(1)]
        out[e] = lo * math.cos(th) - hi * math.sin(th)
        out[e + uint64(1)] = hi * math.cos(th) + lo * math.sin(th)
        p += uint64(1)


def launch_quads_a(x, out, positions, inv_freq, n_pairs):
    tokens = positions.size
    qpr = (n_pairs + 1) // 2
    total = tokens * qpr
    threads = 256
    blocks = (total + threads - 1) // threads
    quads_a[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                             int64(total))


def launch_quads_b(x, out, positions, inv_freq, n_pairs):
    qpr = -(-n_pairs // 2)
    total = positions.shape[0] * qpr
    threads = min(1024, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    quads_b[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                             int64(total))


@cuda.jit(fastmath=True)
def pack4_a(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    q = cuda.grid(1)
    if q >= total_quads:
        return
    u = uint64(q)
    token = u // quads_per_row
    j = u - token * quads_per_row
    p = uint64(2) * j
    e = token * uint64(2) * n_pairs + uint64(2) * p
    has2 = p + uint64(1) < n_pairs
    a0 = x[e]
    b0 = x[e + uint64(1)]
    a1 = float32(0)
    b1 = float32(0)
    if has2:
        a1 = x[e + uint64(2)]
        b1 = x[e + uint64(3)]
    pos = float32(positions[token])
    hidden = float32(2 * n_pairs)
    f0 = float32(1.0) / math.pow(base, float32(2 * p) / hidden)
    th0 = pos * f0
    c0 = math.cos(th0)
    s0 = math.sin(th0)
    out[e] = a0 * c0 - b0 * s0
    out[e + uint64(1)] = a0 * s0 + b0 * c0
    if has2:
        f1 = float32(1.0) / math.pow(base, float32(2 * p + 2) / hidden)
        th1 = pos * f1
        c1 = math.cos(th1)
        s1 = math.sin(th1)
        out[e + uint64(2)] = a1 * c1 - b1 * s1
        out[e + uint64(3)] = a1 * s1 + b1 * c1


@cuda.jit(fastmath=True)
def pack4_b(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    q = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if q < total_quads:
        u = uint64(q)
        tok = u // quads_per_row
        p = (u - quads_per_row * tok) * uint64(2)
        e = (tok * n_pairs + p) * uint64(2)
        pos = float32(positions[tok])
        # all loads first
        v0 = x[e]
        v1 = x[e + uint64(1)]
        second = p + uint64(1) < n_pairs
        v2 = x[e + uint64(2)] if second else float32(0)
        v3 = x[e + uint64(3)] if second else float32(0)
        # second frequency from the first by one multiply
        step = float32(-2.0) / float32(2 * n_pairs)
        f0 = math.pow(base, step * float32(p))
        ratio = math.pow(base, step)
        f1 = f0 * ratio
        c0 = math.cos(pos * f0)
        s0 = math.sin(pos * f0)
        c1 = math.cos(pos * f1)
        s1 = math.sin(pos * f1)
        out[e] = v0 * c0 - v1 * s0
        out[e + uint64(1)] = v0 * s0 + v1 * c0
        if second:
            out[e + uint64(2)] = v2 * c1 - v3 * s1
            out[e + uint64(3)] = v2 * s1 + v3 * c1


ENTRIES = [
    ("03.1", "unrolled four floats", two_pairs_a),
    ("03.1", "loop over the two pairs", two_pairs_b),
    ("03.2", "first pair then if second", quads_a),
    ("03.2", "clamped pair range loop", quads_b),
    ("03.3", "256 threads", launch_quads_a),
    ("03.3", "fitted warps cap 1024", launch_quads_b),
    ("03.4", "loads, then 1/pow each pair", pack4_a),
    ("03.4", "loads first, pow ratio for second pair", pack4_b),
]


@cuda.jit(fastmath=True)
def two_pairs_c(x, out, positions, inv_freq, n_pairs):
    # the four floats read through a row view; both angles before any load
    tok = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if t + t < n_pairs:
        pos = float32(positions[tok])
        p = t + t
        f0 = inv_freq[p]
        f1 = inv_freq[p + 1]
        c0 = math.cos(pos * f0)
        s0 = math.sin(pos * f0)
        c1 = math.cos(pos * f1)
        s1 = math.sin(pos * f1)
        row = x[tok * 2 * n_pairs:(tok + 1) * 2 * n_pairs]
        dst = out[tok * 2 * n_pairs:(tok + 1) * 2 * n_pairs]
        q = 4 * t
        v0 = row[q]
        v1 = row[q + 1]
        v2 = row[q + 2]
        v3 = row[q + 3]
        dst[q] = v0 * c0 - v1 * s0
        dst[q + 1] = v1 * c0 + v0 * s0
        dst[q + 2] = v2 * c1 - v3 * s1
        dst[q + 3] = v3 * c1 + v2 * s1


@cuda.jit(fastmath=True)
def quads_c(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    # uint64 grid-stride loop over quads
    q = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    total = uint64(total_quads)
    while q < total:
        tok = q // quads_per_row
        p = uint64(2) * (q - tok * quads_per_row)
        pos = float32(positions[tok])
        e = uint64(2) * (tok * n_pairs + p)
        for k in range(2):
            pk = p + uint64(k)
            if pk < n_pairs:
                th = pos * inv_freq[pk]
                ek = e + uint64(2 * k)
                a = x[ek]
                b = x[ek + uint64(1)]
                out[ek] = a * math.cos(th) - b * math.sin(th)
                out[ek + uint64(1)] = a * math.sin(th) + b * math.cos(th)
        q += step


def launch_quads_c(x, out, positions, inv_freq, n_pairs):
    qpr = n_pairs // 2 + n_pairs % 2
    total = int(positions.size) * qpr
    threads = 64
    blocks = (total - 1) // threads + 1
    quads_c[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), uint64(qpr),
                             int64(total))


ENTRIES += [
    ("03.1", "row views, angles before loads", two_pairs_c),
    ("03.2", "uint64 grid-stride, inner pair loop", quads_c),
    ("03.3", "64 threads, (t-1)//b+1 blocks, stride kernel", launch_quads_c),
]
