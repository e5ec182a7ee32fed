import ropelab  # noqa: F401
import math

import numba
from numba import cuda, float32, uint64

TABLE_CAPACITY = 128


# ---------------- 04.1 rope_table_read ----------------
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
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit
def rope_table_read_precise(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    a = i << uint64(1)
    b = a | uint64(1)
    theta = float32(positions[token]) * inv_freq[pair]
    c = math.cos(theta)
    s = math.sin(theta)
    out[a] = x[a] * c - x[b] * s
    out[b] = x[a] * s + x[b] * c


# ---------------- 04.2 rope_shared_table ----------------
@cuda.jit(fastmath=True)
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    while t < n_pairs:
        table[t] = inv_freq[t]
        t += step
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * table[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_shared_table_fixed(x, out, positions, inv_freq, n_pairs, total_pairs):
    # copy with a fixed two-trip loop (capacity 128 = 2 x 64 threads), then early return
    table = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    np_ = numba.int64(n_pairs)
    for k in range(2):
        j = t + 64 * k
        if j < np_:
            table[j] = inv_freq[j]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    pos = float32(positions[token])
    f = table[pair]
    a = 2 * idx
    u = x[a]
    v = x[a + 1]
    s = math.sin(pos * f)
    c = math.cos(pos * f)
    out[a] = u * c - v * s
    out[a + 1] = u * s + v * c


# ---------------- 04.3 my_rope_cache ----------------
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
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit
def my_rope_cache_return(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - n_pairs * token
    row = uint64(positions[token])
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    c = cos_cache[row, pair]
    s = sin_cache[row, pair]
    y0 = x0 * c - x1 * s
    y1 = x1 * c + x0 * s
    out[2 * idx] = y0
    out[2 * idx + 1] = y1


# ---------------- 04.4 rope_freq_table_heads ----------------
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
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
        else:
            a = first + uint64(2) * j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


@cuda.jit(fastmath=True)
def rope_freq_table_heads_return(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                                 total_slots, step, partner):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_slots:
        return
    one = uint64(1)
    i = uint64(idx)
    head_row = i // half_dim
    j = i - head_row * half_dim
    first = (head_row * half_dim) << one
    if j >= n_pairs:
        k = first + (j << one)
        v0 = x[k]
        v1 = x[k + one]
        out[k] = v0
        out[k + one] = v1
        return
    token = head_row // heads
    a = first + j * step
    b = a + partner
    pos = float32(positions[token])
    f = inv_freq[j]
    x0 = x[a]
    x1 = x[b]
    s = math.sin(pos * f)
    c = math.cos(pos * f)
    out[a] = x0 * c - x1 * s
    out[b] = x1 * c + x0 * s


@cuda.jit
def rope_freq_table_heads_stride(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                                 total_slots, step, partner):
    # grid-stride over slots, accurate sin/cos
    idx = cuda.grid(1)
    gs = cuda.gridsize(1)
    while idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = uint64(2) * head_row * half_dim
        if j < n_pairs:
            token = head_row // heads
            a = first + j * step
            b = a + partner
            th = float32(positions[token]) * inv_freq[j]
            c = math.cos(th)
            s = math.sin(th)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]
        idx += gs


# ---------------- 04.5 launch_freq_table ----------------
def launch_freq_table(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total = tokens * heads * half_dim
    if interleave:
        step, partner = 2, 1
    else:
        step, partner = 1, n_pairs
    threads = 256
    blocks = (total + threads - 1) // threads
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs), total,
        uint64(step), uint64(partner))


def launch_freq_table_fit(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim >> 1
    n_pairs = inv_freq.shape[0]
    total = tokens * heads * half_dim
    threads = min(1024, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    step = uint64(2) if interleave else uint64(1)
    partner = uint64(1) if interleave else uint64(n_pairs)
    rope_freq_table_heads_return[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        numba.int64(total), step, partner)


def launch_freq_table_128(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = len(inv_freq)
    total = tokens * heads * half_dim
    blocks = -(-total // 128)
    args = (uint64(heads), uint64(half_dim), uint64(n_pairs), total,
            uint64(2 if interleave else 1), uint64(1 if interleave else n_pairs))
    rope_freq_table_heads_stride[blocks, 128](x, out, positions, inv_freq, *args)



@cuda.jit(fastmath=True)
def rope_table_read_stride(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    gs = cuda.gridsize(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        f = inv_freq[i - token * n_pairs]
        th = float32(positions[token]) * f
        c = math.cos(th)
        s = math.sin(th)
        u = x[2 * idx]
        v = x[2 * idx + 1]
        out[2 * idx] = u * c - v * s
        out[2 * idx + 1] = u * s + v * c
        idx += gs


@cuda.jit(fastmath=True)
def my_rope_cache_precheck(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    # cos and sin rows taken as 1-D views of the token's position
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        crow = cos_cache[positions[token]]
        srow = sin_cache[positions[token]]
        c = crow[pair]
        s = srow[pair]
        out[2 * idx] = x[2 * idx] * c - x[2 * idx + 1] * s
        out[2 * idx + 1] = x[2 * idx] * s + x[2 * idx + 1] * c

ENTRIES = [
    ("04.1", "grid1_uint_div", rope_table_read),
    ("04.1", "shift_or_index_precise", rope_table_read_precise),
    ("04.2", "while_copy_guard_after", rope_shared_table),
    ("04.2", "fixed_two_trip_copy_return", rope_shared_table_fixed),
    ("04.3", "grid1_2d_lookup", my_rope_cache),
    ("04.3", "return_uint_row", my_rope_cache_return),
    ("04.4", "if_else_copy", rope_freq_table_heads),
    ("04.4", "copy_early_return_shifts", rope_freq_table_heads_return),
    ("04.4", "grid_stride_precise", rope_freq_table_heads_stride),
    ("04.5", "b256", launch_freq_table),
    ("04.5", "fit_warps_cap1024", launch_freq_table_fit),
    ("04.5", "b128_tuple_args", launch_freq_table_128),
    ("04.1", "grid_stride", rope_table_read_stride),
    ("04.3", "row_views", my_rope_cache_precheck),
]
