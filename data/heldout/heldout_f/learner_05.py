"""Set F, notebook 05 (05_pair_sincos.ipynb): steps 05.1 .. 05.4."""
import ropelab  # noqa: F401

import math

import numpy as np
from numba import cuda, float32, int64, uint64


# ---- 05.1: rope_one_angle -----------------------------------------------------------------
@cuda.jit(fastmath=True)
def one_angle_plain(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def one_angle_gridstride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    end = uint64(total_pairs)
    while i < end:
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * math.pow(base, float32(pair) * exponent_step)
        sn = math.sin(theta)
        cs = math.cos(theta)
        k = i + i
        a = x[k]
        b = x[k + uint64(1)]
        out[k] = a * cs - b * sn
        out[k + uint64(1)] = a * sn + b * cs
        i += step


@cuda.jit(fastmath=True)
def one_angle_explog(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    row = u // n_pairs
    p = u - row * n_pairs
    # base ** e = exp(e ln base)
    f = math.exp(exponent_step * float32(p) * math.log(base))
    angle = f * float32(positions[row])
    c = math.cos(angle)
    s = math.sin(angle)
    j = u << uint64(1)
    a = x[j]
    b = x[j + uint64(1)]
    out[j + uint64(1)] = a * s + b * c
    out[j] = a * c - b * s


# ---- 05.2: my_rope_strided ----------------------------------------------------------------
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
        row = uint64(2) * token * n_pairs
        while j < n_pairs:
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            k = row + uint64(2) * j
            x0 = x[k]
            x1 = x[k + uint64(1)]
            out[k] = x0 * c - x1 * s
            out[k + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def strided_unrolled4(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                      stride_ratio):
    # at most four slots a thread (stride = ceil(n_pairs / 4)): written out, no loop
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    token = i // stride
    j = i - token * stride
    pos = float32(positions[token])
    row = (token * n_pairs) << uint64(1)
    f = math.pow(base, exponent_step * float32(j))
    if j < n_pairs:
        k = row + j + j
        a = pos * f
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[k]
        x1 = x[k + uint64(1)]
        out[k] = x0 * c - x1 * s
        out[k + uint64(1)] = x0 * s + x1 * c
    j += stride
    f *= stride_ratio
    if j < n_pairs:
        k = row + j + j
        a = pos * f
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[k]
        x1 = x[k + uint64(1)]
        out[k] = x0 * c - x1 * s
        out[k + uint64(1)] = x0 * s + x1 * c
    j += stride
    f *= stride_ratio
    if j < n_pairs:
        k = row + j + j
        a = pos * f
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[k]
        x1 = x[k + uint64(1)]
        out[k] = x0 * c - x1 * s
        out[k + uint64(1)] = x0 * s + x1 * c
    j += stride
    f *= stride_ratio
    if j < n_pairs:
        k = row + j + j
        a = pos * f
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[k]
        x1 = x[k + uint64(1)]
        out[k] = x0 * c - x1 * s
        out[k + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def strided_slot_counter(x, out, positions, n_pairs, stride, total_threads, base,
                         exponent_step, stride_ratio):
    # the angle itself is carried: angle_{k+1} = angle_k * ratio (pos * f * r)
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        slot = i - token * stride
        angle = float32(positions[token]) * math.pow(base, exponent_step * float32(slot))
        first = token * n_pairs
        for _ in range(4):
            if slot < n_pairs:
                k = uint64(2) * (first + slot)
                c = math.cos(angle)
                s = math.sin(angle)
                x0 = x[k]
                x1 = x[k + uint64(1)]
                out[k] = x0 * c - x1 * s
                out[k + uint64(1)] = x0 * s + x1 * c
            slot += stride
            angle *= stride_ratio


# ---- 05.3: launch_strided -----------------------------------------------------------------
def launch_strided_256(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)
    threads = 256
    blocks = (total_threads + threads - 1) // threads
    strided_while[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                   total_threads, float32(base), float32(exponent_step),
                                   float32(stride_ratio))


def launch_strided_64(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = math.ceil(n_pairs / 4)
    total = tokens * stride
    step = np.float64(-2.0) / np.float64(hidden)
    ratio = np.float32(np.power(np.float64(base), step * stride))
    blocks = -(-total // 64)
    strided_unrolled4[blocks, 64](x, out, positions, uint64(n_pairs), uint64(stride),
                                  int64(total), float32(base), float32(step), float32(ratio))


def launch_strided_fit(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total = tokens * stride
    threads = min(1024, 32 * -(-total // 32))
    blocks = -(-total // threads)
    e = -2.0 / hidden
    strided_slot_counter[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                          int64(total), float32(base), float32(e),
                                          float32(math.pow(base, e * stride)))


# ---- 05.4: rope_pair_sincos_heads ---------------------------------------------------------
@cuda.jit(fastmath=True)
def pair_sincos_heads_while(x, out, positions, heads, half_dim, stride, total_threads, step,
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
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def pair_sincos_heads_fixed4(x, out, positions, heads, half_dim, stride, total_threads, step,
                             partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    u = uint64(idx)
    hr = u // stride
    j = u - hr * stride
    token = hr // heads
    head_start = (hr * half_dim) << uint64(1)
    pos = float32(positions[token])
    f = math.pow(base, float32(j) * exponent_step)
    for _ in range(4):
        if j < half_dim:
            a = head_start + step * j
            u0 = x[a]
            u1 = x[a + partner]
            th = f * pos
            sn = math.sin(th)
            cs = math.cos(th)
            out[a] = u0 * cs - u1 * sn
            out[a + partner] = u0 * sn + u1 * cs
        f *= stride_ratio
        j += stride


@cuda.jit(fastmath=True)
def pair_sincos_heads_gridstride(x, out, positions, heads, half_dim, stride, total_threads,
                                 step, partner, base, exponent_step, stride_ratio):
    i = uint64(cuda.grid(1))
    gs = uint64(cuda.gridsize(1))
    end = uint64(total_threads)
    while i < end:
        head_row = i // stride
        j = i - head_row * stride
        first = uint64(2) * head_row * half_dim
        pos = float32(positions[head_row // heads])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            angle = pos * f
            x0 = x[a]
            x1 = x[a + partner]
            c = math.cos(angle)
            s = math.sin(angle)
            out[a] = x0 * c - x1 * s
            out[a + partner] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride
        i += gs


ENTRIES = [
    ("05.1", "plain", one_angle_plain),
    ("05.1", "gridstride", one_angle_gridstride),
    ("05.1", "exp_log", one_angle_explog),
    ("05.2", "while_loop", strided_while),
    ("05.2", "unrolled_four", strided_unrolled4),
    ("05.2", "carried_angle", strided_slot_counter),
    ("05.3", "threads_256", launch_strided_256),
    ("05.3", "numpy_host_64", launch_strided_64),
    ("05.3", "fit_1024", launch_strided_fit),
    ("05.4", "while_loop", pair_sincos_heads_while),
    ("05.4", "fixed_four", pair_sincos_heads_fixed4),
    ("05.4", "gridstride", pair_sincos_heads_gridstride),
]
