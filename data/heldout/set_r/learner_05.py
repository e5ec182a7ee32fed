"""Notebook 05: one sincos per pair, and the frequency recurrence."""
import math

from numba import cuda, float32, uint64, int64


# ---------------------------------------------------------------- 05.1
@cuda.jit(fastmath=True)
def one_angle_pow(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        freq = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * freq
        c = math.cos(angle)
        s = math.sin(angle)
        a = i + i
        x0 = x[a]
        x1 = x[a + uint64(1)]
        out[a] = x0 * c - x1 * s
        out[a + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def one_angle_explog_whilestride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    # grid-stride while loop, frequency via exp(e * log(base)), float offsets computed first
    p = uint64(cuda.threadIdx.x) + uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x)
    step = uint64(cuda.gridDim.x) * uint64(cuda.blockDim.x)
    total = uint64(total_pairs)
    log_base = math.log(base)
    while p < total:
        token = p // n_pairs
        pair = p - token * n_pairs
        theta = float32(positions[token]) * math.exp(exponent_step * float32(pair) * log_base)
        s = math.sin(theta)
        c = math.cos(theta)
        e = p * uint64(2)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e + uint64(1)] = x1 * c + x0 * s
        out[e] = x0 * c - x1 * s
        p += step


# ---------------------------------------------------------------- 05.2
@cuda.jit(fastmath=True)
def strided_while(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                  stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        row = token * n_pairs * uint64(2)
        while j < n_pairs:
            a = row + j + j
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def strided_fixed4(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                   stride_ratio):
    # at most four slots per thread: an unrolled-style fixed loop with a guard
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    t = int64(idx)
    s_ = int64(stride)
    np_ = int64(n_pairs)
    token = t // s_
    j = t - token * s_
    theta_f = float32(positions[token]) * math.pow(base, exponent_step * float32(j))
    for k in range(4):
        slot = j + k * s_
        if slot < np_:
            a = 2 * (token * np_ + slot)
            c = math.cos(theta_f)
            sn = math.sin(theta_f)
            x0 = x[a]
            x1 = x[a + 1]
            out[a] = x0 * c - x1 * sn
            out[a + 1] = x1 * c + x0 * sn
        theta_f = theta_f * stride_ratio


# ---------------------------------------------------------------- 05.3
def launch_strided_256(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total = tokens * stride
    exponent_step = -2.0 / hidden
    ratio = float(base) ** (exponent_step * stride)
    tpb = 256
    blocks = (total + tpb - 1) // tpb
    strided_while[blocks, tpb](x, out, positions, uint64(n_pairs), uint64(stride), total,
                               float32(base), float32(exponent_step), float32(ratio))


def launch_strided_fit(x, out, positions, tokens, hidden, base):
    # block size: the smallest multiple of 32 that holds all threads, capped at 1024
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total_threads = tokens * stride
    if total_threads == 0:
        return
    exponent_step = -2.0 / float(hidden)
    ratio = math.exp(math.log(float(base)) * exponent_step * stride)
    threads = min(1024, 32 * (-(-total_threads // 32)))
    grid = -(-total_threads // threads)
    strided_fixed4[grid, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                  int(total_threads), float32(base), float32(exponent_step),
                                  float32(ratio))


# ---------------------------------------------------------------- 05.4
@cuda.jit(fastmath=True)
def heads_while(x, out, positions, heads, half_dim, stride, total_threads, step, partner,
                base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        a = first + j * step
        a_step = stride * step
        while j < half_dim:
            b = a + partner
            x0 = x[a]
            x1 = x[b]
            ang = pos * f
            c = math.cos(ang)
            s = math.sin(ang)
            out[a] = x0 * c - x1 * s
            out[b] = x1 * c + x0 * s
            f *= stride_ratio
            j += stride
            a += a_step


@cuda.jit(fastmath=True)
def heads_gridstride_prefetch(x, out, positions, heads, half_dim, stride, total_threads, step,
                              partner, base, exponent_step, stride_ratio):
    # grid-stride over threads; loads the next slot before rotating this one
    nthreads = uint64(cuda.gridDim.x * cuda.blockDim.x)
    i = uint64(cuda.grid(1))
    total = uint64(total_threads)
    log2b = math.log2(base)
    while i < total:
        head_row = i // stride
        j = i - head_row * stride
        pos = float32(positions[head_row // heads])
        f = math.exp2(exponent_step * float32(j) * log2b)
        base_el = (head_row * half_dim) << uint64(1)
        if j < half_dim:
            a = base_el + j * step
            x0 = x[a]
            x1 = x[a + partner]
            while j < half_dim:
                jn = j + stride
                an = a + stride * step
                n0 = x0
                n1 = x1
                if jn < half_dim:
                    n0 = x[an]
                    n1 = x[an + partner]
                ang = pos * f
                s = math.sin(ang)
                c = math.cos(ang)
                out[a + partner] = x0 * s + x1 * c
                out[a] = x0 * c - x1 * s
                f = f * stride_ratio
                x0 = n0
                x1 = n1
                j = jn
                a = an
        i += nthreads


ENTRIES = [
    ("05.1", "pow per pair, uint64 index", one_angle_pow),
    ("05.1", "grid-stride while uint64, exp/log freq", one_angle_explog_whilestride),
    ("05.2", "while loop over slots, uint64", strided_while),
    ("05.2", "fixed 4-slot loop on angle, int64", strided_fixed4),
    ("05.3", "256-thread blocks, ** ratio", launch_strided_256),
    ("05.3", "fitted block size, exp/log ratio", launch_strided_fit),
    ("05.4", "while loop, uint64 heads", heads_while),
    ("05.4", "grid-stride + prefetch, exp2/log2", heads_gridstride_prefetch),
]


# ---------------------------------------------------------------- third entries
@cuda.jit(fastmath=True)
def one_angle_int64_recip_pow(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    # signed index with %, frequency as 1 / base ** (-exponent_step * pair)
    idx = cuda.threadIdx.x + cuda.blockDim.x * cuda.blockIdx.x
    if idx >= total_pairs:
        return
    npairs = int64(n_pairs)
    pair = idx % npairs
    token = idx // npairs
    inv = float32(1.0) / math.pow(base, -exponent_step * float32(pair))
    pos = float32(positions[token])
    e0 = 2 * idx
    e1 = e0 + 1
    v0 = x[e0]
    v1 = x[e1]
    ang = inv * pos
    cv = math.cos(ang)
    sv = math.sin(ang)
    out[e1] = v1 * cv + v0 * sv
    out[e0] = v0 * cv - v1 * sv


@cuda.jit(fastmath=True)
def strided_range_int64(x, out, positions, n_pairs, stride, total_threads, base,
                        exponent_step, stride_ratio):
    # for-range over the slots in int64, element offsets from the row start
    t = cuda.grid(1)
    if t < total_threads:
        st = int64(stride)
        npr = int64(n_pairs)
        row = t // st
        j0 = t - row * st
        freq = math.pow(base, float32(j0) * exponent_step)
        p = float32(positions[row])
        row_start = row * (npr + npr)
        for j in range(j0, npr, st):
            e = row_start + 2 * j
            th = p * freq
            x0 = x[e]
            x1 = x[e + 1]
            sn = math.sin(th)
            cs = math.cos(th)
            out[e] = x0 * cs - x1 * sn
            out[e + 1] = x0 * sn + x1 * cs
            freq = freq * stride_ratio


def launch_strided_np64(x, out, positions, tokens, hidden, base):
    # blocks of 64 as in the kernel's own step; numpy float64 for the ratio
    import numpy as np
    n_pairs = hidden // 2
    stride = math.ceil(n_pairs / 4)
    total_threads = tokens * stride
    e = np.float64(-2.0) / np.float64(hidden)
    ratio = np.float32(np.power(np.float64(base), e * stride))
    blocks = math.ceil(total_threads / 64)
    strided_range_int64[blocks, 64](x, out, positions, uint64(n_pairs), uint64(stride),
                                    int(total_threads), float32(base), float32(e), float32(ratio))


@cuda.jit(fastmath=True)
def heads_int64_fixed4(x, out, positions, heads, half_dim, stride, total_threads, step, partner,
                       base, exponent_step, stride_ratio):
    # signed int64, fixed four-slot loop with a guard; float offsets recomputed per slot
    g = cuda.grid(1)
    if g >= total_threads:
        return
    st = int64(stride)
    hd = int64(half_dim)
    stp = int64(step)
    par = int64(partner)
    hr = g // st
    j = g - hr * st
    first = 2 * hr * hd
    pos = float32(positions[hr // int64(heads)])
    f = math.pow(base, exponent_step * float32(j))
    for k in range(4):
        slot = j + k * st
        if slot < hd:
            a = first + slot * stp
            b = a + par
            th = pos * f
            c = math.cos(th)
            s = math.sin(th)
            xa = x[a]
            xb = x[b]
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
        f = f * stride_ratio


ENTRIES += [
    ("05.1", "int64 %, reciprocal of pow, early return", one_angle_int64_recip_pow),
    ("05.2", "for-range slots in int64", strided_range_int64),
    ("05.3", "64-thread blocks, numpy float64 ratio", launch_strided_np64),
    ("05.4", "int64 fixed 4-slot loop", heads_int64_fixed4),
]
