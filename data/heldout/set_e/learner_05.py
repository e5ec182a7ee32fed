"""Notebook 05 (pair sincos), steps 05.1 .. 05.4."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 05.1 rope_one_angle
@cuda.jit(fastmath=True)
def one_angle_pow(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def one_angle_exp_log(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - n_pairs * token
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    f = math.exp(math.log(base) * exponent_step * float32(pair))
    th = float32(positions[token]) * f
    s = math.sin(th)
    c = math.cos(th)
    out[e] = a * c - b * s
    out[e + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def one_angle_stride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * math.pow(base, exponent_step * float32(pair))
        c = math.cos(angle)
        s = math.sin(angle)
        e = i << uint64(1)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        idx += cuda.gridsize(1)


# ---------------------------------------------------------------- 05.2 my_rope_strided
@cuda.jit(fastmath=True)
def strided_while(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
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
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            e = row + uint64(2) * slot
            x0 = x[e]
            x1 = x[e + uint64(1)]
            out[e] = x0 * c - x1 * s
            out[e + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            slot += stride


@cuda.jit(fastmath=True)
def strided_four_slots(x, out, positions, n_pairs, stride, total_threads, base,
                       exponent_step, stride_ratio):
    # at most four slots a thread (stride = ceil(n_pairs / 4)): a fixed loop of 4, guarded
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_threads:
        return
    i = uint64(idx)
    token = i // stride
    j = i - stride * token
    pos = float32(positions[token])
    f = math.pow(base, exponent_step * float32(j))
    e = (token * n_pairs + j) << uint64(1)
    de = stride + stride
    for k in range(4):
        if j < n_pairs:
            a = x[e]
            b = x[e + uint64(1)]
            th = pos * f
            c = math.cos(th)
            s = math.sin(th)
            out[e] = a * c - b * s
            out[e + uint64(1)] = a * s + b * c
        j += stride
        e += de
        f *= stride_ratio


@cuda.jit(fastmath=True)
def strided_exp_first(x, out, positions, n_pairs, stride, total_threads, base,
                      exponent_step, stride_ratio):
    # the first frequency as exp2(log2(base) * exponent_step * j); the angle itself is
    # stepped too: theta_{k+1} = theta_k * stride_ratio
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        theta = float32(positions[token]) * math.exp2(math.log2(base) * exponent_step
                                                      * float32(j))
        first = uint64(2) * token * n_pairs
        while j < n_pairs:
            e = first + j + j
            x0 = x[e]
            x1 = x[e + uint64(1)]
            c = math.cos(theta)
            s = math.sin(theta)
            out[e] = x0 * c - x1 * s
            out[e + uint64(1)] = x1 * c + x0 * s
            theta = theta * stride_ratio
            j = j + stride


# ---------------------------------------------------------------- 05.3 launch_strided
def launch_strided_plain(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)
    threads = 256
    blocks = (total_threads + threads - 1) // threads
    strided_while[blocks, threads](x, out, positions, numba.uint64(n_pairs),
                                   numba.uint64(stride), total_threads, numba.float32(base),
                                   numba.float32(exponent_step), numba.float32(stride_ratio))


def launch_strided_64(x, out, positions, tokens, hidden, base):
    n_pairs = hidden >> 1
    stride = math.ceil(n_pairs / 4)
    total = int(tokens * stride)
    step = -2.0 / float(hidden)
    ratio = math.pow(float(base), step * stride)
    strided_four_slots[-(-total // 64), 64](
        x, out, positions, uint64(n_pairs), uint64(stride), total, float32(base),
        float32(step), float32(ratio))


def launch_strided_fit(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total = tokens * stride
    exponent_step = -2.0 / hidden
    ratio = math.exp(math.log(base) * exponent_step * stride)  # in float64
    threads = min(1024, 32 * ((total + 31) // 32))
    blocks = (total + threads - 1) // threads
    strided_exp_first[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                       total, float32(base), float32(exponent_step),
                                       float32(ratio))


# ---------------------------------------------------------------- 05.4 rope_pair_sincos_heads
@cuda.jit(fastmath=True)
def sincos_heads_while(x, out, positions, heads, half_dim, stride, total_threads, step,
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
        while j < half_dim:
            a = first + j * step
            b = a + partner
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            xa = x[a]
            xb = x[b]
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def sincos_heads_return(x, out, positions, heads, half_dim, stride, total_threads, step,
                        partner, base, exponent_step, stride_ratio):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_threads:
        return
    i = uint64(idx)
    head_row = i // stride
    j = i - stride * head_row
    a = (head_row * half_dim) * uint64(2) + j * step
    da = stride * step  # the next slot's first float
    f = math.exp(math.log(base) * exponent_step * float32(j))
    pos = float32(positions[head_row // heads])
    while j < half_dim:
        u = x[a]
        v = x[a + partner]
        th = pos * f
        s = math.sin(th)
        c = math.cos(th)
        out[a + partner] = u * s + v * c
        out[a] = u * c - v * s
        a += da
        j += stride
        f *= stride_ratio


@cuda.jit(fastmath=True)
def sincos_heads_four(x, out, positions, heads, half_dim, stride, total_threads, step,
                      partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        token = head_row // heads
        first = uint64(2) * head_row * half_dim
        f = math.pow(base, exponent_step * float32(j))
        pos = float32(positions[token])
        for k in range(4):
            if j < half_dim:
                a = first + j * step
                xa = x[a]
                xb = x[a + partner]
                c = math.cos(pos * f)
                s = math.sin(pos * f)
                out[a] = xa * c - xb * s
                out[a + partner] = xa * s + xb * c
            j += stride
            f *= stride_ratio


ENTRIES = [
    ("05.1", "pow_if", one_angle_pow),
    ("05.1", "exp_log_return", one_angle_exp_log),
    ("05.1", "grid_stride", one_angle_stride),
    ("05.2", "while_freq_recurrence", strided_while),
    ("05.2", "fixed_four_guarded", strided_four_slots),
    ("05.2", "exp2_angle_recurrence", strided_exp_first),
    ("05.3", "block256", launch_strided_plain),
    ("05.3", "block64_math_pow", launch_strided_64),
    ("05.3", "block_fit_exp_log", launch_strided_fit),
    ("05.4", "while_pow", sincos_heads_while),
    ("05.4", "return_exp_log_pointer", sincos_heads_return),
    ("05.4", "fixed_four_guarded", sincos_heads_four),
]
