import math
from numba import cuda, float32, uint64, int64


@cuda.jit(fastmath=True)
def one_angle_a(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, exponent_step * float32(pair))
        th = float32(positions[token]) * f
        c = math.cos(th)
        s = math.sin(th)
        a = x[2 * i]
        b = x[2 * i + 1]
        out[2 * i] = a * c - b * s
        out[2 * i + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def one_angle_b(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    while i < total:
        tok = i // n_pairs
        p = i - n_pairs * tok
        lo = x[i + i]
        hi = x[i + i + uint64(1)]
        ang = float32(positions[tok]) * math.exp(exponent_step * float32(p) * math.log(base))
        sn = math.sin(ang)
        cs = math.cos(ang)
        out[i + i] = lo * cs - hi * sn
        out[i + i + uint64(1)] = hi * cs + lo * sn
        i += stride


@cuda.jit(fastmath=True)
def strided_a(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
              stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        row = uint64(2) * token * n_pairs
        f = math.pow(base, exponent_step * float32(j))
        while j < n_pairs:
            th = pos * f
            c = math.cos(th)
            s = math.sin(th)
            e = row + uint64(2) * j
            a = x[e]
            b = x[e + uint64(1)]
            out[e] = a * c - b * s
            out[e + uint64(1)] = a * s + b * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def strided_b(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
              stride_ratio):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_threads:
        return
    u = uint64(idx)
    tok = u // stride
    j0 = u - stride * tok
    pos = float32(positions[tok])
    base_e = tok * (n_pairs + n_pairs)
    freq = math.exp(exponent_step * float32(j0) * math.log(base))
    # at most four slots per thread: unrolled k = 0..3 with a guard
    for k in range(4):
        j = j0 + uint64(k) * stride
        if j < n_pairs:
            e = base_e + j + j
            v0 = x[e]
            v1 = x[e + uint64(1)]
            ang = freq * pos
            cs = math.cos(ang)
            sn = math.sin(ang)
            out[e] = v0 * cs - v1 * sn
            out[e + uint64(1)] = v1 * cs + v0 * sn
        freq *= stride_ratio


def launch_strided_a(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total = tokens * stride
    exponent_step = -2.0 / hidden
    ratio = base ** (exponent_step * stride)
    threads = 128
    blocks = (total + threads - 1) // threads
    strided_a[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride), total,
                               float32(base), float32(exponent_step), float32(ratio))


def launch_strided_b(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = math.ceil(n_pairs / 4)
    total = tokens * stride
    es = -2.0 / hidden
    ratio = math.exp(es * stride * math.log(base))
    threads = min(1024, -(-total // 32) * 32)
    blocks = -(-total // threads)
    strided_b[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                               int64(total), float32(base), float32(es), float32(ratio))


@cuda.jit(fastmath=True)
def heads_a(x, out, positions, heads, half_dim, stride, total_threads, step, partner, base,
            exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            b = a + partner
            th = pos * f
            c = math.cos(th)
            s = math.sin(th)
            xa = x[a]
            xb = x[b]
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
            f *= stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def heads_b(x, out, positions, heads, half_dim, stride, total_threads, step, partner, base,
            exponent_step, stride_ratio):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_threads:
        return
    u = uint64(idx)
    hr = u // stride
    j = u - stride * hr
    first = hr * (half_dim + half_dim)
    pos = float32(positions[hr // heads])
    f = math.exp(exponent_step * float32(j) * math.log(base))
    for k in range(4):
        if j < half_dim:
            a = first + step * j
            xa = x[a]
            xb = x[a + partner]
            ang = f * pos
            sn = math.sin(ang)
            cs = math.cos(ang)
            out[a + partner] = xb * cs + xa * sn
            out[a] = xa * cs - xb * sn
        f = f * stride_ratio
        j = j + stride


ENTRIES = [
    ("05.1", "pow, guard", one_angle_a),
    ("05.1", "exp/log, uint64 grid-stride", one_angle_b),
    ("05.2", "while loop over slots", strided_a),
    ("05.2", "exp/log first freq, unrolled 4 with guard", strided_b),
    ("05.3", "128 threads, ** ratio", launch_strided_a),
    ("05.3", "fitted warps cap 1024, exp/log ratio", launch_strided_b),
    ("05.4", "while loop, pow", heads_a),
    ("05.4", "fixed 4-trip loop, exp/log, early return", heads_b),
]


@cuda.jit
def one_angle_c(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    # precise build, early return, angle through pow with the exponent folded in
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    tok = u // n_pairs
    pr = u - tok * n_pairs
    theta = float32(positions[tok]) * math.pow(base, float32(pr) * exponent_step)
    c = math.cos(theta)
    s = math.sin(theta)
    e = uint64(2) * u
    x0 = x[e]
    x1 = x[e + uint64(1)]
    out[e + uint64(1)] = x0 * s + x1 * c
    out[e] = x0 * c - x1 * s


@cuda.jit(fastmath=True)
def strided_c(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
              stride_ratio):
    # uint64 grid-stride over threads, slots by a for-range with a constant step of one
    t = uint64(cuda.grid(1))
    gs = uint64(cuda.gridsize(1))
    while t < uint64(total_threads):
        tok = t // stride
        j = t - tok * stride
        pos = float32(positions[tok])
        f = math.pow(base, exponent_step * float32(j))
        row = tok * n_pairs
        slot = j
        while slot < n_pairs:
            e = uint64(2) * (row + slot)
            a = x[e]
            b = x[e + uint64(1)]
            ang = pos * f
            c = math.cos(ang)
            s = math.sin(ang)
            out[e] = a * c - b * s
            out[e + uint64(1)] = a * s + b * c
            slot += stride
            f *= stride_ratio
        t += gs


def launch_strided_c(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total = tokens * stride
    es = -2.0 / hidden
    ratio = float(base) ** (es * stride)
    threads = 64
    blocks = -(-total // threads)
    strided_c[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride), total,
                               float32(base), float32(es), float32(ratio))


ENTRIES += [
    ("05.1", "precise build, stores reversed", one_angle_c),
    ("05.2", "grid-stride over threads, nested while", strided_c),
    ("05.3", "64 threads, stride kernel", launch_strided_c),
]
