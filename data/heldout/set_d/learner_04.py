"""Notebook 04 (freq table / cache), steps 04.1 .. 04.5."""
import math

import numba
from numba import cuda, float32, uint64

TABLE_CAPACITY = 128


# ---------------------------------------------------------------- 04.1
@cuda.jit(fastmath=True)
def rope_table_read(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_table_read_loads_first(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    f = inv_freq[pair]
    p = float32(positions[token])
    s = math.sin(p * f)
    c = math.cos(p * f)
    out[2 * idx] = x0 * c - x1 * s
    out[2 * idx + 1] = x1 * c + x0 * s


# ---------------------------------------------------------------- 04.2
@cuda.jit(fastmath=True)
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
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
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_shared_table_two_copies(x, out, positions, inv_freq, n_pairs, total_pairs):
    # 64 threads, at most 128 entries: each thread copies entries t and t + 64
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    nb = uint64(cuda.blockDim.x)
    if t < n_pairs:
        table[t] = inv_freq[t]
    if t + nb < n_pairs:
        table[t + nb] = inv_freq[t + nb]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    x0 = x[i + i]
    x1 = x[i + i + uint64(1)]
    token = i // n_pairs
    pair = i - token * n_pairs
    angle = float32(positions[token]) * table[pair]
    c = math.cos(angle)
    s = math.sin(angle)
    out[i + i] = x0 * c - x1 * s
    out[i + i + uint64(1)] = x0 * s + x1 * c


# ---------------------------------------------------------------- 04.3
@cuda.jit(fastmath=True)
def my_rope_cache(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        pos = positions[token]
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_cache_loads_first(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    e = i + i
    x0 = x[e]
    x1 = x[e + uint64(1)]
    token = i // n_pairs
    pair = i - token * n_pairs
    row = uint64(positions[token])
    s = sin_cache[row, pair]
    c = cos_cache[row, pair]
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x1 * c + x0 * s


# ---------------------------------------------------------------- 04.4
@cuda.jit(fastmath=True)
def rope_freq_table_heads(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                          step, partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = uint64(2) * head_row * half_dim
        if j < n_pairs:
            token = head_row // heads
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
            k = first + j + j
            out[k] = x[k]
            out[k + uint64(1)] = x[k + uint64(1)]


@cuda.jit(fastmath=True)
def rope_freq_table_heads_loads_first(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                                      total_slots, step, partner):
    idx = cuda.grid(1)
    if idx >= total_slots:
        return
    i = uint64(idx)
    head_row = i // half_dim
    j = i - head_row * half_dim
    first = (head_row * half_dim) << uint64(1)
    rotate = j < n_pairs
    if rotate:
        a = first + j * step
        b = a + partner
    else:
        a = first + j + j
        b = a + uint64(1)
    x0 = x[a]
    x1 = x[b]
    if rotate:
        token = head_row // heads
        angle = float32(positions[token]) * inv_freq[j]
        c = math.cos(angle)
        s = math.sin(angle)
        out[a] = x0 * c - x1 * s
        out[b] = x0 * s + x1 * c
    else:
        out[a] = x0
        out[b] = x1


# ---------------------------------------------------------------- 04.5
def launch_freq_table(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    if interleave:
        step, partner = 2, 1
    else:
        step, partner = 1, n_pairs
    threads = 256
    blocks = (total_slots + threads - 1) // threads
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total_slots, uint64(step), uint64(partner))


def launch_freq_table_64(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = int(inv_freq.shape[0])
    total_slots = tokens * heads * half_dim
    step = 2 if interleave else 1
    partner = 1 if interleave else n_pairs
    threads = 64
    blocks = -(-total_slots // threads)
    rope_freq_table_heads_loads_first[blocks, threads](
        x, out, positions, inv_freq, numba.uint64(heads), numba.uint64(half_dim),
        numba.uint64(n_pairs), numba.int64(total_slots), numba.uint64(step),
        numba.uint64(partner))


def launch_freq_table_1024(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    threads = min(1024, 32 * ((total_slots + 31) // 32))
    blocks = (total_slots + threads - 1) // threads
    step, partner = (2, 1) if interleave else (1, n_pairs)
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total_slots, uint64(step), uint64(partner))


ENTRIES = [
    ("04.1", "if_guard", rope_table_read),
    ("04.1", "loads_first_return", rope_table_read_loads_first),
    ("04.2", "while_copy", rope_shared_table),
    ("04.2", "two_guarded_copies", rope_shared_table_two_copies),
    ("04.3", "if_guard", my_rope_cache),
    ("04.3", "loads_first_return", my_rope_cache_loads_first),
    ("04.4", "branch_rotate_copy", rope_freq_table_heads),
    ("04.4", "loads_first_select", rope_freq_table_heads_loads_first),
    ("04.5", "blocks_256", launch_freq_table),
    ("04.5", "blocks_64_loads_first", launch_freq_table_64),
    ("04.5", "up_to_1024", launch_freq_table_1024),
]
