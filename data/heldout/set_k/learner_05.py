import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numba
from numba import cuda, float32, int64, uint64


# ---- 05.1 rope_one_angle ----
@cuda.jit
def rope_one_angle(x, out, positions, n_pairs, total_pairs, base, exponent_step):
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


@cuda.jit
def rope_one_angle_ret(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    e = i << uint64(1)
    a = x[e]
    b = x[e + uint64(1)]
    token = i // n_pairs
    pos = positions[token]
    pair = i - token * n_pairs
    th = float32(pos) * math.exp(exponent_step * float32(pair) * math.log(base))
    s = math.sin(th)
    c = math.cos(th)
    out[e] = cuda.fma(a, c, -(b * s))
    out[e + uint64(1)] = cuda.fma(b, c, a * s)


# ---- 05.2 my_rope_strided ----
@cuda.jit
def my_rope_strided(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                    stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        row = i // stride
        j = i - row * stride
        pos = float32(positions[row])
        f = math.pow(base, exponent_step * float32(j))
        e0 = row * n_pairs * uint64(2)
        slot = j
        while slot < n_pairs:
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            e = e0 + slot * uint64(2)
            x0 = x[e]
            x1 = x[e + uint64(1)]
            out[e] = x0 * c - x1 * s
            out[e + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            slot += stride


@cuda.jit
def my_rope_strided_unroll(x, out, positions, n_pairs, stride, total_threads, base,
                           exponent_step, stride_ratio):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_threads:
        return
    i = uint64(idx)
    row = i // stride
    j = i - row * stride
    pos = float32(positions[row])
    f = math.pow(base, exponent_step * float32(j))
    rowstart = row * n_pairs
    for k in range(4):
        slot = j + uint64(k) * stride
        if slot < n_pairs:
            e = (rowstart + slot) * uint64(2)
            x0 = x[e]
            x1 = x[e + uint64(1)]
            th = pos * f
            c = math.cos(th)
            s = math.sin(th)
            out[e] = cuda.fma(x0, c, -x1 * s)
            out[e + uint64(1)] = cuda.fma(x0, s, x1 * c)
        f *= stride_ratio


@cuda.jit
def my_rope_strided_signed(x, out, positions, n_pairs, stride, total_threads, base,
                           exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    u = uint64(idx)
    row = u // stride
    j = int64(u - row * stride)
    npairs = int64(n_pairs)
    st = int64(stride)
    base_e = int64(row) * npairs * 2
    pos = float32(positions[row])
    f = math.pow(base, exponent_step * float32(j))
    while j < npairs:
        e = base_e + 2 * j
        th = pos * f
        c = math.cos(th)
        s = math.sin(th)
        out[e] = x[e] * c - x[e + 1] * s
        out[e + 1] = x[e] * s + x[e + 1] * c
        f = f * stride_ratio
        j += st


# ---- 05.3 launch_strided ----
def launch_strided(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total = tokens * stride
    exponent_step = -2.0 / hidden
    ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = (total + threads - 1) // threads
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                     int64(total), float32(base), float32(exponent_step),
                                     float32(ratio))


def launch_strided_256(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total = tokens * stride
    es = -2.0 / hidden
    threads = 256 if total >= 256 else 32 * ((total + 31) // 32)
    blocks = -(-total // threads)
    my_rope_strided_unroll[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                            int64(total), float32(base), float32(es),
                                            float32(math.pow(base, es * stride)))


# ---- 05.4 rope_pair_sincos_heads ----
@cuda.jit
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
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f = f * stride_ratio
            slot += stride


@cuda.jit
def rope_pair_sincos_heads_ret(x, out, positions, heads, half_dim, stride, total_threads, step,
                               partner, base, exponent_step, stride_ratio):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_threads:
        return
    i = uint64(idx)
    head_row = i // stride
    j = i - head_row * stride
    first = (head_row * half_dim) << uint64(1)
    pos = float32(positions[head_row // heads])
    f = math.pow(base, exponent_step * float32(j))
    a = first + j * step
    jump = stride * step
    slot = j
    while slot < half_dim:
        x0 = x[a]
        x1 = x[a + partner]
        th = pos * f
        s = math.sin(th)
        c = math.cos(th)
        out[a] = cuda.fma(x0, c, -(x1 * s))
        out[a + partner] = cuda.fma(x1, c, x0 * s)
        f *= stride_ratio
        slot += stride
        a += jump


def launch_strided_1024(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total = tokens * stride
    es = -2.0 / hidden
    threads = min(1024, ((total + 31) // 32) * 32)
    blocks = (total + threads - 1) // threads
    my_rope_strided_signed[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                            int64(total), float32(base), float32(es),
                                            float32(base ** (es * stride)))


ENTRIES = [
    ("05.1", "grid1_pow", rope_one_angle),
    ("05.1", "exp_log_fma_early_return", rope_one_angle_ret),
    ("05.2", "while_slots", my_rope_strided),
    ("05.2", "unrolled4_fma", my_rope_strided_unroll),
    ("05.2", "int64_slots_reload_x", my_rope_strided_signed),
    ("05.3", "block64", launch_strided),
    ("05.3", "block1024_signed_kernel", launch_strided_1024),
    ("05.3", "block256_unrolled", launch_strided_256),
    ("05.4", "while_slots", rope_pair_sincos_heads),
    ("05.4", "pointer_bump_fma_ret", rope_pair_sincos_heads_ret),
]
