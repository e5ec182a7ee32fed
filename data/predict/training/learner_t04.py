"""Training kernels for notebook 04's steps (frequency table, shared table, cos/sin cache,
heads and layouts, the launch).

Variants: how the shared table is staged (every thread, one warp, thread 0 alone), the cache
read by row or through a flat view, the half-split and interleaved layouts by branch or by
arithmetic, and for the launch step blocks of 32 to 1024 threads and a grid-stride loop.
"""

import math

from numba import cuda, float32, uint32, uint64

TABLE = 128  # pairs a row may have in step 04.2

# --- 04.1: the frequency table -----------------------------------------------------------


@cuda.jit(fastmath=True)
def table_two_divisions(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        angle = float32(positions[i // n_pairs]) * inv_freq[i % n_pairs]
        a = x[i + i]
        b = x[i + i + uint64(1)]
        out[i + i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + i + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)


@cuda.jit(fastmath=True)
def table_u32(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint32(idx)
        n = uint32(n_pairs)
        token = i // n
        pair = i - token * n
        e = i + i
        a = x[e]
        b = x[e + uint32(1)]
        angle = float32(positions[token]) * inv_freq[pair]
        out[e] = a * math.cos(angle) - b * math.sin(angle)
        out[e + uint32(1)] = a * math.sin(angle) + b * math.cos(angle)


@cuda.jit(fastmath=True)
def table_grid_stride(x, out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * inv_freq[pair]
        a = x[i + i]
        b = x[i + i + uint64(1)]
        out[i + i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + i + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)
        i += uint64(cuda.gridsize(1))


# --- 04.2: the table in shared memory ----------------------------------------------------


@cuda.jit(fastmath=True)
def shared_by_thread_zero(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE, float32)
    if cuda.threadIdx.x == 0:  # one thread copies the whole table
        for k in range(n_pairs):
            table[k] = inv_freq[k]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * table[pair]
        a = x[i + i]
        b = x[i + i + uint64(1)]
        out[i + i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + i + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)


@cuda.jit(fastmath=True)
def shared_by_first_warp(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE, float32)
    t = cuda.threadIdx.x
    if t < 32:
        k = t
        while k < n_pairs:
            table[k] = inv_freq[k]
            k += 32
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * table[pair]
        a = x[i + i]
        b = x[i + i + uint64(1)]
        out[i + i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + i + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)


@cuda.jit(fastmath=True)
def shared_loads_first(x, out, positions, inv_freq, n_pairs, total_pairs):
    # the pair's floats read before the table is staged: they travel while the block waits
    idx = cuda.grid(1)
    i = uint64(idx)
    live = idx < total_pairs
    a = float32(0.0)
    b = float32(0.0)
    if live:
        a = x[i + i]
        b = x[i + i + uint64(1)]
    table = cuda.shared.array(TABLE, float32)
    k = uint64(cuda.threadIdx.x)
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)
    cuda.syncthreads()
    if live:
        token = i // n_pairs
        angle = float32(positions[token]) * table[i - token * n_pairs]
        out[i + i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + i + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)


# --- 04.3: the cos/sin cache -------------------------------------------------------------


@cuda.jit(fastmath=True)
def cache_two_divisions(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        row = uint64(positions[i // n_pairs])
        pair = i % n_pairs
        a = x[i + i]
        b = x[i + i + uint64(1)]
        c = cos_cache[row, pair]
        s = sin_cache[row, pair]
        out[i + i] = a * c - b * s
        out[i + i + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def cache_signed_row(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        row = positions[token]  # int32: numba checks its sign for the wraparound
        c = cos_cache[row, pair]
        s = sin_cache[row, pair]
        a = x[i + i]
        b = x[i + i + uint64(1)]
        out[i + i] = a * c - b * s
        out[i + i + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def cache_grid_stride(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        row = uint64(positions[token])
        a = x[i + i]
        b = x[i + i + uint64(1)]
        c = cos_cache[row, pair]
        s = sin_cache[row, pair]
        out[i + i] = a * c - b * s
        out[i + i + uint64(1)] = a * s + b * c
        i += uint64(cuda.gridsize(1))


# --- 04.4: heads, both layouts, a partial rotation ---------------------------------------


@cuda.jit(fastmath=True)
def heads_layout_branch(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                        step, partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = head_row * (half_dim + half_dim)
        if j < n_pairs:
            if step == uint64(2):  # interleaved pairs
                a = first + j + j
                b = a + uint64(1)
            else:  # half-split
                a = first + j
                b = a + n_pairs
            angle = float32(positions[head_row // heads]) * inv_freq[j]
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * math.cos(angle) - x1 * math.sin(angle)
            out[b] = x0 * math.sin(angle) + x1 * math.cos(angle)
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


@cuda.jit(fastmath=True)
def heads_token_division_first(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                               total_slots, step, partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        per_token = heads * half_dim
        token = i // per_token
        rest = i - token * per_token
        head = rest // half_dim
        j = rest - head * half_dim
        first = (token * heads + head) * (half_dim + half_dim)
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            pos = float32(positions[token])
            x0 = x[a]
            x1 = x[b]
            angle = pos * inv_freq[j]
            out[a] = x0 * math.cos(angle) - x1 * math.sin(angle)
            out[b] = x0 * math.sin(angle) + x1 * math.cos(angle)
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


@cuda.jit(fastmath=True)
def heads_grid_stride(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                      step, partner):
    i = uint64(cuda.grid(1))
    while i < uint64(total_slots):
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = head_row * (half_dim + half_dim)
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            angle = float32(positions[head_row // heads]) * inv_freq[j]
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * math.cos(angle) - x1 * math.sin(angle)
            out[b] = x0 * math.sin(angle) + x1 * math.cos(angle)
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]
        i += uint64(cuda.gridsize(1))


# --- 04.5: the launch --------------------------------------------------------------------


@cuda.jit(fastmath=True)
def heads_kernel(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots, step,
                 partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = head_row * (half_dim + half_dim)
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            angle = float32(positions[head_row // heads]) * inv_freq[j]
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * math.cos(angle) - x1 * math.sin(angle)
            out[b] = x0 * math.sin(angle) + x1 * math.cos(angle)
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


def _heads_launch(threads, kernel=heads_kernel, cap=None):
    def launch(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
        half = head_dim // 2
        n_pairs = inv_freq.size
        total = tokens * heads * half
        step, partner = (2, 1) if interleave else (1, n_pairs)
        blocks = (total + threads - 1) // threads
        if cap is not None:
            blocks = min(blocks, cap)
        kernel[blocks, threads](x, out, positions, inv_freq, uint64(heads), uint64(half),
                                uint64(n_pairs), total, uint64(step), uint64(partner))
    launch.__name__ = f"launch_freq_table_{threads}" + ("" if cap is None else f"_cap{cap}")
    return launch


ENTRIES = [
    ("04.1", "two divisions", table_two_divisions),
    ("04.1", "32-bit index math", table_u32),
    ("04.1", "grid-stride loop", table_grid_stride),
    ("04.2", "thread 0 copies the table", shared_by_thread_zero),
    ("04.2", "the first warp copies it", shared_by_first_warp),
    ("04.2", "x read before staging", shared_loads_first),
    ("04.3", "two divisions", cache_two_divisions),
    ("04.3", "signed row index", cache_signed_row),
    ("04.3", "grid-stride loop", cache_grid_stride),
    ("04.4", "layout by branch", heads_layout_branch),
    ("04.4", "token first, then head", heads_token_division_first),
    ("04.4", "grid-stride loop", heads_grid_stride),
    *[("04.5", f"block {t}", _heads_launch(t)) for t in (32, 64, 256, 512, 1024)],
    ("04.5", "grid-stride 264 blocks of 256", _heads_launch(256, heads_grid_stride, cap=264)),
    ("04.5", "grid-stride 132 blocks of 1024", _heads_launch(1024, heads_grid_stride, cap=132)),
]
