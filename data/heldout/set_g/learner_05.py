"""Notebook 05: one angle per pair, strided slots with one pow, the launch, heads."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, uint64, int64


# ---------------- 05.1 one angle per pair
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
        x0 = x[2 * i]
        x1 = x[2 * i + uint64(1)]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_one_angle_explog(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    tok = u // n_pairs
    p = u - tok * n_pairs
    ang = float32(positions[tok]) * math.exp(float32(p) * exponent_step * math.log(base))
    sn = math.sin(ang)
    cs = math.cos(ang)
    e = u + u
    a = x[e]
    b = x[e + uint64(1)]
    out[e + uint64(1)] = a * sn + b * cs
    out[e] = a * cs - b * sn


@cuda.jit(fastmath=True)
def rope_one_angle_stride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    # grid-stride loop; one sin and one cos per pair
    idx = cuda.grid(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * math.pow(base, exponent_step * float32(pair))
        c = math.cos(theta)
        s = math.sin(theta)
        e = i * uint64(2)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        idx += cuda.gridsize(1)


# ---------------- 05.2 strided slots
@cuda.jit(fastmath=True)
def my_rope_strided(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                    stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        row = uint64(2) * token * n_pairs
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
            f = f * stride_ratio
            slot += stride


@cuda.jit(fastmath=True)
def my_rope_strided_unrolled(x, out, positions, n_pairs, stride, total_threads, base,
                             exponent_step, stride_ratio):
    # at most four slots per thread: four guarded copies, no loop
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    token = i // stride
    j = i - token * stride
    pos = float32(positions[token])
    f = math.pow(base, exponent_step * float32(j))
    row = token * (n_pairs + n_pairs)
    slot = j
    if slot < n_pairs:
        th = pos * f
        e = row + slot + slot
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * math.cos(th) - b * math.sin(th)
        out[e + uint64(1)] = a * math.sin(th) + b * math.cos(th)
    slot += stride
    f *= stride_ratio
    if slot < n_pairs:
        th = pos * f
        e = row + slot + slot
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * math.cos(th) - b * math.sin(th)
        out[e + uint64(1)] = a * math.sin(th) + b * math.cos(th)
    slot += stride
    f *= stride_ratio
    if slot < n_pairs:
        th = pos * f
        e = row + slot + slot
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * math.cos(th) - b * math.sin(th)
        out[e + uint64(1)] = a * math.sin(th) + b * math.cos(th)
    slot += stride
    f *= stride_ratio
    if slot < n_pairs:
        th = pos * f
        e = row + slot + slot
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * math.cos(th) - b * math.sin(th)
        out[e + uint64(1)] = a * math.sin(th) + b * math.cos(th)


@cuda.jit(fastmath=True)
def my_rope_strided_pointer(x, out, positions, n_pairs, stride, total_threads, base,
                            exponent_step, stride_ratio):
    # element pointer and end pointer instead of the slot counter
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        pos = float32(positions[token])
        ang_step_f = math.pow(base, exponent_step * float32(j))
        row_end = (token + uint64(1)) * (n_pairs + n_pairs)
        e = token * (n_pairs + n_pairs) + j + j
        jump = stride + stride
        while e < row_end:
            th = pos * ang_step_f
            s = math.sin(th)
            c = math.cos(th)
            a = x[e]
            b = x[e + uint64(1)]
            out[e + uint64(1)] = a * s + b * c
            out[e] = a * c - b * s
            ang_step_f *= stride_ratio
            e += jump


# ---------------- 05.3 launch
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


def launch_strided_64(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = math.ceil(n_pairs / 4)
    total_threads = tokens * stride
    es = -2.0 / hidden
    ratio = math.pow(base, es * stride)
    blocks = math.ceil(total_threads / 64)
    my_rope_strided_unrolled[blocks, 64](
        x, out, positions, uint64(n_pairs), uint64(stride), int64(total_threads),
        float32(base), float32(es), float32(ratio))


def launch_strided_fit(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total = tokens * stride
    threads = min(1024, 32 * (-(-total // 32)))
    blocks = -(-total // threads)
    ratio = float(base) ** (-2.0 * stride / hidden)
    my_rope_strided_pointer[blocks, threads](
        x, out, positions, uint64(n_pairs), uint64(stride), total,
        float32(base), float32(-2.0 / hidden), float32(ratio))


# ---------------- 05.4 heads and layouts
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
            theta = pos * f
            c = math.cos(theta)
            s = math.sin(theta)
            a = first + slot * step
            b = a + partner
            xa = x[a]
            xb = x[b]
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
            f *= stride_ratio
            slot += stride


@cuda.jit(fastmath=True)
def rope_pair_sincos_heads_ptr(x, out, positions, heads, half_dim, stride, total_threads,
                               step, partner, base, exponent_step, stride_ratio):
    # early return, element pointer advanced by stride * step, loads before stores
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    head_row = i // stride
    j = i - head_row * stride
    token = head_row // heads
    first = head_row * (half_dim + half_dim)
    a = first + j * step
    jump = stride * step
    f = math.pow(base, exponent_step * float32(j))
    pos = float32(positions[token])
    slot = j
    while slot < half_dim:
        xa = x[a]
        xb = x[a + partner]
        ang = f * pos
        sn = math.sin(ang)
        cs = math.cos(ang)
        out[a + partner] = xa * sn + xb * cs
        out[a] = xa * cs - xb * sn
        f = f * stride_ratio
        a += jump
        slot += stride


ENTRIES = [
    ("05.1", "pow", rope_one_angle),
    ("05.1", "exp_log", rope_one_angle_explog),
    ("05.1", "grid_stride", rope_one_angle_stride),
    ("05.2", "while_slots", my_rope_strided),
    ("05.2", "unrolled_four", my_rope_strided_unrolled),
    ("05.2", "element_pointer", my_rope_strided_pointer),
    ("05.3", "blocks256", launch_strided),
    ("05.3", "blocks64_unrolled_kernel", launch_strided_64),
    ("05.3", "fit_upto1024_pointer_kernel", launch_strided_fit),
    ("05.4", "while_slots", rope_pair_sincos_heads),
    ("05.4", "pointer_return", rope_pair_sincos_heads_ptr),
]
