"""Notebook 04: frequency table, shared table, cos/sin cache, heads variant, its launch."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, uint64, int64

TABLE_CAPACITY = 128


# ---------------- 04.1 table read
@cuda.jit(fastmath=True)
def rope_table_read(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[2 * i]
        x1 = x[2 * i + uint64(1)]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_table_read_signed(x, out, positions, inv_freq, n_pairs, total_pairs):
    # signed index math is allowed here; only pow and float64 are gated
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    np_ = int64(n_pairs)
    token = idx // np_
    pair = idx - token * np_
    f = inv_freq[pair]
    theta = f * float32(positions[token])
    lo = 2 * idx
    a = x[lo]
    b = x[lo + 1]
    s = math.sin(theta)
    c = math.cos(theta)
    out[lo + 1] = a * s + b * c
    out[lo] = a * c - b * s


# ---------------- 04.2 shared table
@cuda.jit(fastmath=True)
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    while t < n_pairs:
        table[t] = inv_freq[t]
        t += uint64(cuda.blockDim.x)
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * table[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[2 * i]
        x1 = x[2 * i + uint64(1)]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_shared_table_fixed(x, out, positions, inv_freq, n_pairs, total_pairs):
    # two fixed copy slots per thread (64 threads x 2 = 128 = capacity)
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    if t < n_pairs:
        table[t] = inv_freq[t]
    if t + uint64(64) < n_pairs:
        table[t + uint64(64)] = inv_freq[t + uint64(64)]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    pos = float32(positions[token])
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    th = pos * table[pair]
    out[e] = a * math.cos(th) - b * math.sin(th)
    out[e + uint64(1)] = a * math.sin(th) + b * math.cos(th)


# ---------------- 04.3 cos/sin cache
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
        x0 = x[2 * i]
        x1 = x[2 * i + uint64(1)]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def my_rope_cache_flat(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    # read the caches through a flat row offset into the 2-D arrays
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    row = uint64(positions[token])
    crow = cos_cache[row]
    srow = sin_cache[row]
    c = crow[pair]
    s = srow[pair]
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    out[e + uint64(1)] = a * s + b * c
    out[e] = a * c - b * s


# ---------------- 04.4 heads, layouts, partial rotation
@cuda.jit(fastmath=True)
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
            theta = float32(positions[token]) * inv_freq[j]
            c = math.cos(theta)
            s = math.sin(theta)
            xa = x[a]
            xb = x[b]
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
        else:
            k = first + uint64(2) * j
            out[k] = x[k]
            out[k + uint64(1)] = x[k + uint64(1)]


@cuda.jit(fastmath=True)
def rope_freq_table_heads_stride(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                                 total_slots, step, partner):
    # grid-stride loop, early `continue` for the pass-through slots
    idx = cuda.grid(1)
    gs = cuda.gridsize(1)
    while idx < total_slots:
        i = uint64(idx)
        idx += gs
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = (head_row * half_dim) << uint64(1)
        if j >= n_pairs:
            k = first + j + j
            v0 = x[k]
            v1 = x[k + uint64(1)]
            out[k] = v0
            out[k + uint64(1)] = v1
            continue
        token = head_row // heads
        a = first + j * step
        b = a + partner
        ang = inv_freq[j] * float32(positions[token])
        sn = math.sin(ang)
        cs = math.cos(ang)
        xa = x[a]
        xb = x[b]
        out[b] = xa * sn + xb * cs
        out[a] = xa * cs - xb * sn


# ---------------- 04.5 launch
def launch_freq_table(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    n_pairs = inv_freq.size
    half_dim = head_dim // 2
    total = tokens * heads * half_dim
    if interleave:
        step, partner = 2, 1
    else:
        step, partner = 1, n_pairs
    threads = 256
    blocks = (total + threads - 1) // threads
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total, uint64(step), uint64(partner))


def launch_freq_table_64(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    n_pairs = inv_freq.shape[0]
    half_dim = head_dim // 2
    total_slots = tokens * heads * half_dim
    step = uint64(2 if interleave else 1)
    partner = uint64(1 if interleave else n_pairs)
    blocks = math.ceil(total_slots / 64)
    rope_freq_table_heads_stride[blocks, 64](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        int64(total_slots), step, partner)


def launch_freq_table_max(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    total = tokens * heads * half_dim
    threads = min(1024, -(-total // 32) * 32)
    blocks = -(-total // threads)
    n_pairs = inv_freq.size
    args = (uint64(2), uint64(1)) if interleave else (uint64(1), uint64(n_pairs))
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total, *args)


ENTRIES = [
    ("04.1", "unsigned_div", rope_table_read),
    ("04.1", "signed_int64", rope_table_read_signed),
    ("04.2", "block_stride_copy", rope_shared_table),
    ("04.2", "two_fixed_copies", rope_shared_table_fixed),
    ("04.3", "index_2d", my_rope_cache),
    ("04.3", "row_views", my_rope_cache_flat),
    ("04.4", "plain", rope_freq_table_heads),
    ("04.4", "grid_stride_continue", rope_freq_table_heads_stride),
    ("04.5", "blocks256", launch_freq_table),
    ("04.5", "blocks64_stride_kernel", launch_freq_table_64),
    ("04.5", "fit_upto1024", launch_freq_table_max),
]
