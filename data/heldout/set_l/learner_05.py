import ropelab  # noqa: F401
import math

import numba
from numba import cuda, float32, uint64


# ---------------- 05.1 rope_one_angle ----------------
@cuda.jit(fastmath=True)
def rope_one_angle(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        freq = math.pow(base, exponent_step * float32(pair))
        theta = float32(positions[token]) * freq
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_one_angle_explog_stride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    # grid-stride loop; frequency as exp(e * log(base))
    idx = cuda.grid(1)
    gs = cuda.gridsize(1)
    logb = math.log(base)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * math.exp(exponent_step * float32(pair) * logb)
        s = math.sin(theta)
        c = math.cos(theta)
        a = i << uint64(1)
        u = x[a]
        v = x[a + uint64(1)]
        out[a] = u * c - v * s
        out[a + uint64(1)] = u * s + v * c
        idx += gs


@cuda.jit
def rope_one_angle_precise(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - n_pairs * token
    theta = float32(positions[token]) * math.pow(base, exponent_step * float32(pair))
    c = math.cos(theta)
    s = math.sin(theta)
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    y0 = x0 * c - x1 * s
    y1 = x0 * s + x1 * c
    out[2 * idx] = y0
    out[2 * idx + 1] = y1


# ---------------- 05.2 my_rope_strided ----------------
@cuda.jit(fastmath=True)
def my_rope_strided(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                    stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        row = uint64(2) * token * n_pairs
        f = math.pow(base, exponent_step * float32(j))
        slot = j
        while slot < n_pairs:
            theta = pos * f
            c = math.cos(theta)
            s = math.sin(theta)
            a = row + uint64(2) * slot
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f *= stride_ratio
            slot += stride


@cuda.jit(fastmath=True)
def my_rope_strided_unrolled(x, out, positions, n_pairs, stride, total_threads, base,
                             exponent_step, stride_ratio):
    # at most four slots: written out as four guarded copies
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    token = i // stride
    j = i - token * stride
    pos = float32(positions[token])
    row = (token * n_pairs) << uint64(1)
    f0 = math.pow(base, exponent_step * float32(j))
    f1 = f0 * stride_ratio
    f2 = f1 * stride_ratio
    f3 = f2 * stride_ratio
    s0 = j
    s1 = j + stride
    s2 = s1 + stride
    s3 = s2 + stride
    if s0 < n_pairs:
        a = row + (s0 << uint64(1))
        c = math.cos(pos * f0)
        s = math.sin(pos * f0)
        u = x[a]
        v = x[a + uint64(1)]
        out[a] = u * c - v * s
        out[a + uint64(1)] = u * s + v * c
    if s1 < n_pairs:
        a = row + (s1 << uint64(1))
        c = math.cos(pos * f1)
        s = math.sin(pos * f1)
        u = x[a]
        v = x[a + uint64(1)]
        out[a] = u * c - v * s
        out[a + uint64(1)] = u * s + v * c
    if s2 < n_pairs:
        a = row + (s2 << uint64(1))
        c = math.cos(pos * f2)
        s = math.sin(pos * f2)
        u = x[a]
        v = x[a + uint64(1)]
        out[a] = u * c - v * s
        out[a + uint64(1)] = u * s + v * c
    if s3 < n_pairs:
        a = row + (s3 << uint64(1))
        c = math.cos(pos * f3)
        s = math.sin(pos * f3)
        u = x[a]
        v = x[a + uint64(1)]
        out[a] = u * c - v * s
        out[a + uint64(1)] = u * s + v * c


@cuda.jit(fastmath=True)
def my_rope_strided_for4(x, out, positions, n_pairs, stride, total_threads, base,
                         exponent_step, stride_ratio):
    # for k in range(4) with a guard inside; loads of the slot grouped before the math
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        for k in range(4):
            slot = j + uint64(k) * stride
            if slot < n_pairs:
                a = uint64(2) * (token * n_pairs + slot)
                x0 = x[a]
                x1 = x[a + uint64(1)]
                ang = pos * f
                c = math.cos(ang)
                s = math.sin(ang)
                out[a] = x0 * c - x1 * s
                out[a + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio


# ---------------- 05.3 launch_strided ----------------
def launch_strided(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total = tokens * stride
    exponent_step = -2.0 / hidden
    ratio = base ** (exponent_step * stride)
    threads = 256
    blocks = (total + threads - 1) // threads
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride), total,
                                     float32(base), float32(exponent_step), float32(ratio))


def launch_strided_fit(x, out, positions, tokens, hidden, base):
    n_pairs = hidden >> 1
    stride = math.ceil(n_pairs / 4)
    total = tokens * stride
    exponent_step = -2.0 / hidden
    ratio = math.pow(base, exponent_step * stride)
    threads = min(1024, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    my_rope_strided_unrolled[blocks, threads](
        x, out, positions, numba.uint64(n_pairs), numba.uint64(stride), numba.int64(total),
        numba.float32(base), numba.float32(exponent_step), numba.float32(ratio))


def launch_strided_64(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total = tokens * stride
    e = -2.0 / hidden
    ratio = math.exp(e * stride * math.log(base))
    my_rope_strided_for4[-(-total // 64), 64](x, out, positions, uint64(n_pairs),
                                              uint64(stride), total, float32(base),
                                              float32(e), float32(ratio))


# ---------------- 05.4 rope_pair_sincos_heads ----------------
@cuda.jit(fastmath=True)
def rope_pair_sincos_heads(x, out, positions, heads, half_dim, stride, total_threads, step,
                           partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        slot = j
        while slot < half_dim:
            a = first + slot * step
            b = a + partner
            theta = pos * f
            c = math.cos(theta)
            s = math.sin(theta)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f *= stride_ratio
            slot += stride


@cuda.jit(fastmath=True)
def rope_pair_sincos_heads_for4(x, out, positions, heads, half_dim, stride, total_threads,
                                step, partner, base, exponent_step, stride_ratio):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_threads:
        return
    i = uint64(idx)
    head_row = i // stride
    j = i - head_row * stride
    first = (head_row * half_dim) << uint64(1)
    pos = float32(positions[head_row // heads])
    f = math.exp(exponent_step * float32(j) * math.log(base))
    for k in range(4):
        slot = j + uint64(k) * stride
        if slot < half_dim:
            a = first + slot * step
            x0 = x[a]
            x1 = x[a + partner]
            s = math.sin(pos * f)
            c = math.cos(pos * f)
            out[a] = x0 * c - x1 * s
            out[a + partner] = x1 * c + x0 * s
        f *= stride_ratio


@cuda.jit
def rope_pair_sincos_heads_precise(x, out, positions, heads, half_dim, stride, total_threads,
                                   step, partner, base, exponent_step, stride_ratio):
    # accurate math; loads of all (up to four) slots staged in a local array first
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        buf = cuda.local.array(8, float32)
        cnt = 0
        slot = j
        while slot < half_dim:
            a = first + slot * step
            buf[2 * cnt] = x[a]
            buf[2 * cnt + 1] = x[a + partner]
            cnt += 1
            slot += stride
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        slot = j
        for k in range(cnt):
            a = first + slot * step
            th = pos * f
            c = math.cos(th)
            s = math.sin(th)
            out[a] = buf[2 * k] * c - buf[2 * k + 1] * s
            out[a + partner] = buf[2 * k] * s + buf[2 * k + 1] * c
            f = f * stride_ratio
            slot += stride


ENTRIES = [
    ("05.1", "pow_guard", rope_one_angle),
    ("05.1", "explog_grid_stride", rope_one_angle_explog_stride),
    ("05.1", "pow_precise_return", rope_one_angle_precise),
    ("05.2", "strided_while_recurrence", my_rope_strided),
    ("05.2", "unrolled4_guards", my_rope_strided_unrolled),
    ("05.2", "for4_guard_inside", my_rope_strided_for4),
    ("05.3", "b256_pyfloat", launch_strided),
    ("05.3", "fit_mathpow", launch_strided_fit),
    ("05.3", "b64_explog_ratio", launch_strided_64),
    ("05.4", "heads_while_recurrence", rope_pair_sincos_heads),
    ("05.4", "for4_explog", rope_pair_sincos_heads_for4),
    ("05.4", "local_staged_precise", rope_pair_sincos_heads_precise),
]
