"""Set F, notebook 04 (04_freq_table_cache.ipynb): steps 04.1 .. 04.5."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, int64, uint64

TABLE_CAPACITY = 128


# ---- 04.1: rope_table_read ----------------------------------------------------------------
@cuda.jit(fastmath=True)
def table_read_plain(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def table_read_gridstride(x, out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = inv_freq[pair] * float32(positions[token])
        k = i + i
        a = x[k]
        b = x[k + uint64(1)]
        sn = math.sin(theta)
        cs = math.cos(theta)
        out[k] = a * cs - b * sn
        out[k + uint64(1)] = a * sn + b * cs
        i += step


@cuda.jit(fastmath=True)
def table_read_return(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    row = u // n_pairs
    col = u - row * n_pairs
    pos = float32(positions[row])
    f = inv_freq[col]
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    angle = pos * f
    c = math.cos(angle)
    s = math.sin(angle)
    out[2 * idx + 1] = x1 * c + x0 * s
    out[2 * idx] = x0 * c - x1 * s


# ---- 04.2: rope_shared_table --------------------------------------------------------------
@cuda.jit(fastmath=True)
def shared_table_while(x, out, positions, inv_freq, n_pairs, total_pairs):
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
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def shared_table_range(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    n = int64(n_pairs)
    for k in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        table[k] = inv_freq[k]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    token = u // n_pairs
    pair = u - token * n_pairs
    f = table[pair]
    theta = f * float32(positions[token])
    a = x[2 * idx]
    b = x[2 * idx + 1]
    out[2 * idx] = a * math.cos(theta) - b * math.sin(theta)
    out[2 * idx + 1] = a * math.sin(theta) + b * math.cos(theta)


@cuda.jit(fastmath=True)
def shared_table_two_rounds(x, out, positions, inv_freq, n_pairs, total_pairs):
    # n_pairs <= 128: each thread copies at most entries t, t + B, t + 2B, ... (unrolled
    # twice for blocks of 64, then a loop for anything smaller)
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    b = uint64(cuda.blockDim.x)
    if t < n_pairs:
        table[t] = inv_freq[t]
    if t + b < n_pairs:
        table[t + b] = inv_freq[t + b]
    k = t + uint64(2) * b
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += b
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        j = i + i
        x0 = x[j]
        x1 = x[j + uint64(1)]
        out[j] = x0 * c - x1 * s
        out[j + uint64(1)] = x0 * s + x1 * c


# ---- 04.3: my_rope_cache ------------------------------------------------------------------
@cuda.jit(fastmath=True)
def cache_plain(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
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
def cache_row_view(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    token = u // n_pairs
    pair = u - token * n_pairs
    pos = positions[token]
    crow = cos_cache[pos]
    srow = sin_cache[pos]
    c = crow[pair]
    s = srow[pair]
    k = u + u
    a = x[k]
    b = x[k + uint64(1)]
    out[k] = a * c - b * s
    out[k + uint64(1)] = b * c + a * s


@cuda.jit(fastmath=True)
def cache_gridstride(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    end = uint64(total_pairs)
    while i < end:
        token = i // n_pairs
        pair = i - token * n_pairs
        pos = positions[token]
        x0 = x[uint64(2) * i]
        x1 = x[uint64(2) * i + uint64(1)]
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        out[uint64(2) * i] = x0 * c - x1 * s
        out[uint64(2) * i + uint64(1)] = x0 * s + x1 * c
        i += step


# ---- 04.4: rope_freq_table_heads ----------------------------------------------------------
@cuda.jit(fastmath=True)
def heads_plain(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
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
def heads_identity_rotation(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                            total_slots, step, partner):
    # one code path: a slot past the rotary part turns by the identity (c = 1, s = 0)
    idx = cuda.grid(1)
    if idx >= total_slots:
        return
    i = uint64(idx)
    head_row = i // half_dim
    j = i - head_row * half_dim
    first = (head_row * half_dim) << uint64(1)
    c = float32(1.0)
    s = float32(0.0)
    if j < n_pairs:
        a = first + j * step
        b = a + partner
        token = head_row // heads
        angle = float32(positions[token]) * inv_freq[j]
        c = math.cos(angle)
        s = math.sin(angle)
    else:
        a = first + j + j
        b = a + uint64(1)
    x0 = x[a]
    x1 = x[b]
    if j < n_pairs:
        out[a] = x0 * c - x1 * s
        out[b] = x0 * s + x1 * c
    else:
        out[a] = x0
        out[b] = x1


@cuda.jit(fastmath=True)
def heads_gridstride(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                     step, partner):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    end = uint64(total_slots)
    while i < end:
        head_row = i // half_dim
        j = i - head_row * half_dim
        base = uint64(2) * head_row * half_dim
        if j >= n_pairs:
            k = base + uint64(2) * j
            v0 = x[k]
            v1 = x[k + uint64(1)]
            out[k] = v0
            out[k + uint64(1)] = v1
        else:
            token = head_row // heads
            a = base + step * j
            theta = inv_freq[j] * float32(positions[token])
            sn = math.sin(theta)
            cs = math.cos(theta)
            u = x[a]
            v = x[a + partner]
            out[a] = u * cs - v * sn
            out[a + partner] = u * sn + v * cs
        i += stride


# ---- 04.5: launch_freq_table --------------------------------------------------------------
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
    heads_plain[blocks, threads](x, out, positions, inv_freq, uint64(heads), uint64(half_dim),
                                 uint64(n_pairs), total_slots, uint64(step), uint64(partner))


def launch_freq_table_fit(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = int(inv_freq.shape[0])
    total = tokens * heads * half_dim
    threads = min(1024, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    step = uint64(2 if interleave else 1)
    partner = uint64(1 if interleave else n_pairs)
    heads_identity_rotation[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        int64(total), step, partner)


def launch_freq_table_stride(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total = tokens * heads * half_dim
    threads = 128
    blocks = min(-(-total // threads), 4)
    step, partner = (2, 1) if interleave else (1, n_pairs)
    heads_gridstride[blocks, threads](x, out, positions, inv_freq, uint64(heads),
                                      uint64(half_dim), uint64(n_pairs), int64(total),
                                      uint64(step), uint64(partner))


ENTRIES = [
    ("04.1", "plain", table_read_plain),
    ("04.1", "gridstride", table_read_gridstride),
    ("04.1", "early_return", table_read_return),
    ("04.2", "while_copy", shared_table_while),
    ("04.2", "range_copy", shared_table_range),
    ("04.2", "unrolled_copy", shared_table_two_rounds),
    ("04.3", "plain", cache_plain),
    ("04.3", "row_view", cache_row_view),
    ("04.3", "gridstride", cache_gridstride),
    ("04.4", "plain_branch", heads_plain),
    ("04.4", "identity_rotation", heads_identity_rotation),
    ("04.4", "gridstride", heads_gridstride),
    ("04.5", "threads_256", launch_freq_table_256),
    ("04.5", "fit_1024", launch_freq_table_fit),
    ("04.5", "gridstride_capped", launch_freq_table_stride),
]
