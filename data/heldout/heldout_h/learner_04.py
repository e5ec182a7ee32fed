"""Notebook 04: frequency tables, shared table, cos/sin cache, heads."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, int64, uint64

TABLE_CAPACITY = 128


# ---------------------------------------------------------------- 04.1
@cuda.jit(fastmath=True)
def rope_table_read_plain(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[i + i]
        x1 = x[i + i + uint64(1)]
        out[i + i] = x0 * c - x1 * s
        out[i + i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_table_read_return(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    f = inv_freq[i - token * n_pairs]
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    theta = f * float32(positions[token])
    s = math.sin(theta)
    c = math.cos(theta)
    out[2 * idx + 1] = x1 * c + x0 * s
    out[2 * idx] = x0 * c - x1 * s


# ---------------------------------------------------------------- 04.2
@cuda.jit(fastmath=True)
def rope_shared_table_while(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    k = uint64(cuda.threadIdx.x)
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[uint64(2) * i]
        x1 = x[uint64(2) * i + uint64(1)]
        out[uint64(2) * i] = x0 * c - x1 * s
        out[uint64(2) * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_shared_table_twice(x, out, positions, inv_freq, n_pairs, total_pairs):
    # 64 threads, at most 128 pairs: each thread copies entries t and t + 64
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = cuda.threadIdx.x
    n = int64(n_pairs)
    if t < n:
        table[t] = inv_freq[t]
    if t + 64 < n:
        table[t + 64] = inv_freq[t + 64]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    token = u // n_pairs
    pair = u - token * n_pairs
    pos = float32(positions[token])
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    theta = pos * table[pair]
    c = math.cos(theta)
    s = math.sin(theta)
    out[2 * idx] = x0 * c - x1 * s
    out[2 * idx + 1] = x0 * s + x1 * c


# ---------------------------------------------------------------- 04.3
@cuda.jit(fastmath=True)
def my_rope_cache_plain(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        p = positions[token]
        c = cos_cache[p, pair]
        s = sin_cache[p, pair]
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_cache_loads_first(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    a = i + i
    x0 = x[a]
    x1 = x[a + uint64(1)]
    row = uint64(positions[token])
    s = sin_cache[row, pair]
    c = cos_cache[row, pair]
    out[a + uint64(1)] = x0 * s + x1 * c
    out[a] = x0 * c - x1 * s


# ---------------------------------------------------------------- 04.4
@cuda.jit(fastmath=True)
def freq_table_heads_plain(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
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
            a = first + uint64(2) * j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


@cuda.jit(fastmath=True)
def freq_table_heads_copy_first(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                                total_slots, step, partner):
    idx = cuda.grid(1)
    if idx >= total_slots:
        return
    one = uint64(1)
    i = uint64(idx)
    head_row = i // half_dim
    j = i - head_row * half_dim
    first = (head_row * half_dim) << one
    if j >= n_pairs:  # the unrotated tail of a partial rotation: copied as is
        a = first + (j << one)
        v0 = x[a]
        v1 = x[a + one]
        out[a] = v0
        out[a + one] = v1
        return
    token = head_row // heads
    a = first + j * step
    b = a + partner
    theta = inv_freq[j] * float32(positions[token])
    s = math.sin(theta)
    c = math.cos(theta)
    u = x[a]
    v = x[b]
    out[b] = u * s + v * c
    out[a] = u * c - v * s


# ---------------------------------------------------------------- 04.5
def launch_freq_table_256(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    if interleave:
        step, partner = 2, 1
    else:
        step, partner = 1, n_pairs
    threads = 256
    blocks = (total_slots + threads - 1) // threads
    freq_table_heads_plain[blocks, threads](
        x, out, positions, inv_freq, numba.uint64(heads), numba.uint64(half_dim),
        numba.uint64(n_pairs), numba.int64(total_slots), numba.uint64(step),
        numba.uint64(partner))


def launch_freq_table_per_head(x, out, positions, inv_freq, tokens, heads, head_dim,
                               interleave):
    half_dim = head_dim // 2
    n_pairs = int(inv_freq.shape[0])
    total_slots = tokens * heads * half_dim
    step = 2 if interleave else 1
    partner = 1 if interleave else n_pairs
    threads = min(1024, 32 * math.ceil(total_slots / 32))
    blocks = math.ceil(total_slots / threads)
    freq_table_heads_copy_first[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        int64(total_slots), uint64(step), uint64(partner))


ENTRIES = [
    ("04.1", "uint_div_guard", rope_table_read_plain),
    ("04.1", "early_return_reordered", rope_table_read_return),
    ("04.2", "strided_copy_while", rope_shared_table_while),
    ("04.2", "two_fixed_copies", rope_shared_table_twice),
    ("04.3", "cache_2d_index", my_rope_cache_plain),
    ("04.3", "x_loads_first", my_rope_cache_loads_first),
    ("04.4", "if_else_copy", freq_table_heads_plain),
    ("04.4", "copy_tail_return", freq_table_heads_copy_first),
    ("04.5", "blocks_256", launch_freq_table_256),
    ("04.5", "fit_1024", launch_freq_table_per_head),
]
