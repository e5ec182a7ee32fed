import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numba
from numba import cuda, float32, int64, uint64


# ---- 04.1 rope_table_read ----
@cuda.jit
def rope_table_read(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit
def rope_table_read_stride(x, out, positions, inv_freq, n_pairs, total_pairs):
    k = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    step = cuda.blockDim.x * cuda.gridDim.x
    while k < total_pairs:
        i = uint64(k)
        token = i // n_pairs
        f = inv_freq[i - token * n_pairs]
        p = positions[token]
        e = i + i
        a = x[e]
        b = x[e + uint64(1)]
        th = float32(p) * f
        s = math.sin(th)
        c = math.cos(th)
        out[e] = cuda.fma(a, c, -(b * s))
        out[e + uint64(1)] = cuda.fma(a, s, b * c)
        k += step


# ---- 04.2 rope_shared_table ----
@cuda.jit
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    k = cuda.threadIdx.x
    npairs = int64(n_pairs)
    while k < npairs:
        table[k] = inv_freq[k]
        k += cuda.blockDim.x
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit
def rope_shared_table_u(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    tid = uint64(cuda.threadIdx.x)
    nthr = uint64(cuda.blockDim.x)
    k = tid
    while k < n_pairs:
        table[k] = inv_freq[k]
        k = k + nthr
    cuda.syncthreads()
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    e = i * uint64(2)
    x0 = x[e]
    x1 = x[e + uint64(1)]
    token = i // n_pairs
    pos = positions[token]
    th = float32(pos) * table[i - token * n_pairs]
    c = math.cos(th)
    s = math.sin(th)
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x0 * s + x1 * c


# ---- 04.3 my_rope_cache ----
@cuda.jit
def my_rope_cache(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        p = positions[token]
        c = cos_cache[p, pair]
        s = sin_cache[p, pair]
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit
def my_rope_cache_ret(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    e = i + i
    x0 = x[e]
    x1 = x[e + uint64(1)]
    token = i // n_pairs
    pair = i - token * n_pairs
    p = positions[token]
    s = sin_cache[p, pair]
    c = cos_cache[p, pair]
    out[e + uint64(1)] = cuda.fma(x0, s, x1 * c)
    out[e] = cuda.fma(x0, c, -(x1 * s))


# ---- 04.4 rope_freq_table_heads ----
@cuda.jit
def rope_freq_table_heads(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                          step, partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            angle = float32(positions[token]) * inv_freq[j]
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
        else:
            k = first + uint64(2) * j
            out[k] = x[k]
            out[k + uint64(1)] = x[k + uint64(1)]


@cuda.jit
def rope_freq_table_heads_ret(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                              total_slots, step, partner):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_slots:
        return
    i = uint64(idx)
    head_row = i // half_dim
    j = i - head_row * half_dim
    first = (head_row * half_dim) << uint64(1)
    if j >= n_pairs:
        k = first + (j << uint64(1))
        v0 = x[k]
        v1 = x[k + uint64(1)]
        out[k] = v0
        out[k + uint64(1)] = v1
        return
    token = head_row // heads
    a = first + j * step
    x0 = x[a]
    x1 = x[a + partner]
    th = float32(positions[token]) * inv_freq[j]
    s = math.sin(th)
    c = math.cos(th)
    out[a] = cuda.fma(x0, c, -(x1 * s))
    out[a + partner] = cuda.fma(x1, c, x0 * s)


# ---- 04.5 launch_freq_table ----
def launch_freq_table(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total = tokens * heads * half_dim
    if interleave:
        step, partner = 2, 1
    else:
        step, partner = 1, n_pairs
    threads = 128
    blocks = (total + threads - 1) // threads
    U = numba.uint64
    rope_freq_table_heads[blocks, threads](x, out, positions, inv_freq, U(heads), U(half_dim),
                                           U(n_pairs), numba.int64(total), U(step), U(partner))


def launch_freq_table_warp(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = int(inv_freq.size)
    total = tokens * heads * half_dim
    step = 2 if interleave else 1
    partner = 1 if interleave else n_pairs
    threads = 32
    blocks = -(-total // threads)
    U = numba.uint64
    rope_freq_table_heads_ret[blocks, threads](x, out, positions, inv_freq, U(heads),
                                               U(half_dim), U(n_pairs), numba.int64(total),
                                               U(step), U(partner))


def launch_freq_table_1024(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = int(inv_freq.size)
    total = tokens * heads * half_dim
    threads = min(1024, 32 * ((total + 31) // 32))
    blocks = (total + threads - 1) // threads
    U = numba.uint64
    if interleave:
        rope_freq_table_heads[blocks, threads](x, out, positions, inv_freq, U(heads),
                                               U(half_dim), U(n_pairs), numba.int64(total),
                                               U(2), U(1))
    else:
        rope_freq_table_heads[blocks, threads](x, out, positions, inv_freq, U(heads),
                                               U(half_dim), U(n_pairs), numba.int64(total),
                                               U(1), U(n_pairs))


ENTRIES = [
    ("04.1", "grid1_guard", rope_table_read),
    ("04.1", "gridstride_fma", rope_table_read_stride),
    ("04.2", "shared_copy_loop_int", rope_shared_table),
    ("04.2", "shared_uint_early_return", rope_shared_table_u),
    ("04.3", "guard_cache2d", my_rope_cache),
    ("04.3", "early_return_loads_first_fma", my_rope_cache_ret),
    ("04.4", "if_else_copy", rope_freq_table_heads),
    ("04.4", "copy_early_return_fma", rope_freq_table_heads_ret),
    ("04.5", "block128", launch_freq_table),
    ("04.5", "block32_ret_kernel", launch_freq_table_warp),
    ("04.5", "block1024_capped", launch_freq_table_1024),
]
