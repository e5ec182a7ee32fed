import ropelab
import math
import numba
import numpy as np
from numba import cuda, float32, uint64, int64


# 05.1 rope_one_angle
@cuda.jit(fastmath=True)
def one_angle_a(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
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
    i = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - n_pairs * token
        e = i * uint64(2)
        a = x[e]
        b = x[e + uint64(1)]
        pos = float32(positions[token])
        th = pos * base ** (float32(pair) * exponent_step)
        s = math.sin(th)
        c = math.cos(th)
        out[e] = cuda.fma(a, c, -b * s)
        out[e + uint64(1)] = cuda.fma(b, c, a * s)


# 05.2 my_rope_strided
@cuda.jit(fastmath=True)
def strided_a(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
              stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    g = uint64(idx)
    token = g // stride
    j = g - token * stride
    pos = float32(positions[token])
    row = token * n_pairs * uint64(2)
    f = math.pow(base, exponent_step * float32(j))
    slot = j
    while slot < n_pairs:
        th = pos * f
        c = math.cos(th)
        s = math.sin(th)
        e = row + slot * uint64(2)
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        f = f * stride_ratio
        slot += stride


@cuda.jit(fastmath=True)
def strided_b(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
              stride_ratio):
    g = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if g < uint64(total_threads):
        token = g // stride
        j = g - stride * token
        pos = float32(positions[token])
        f = base ** (float32(j) * exponent_step)
        e = (token * n_pairs + j) * uint64(2)
        estep = stride * uint64(2)
        end = (token + uint64(1)) * n_pairs * uint64(2)
        while e < end:
            a = x[e]
            b = x[e + uint64(1)]
            th = pos * f
            sn = math.sin(th)
            cs = math.cos(th)
            out[e] = cuda.fma(a, cs, -b * sn)
            out[e + uint64(1)] = cuda.fma(a, sn, b * cs)
            f *= stride_ratio
            e += estep


# 05.3 launch_strided
def launch_strided_a(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total = tokens * stride
    exponent_step = -2.0 / hidden
    ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = (total + threads - 1) // threads
    strided_a[blocks, threads](x, out, positions, numba.uint64(n_pairs), numba.uint64(stride),
                               numba.int64(total), numba.float32(base),
                               numba.float32(exponent_step), numba.float32(ratio))


def launch_strided_b(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = math.ceil(n_pairs / 4)
    total = tokens * stride
    es = np.float64(-2.0) / np.float64(hidden)
    ratio = np.float32(np.power(np.float64(base), es * stride))
    threads = min(256, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    strided_b[blocks, threads](x, out, positions, numba.uint64(n_pairs), numba.uint64(stride),
                               numba.int64(total), numba.float32(base), numba.float32(es),
                               numba.float32(ratio))


# 05.4 rope_pair_sincos_heads
@cuda.jit(fastmath=True)
def sincos_heads_a(x, out, positions, heads, half_dim, stride, total_threads, step, partner,
                   base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    g = uint64(idx)
    hrow = g // stride
    j = g - hrow * stride
    token = hrow // heads
    first = hrow * half_dim * uint64(2)
    pos = float32(positions[token])
    f = math.pow(base, exponent_step * float32(j))
    slot = j
    while slot < half_dim:
        lo = first + slot * step
        hi = lo + partner
        a = x[lo]
        b = x[hi]
        th = pos * f
        c = math.cos(th)
        s = math.sin(th)
        out[lo] = a * c - b * s
        out[hi] = a * s + b * c
        f = f * stride_ratio
        slot += stride


@cuda.jit(fastmath=True)
def sincos_heads_b(x, out, positions, heads, half_dim, stride, total_threads, step, partner,
                   base, exponent_step, stride_ratio):
    g = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if g < uint64(total_threads):
        hrow = g // stride
        j = g - stride * hrow
        token = hrow // heads
        pos = float32(positions[token])
        first = hrow * (half_dim + half_dim)
        f = base ** (float32(j) * exponent_step)
        lo = first + j * step
        jump = stride * step
        slot = j
        while slot < half_dim:
            a = x[lo]
            b = x[lo + partner]
            th = pos * f
            sn = math.sin(th)
            cs = math.cos(th)
            out[lo] = cuda.fma(a, cs, -b * sn)
            out[lo + partner] = cuda.fma(a, sn, b * cs)
            f *= stride_ratio
            lo += jump
            slot += stride


# 05.1 third version: grid-stride over pairs
@cuda.jit(fastmath=True)
def one_angle_stride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        th = float32(positions[token]) * math.pow(base, exponent_step * float32(pair))
        c = math.cos(th)
        s = math.sin(th)
        a = x[i * uint64(2)]
        b = x[i * uint64(2) + uint64(1)]
        out[i * uint64(2)] = a * c - b * s
        out[i * uint64(2) + uint64(1)] = a * s + b * c
        i += step

ENTRIES = [
    ("05.1", "grid1_math_pow", one_angle_a),
    ("05.1", "manual_pow_op_fma", one_angle_b),
    ("05.2", "slot_while", strided_a),
    ("05.2", "element_offset_while_fma", strided_b),
    ("05.3", "block64", launch_strided_a),
    ("05.3", "block256_numpy_f64", launch_strided_b),
    ("05.4", "slot_while", sincos_heads_a),
    ("05.4", "offset_stepping_fma", sincos_heads_b),
    ("05.1", "grid_stride_while", one_angle_stride),
]
