"""Notebook 04 (freq table, cache), steps 04.1 .. 04.5."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numba
from numba import cuda, float32, uint64

TABLE_CAPACITY = 128


# ---------------------------------------------------------------- 04.1 rope_table_read
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
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def table_read_stride(x, out, positions, inv_freq, n_pairs, total_pairs):
    # grid-stride loop, unsigned throughout
    i = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    while i < total:
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i << uint64(1)
        a = x[e]
        b = x[e + uint64(1)]
        theta = float32(positions[token]) * inv_freq[pair]
        s = math.sin(theta)
        c = math.cos(theta)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        i += step


@cuda.jit(fastmath=True)
def table_read_return(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    f = inv_freq[i - n_pairs * token]
    p = float32(positions[token])
    c = math.cos(p * f)
    s = math.sin(p * f)
    j = i + i
    x0 = x[j]
    x1 = x[j + uint64(1)]
    out[j + uint64(1)] = x1 * c + x0 * s
    out[j] = x0 * c - x1 * s


# ---------------------------------------------------------------- 04.2 rope_shared_table
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
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def shared_table_range(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    n = int(n_pairs)
    for k in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        table[k] = inv_freq[k]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return  # after the barrier: every thread helped with the copy
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    th = float32(positions[token]) * table[pair]
    out[e] = a * math.cos(th) - b * math.sin(th)
    out[e + uint64(1)] = a * math.sin(th) + b * math.cos(th)


@cuda.jit(fastmath=True)
def shared_table_two_halves(x, out, positions, inv_freq, n_pairs, total_pairs):
    # the capacity is 128 entries and a block has 64 threads: each thread copies at most
    # two entries, t and t + 64, unrolled
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    bd = uint64(cuda.blockDim.x)
    if t < n_pairs:
        table[t] = inv_freq[t]
    if t + bd < n_pairs:
        table[t + bd] = inv_freq[t + bd]
    k = t + bd + bd
    while k < n_pairs:  # any entries left for blocks narrower than 64
        table[k] = inv_freq[k]
        k += bd
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        f = table[i - token * n_pairs]
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[i * uint64(2)]
        x1 = x[i * uint64(2) + uint64(1)]
        out[i * uint64(2)] = x0 * c - x1 * s
        out[i * uint64(2) + uint64(1)] = x0 * s + x1 * c


# ---------------------------------------------------------------- 04.3 my_rope_cache
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
        x0 = x[2 * i]
        x1 = x[2 * i + 1]
        out[2 * i] = x0 * c - x1 * s
        out[2 * i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def cache_loads_first_return(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - n_pairs * token
    row = uint64(positions[token])
    e = i << uint64(1)
    a = x[e]
    b = x[e + uint64(1)]
    c = cos_cache[row, pair]
    s = sin_cache[row, pair]
    out[e] = a * c - b * s
    out[e + uint64(1)] = b * c + a * s


@cuda.jit(fastmath=True)
def cache_stride(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        pos = positions[token]
        x0 = x[i + i]
        x1 = x[i + i + uint64(1)]
        out[i + i] = x0 * cos_cache[pos, pair] - x1 * sin_cache[pos, pair]
        out[i + i + uint64(1)] = x0 * sin_cache[pos, pair] + x1 * cos_cache[pos, pair]
        idx += cuda.gridsize(1)


# ---------------------------------------------------------------- 04.4 rope_freq_table_heads
@cuda.jit(fastmath=True)
def heads_plain(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots, step,
                partner):
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
            xa = x[a]
            xb = x[b]
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
        else:
            e = first + uint64(2) * j
            out[e] = x[e]
            out[e + uint64(1)] = x[e + uint64(1)]


@cuda.jit(fastmath=True)
def heads_return_copy_first(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                            total_slots, step, partner):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_slots:
        return
    i = uint64(idx)
    head_row = i // half_dim
    j = i - half_dim * head_row
    first = (head_row * half_dim) << uint64(1)
    if j >= n_pairs:
        # the unrotated tail: copy both floats
        e = first + j + j
        v0 = x[e]
        v1 = x[e + uint64(1)]
        out[e] = v0
        out[e + uint64(1)] = v1
        return
    a = first + step * j
    b = a + partner
    v0 = x[a]
    v1 = x[b]
    theta = float32(positions[head_row // heads]) * inv_freq[j]
    c = math.cos(theta)
    s = math.sin(theta)
    out[b] = v0 * s + v1 * c
    out[a] = v0 * c - v1 * s


@cuda.jit(fastmath=True)
def heads_branchless_angle(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                           total_slots, step, partner):
    # the tail is a rotation by angle 0 at floats 2j and 2j + 1: one code path, the
    # indices and the angle chosen per slot
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        a = first + j + j
        b = a + uint64(1)
        c = float32(1.0)
        s = float32(0.0)
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            th = float32(positions[token]) * inv_freq[j]
            c = math.cos(th)
            s = math.sin(th)
        xa = x[a]
        xb = x[b]
        out[a] = xa * c - xb * s
        out[b] = xa * s + xb * c


# ---------------------------------------------------------------- 04.5 launch_freq_table
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
    heads_plain[blocks, threads](x, out, positions, inv_freq, numba.uint64(heads),
                                 numba.uint64(half_dim), numba.uint64(n_pairs), total_slots,
                                 numba.uint64(step), numba.uint64(partner))


def launch_freq_table_64(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half = head_dim >> 1
    pairs = inv_freq.shape[0]
    total = int(tokens) * int(heads) * half
    step = 2 if interleave else 1
    partner = 1 if interleave else pairs
    heads_return_copy_first[math.ceil(total / 64), 64](
        x, out, positions, inv_freq, uint64(heads), uint64(half), uint64(pairs), total,
        uint64(step), uint64(partner))


def launch_freq_table_fit(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half = head_dim // 2
    total = tokens * heads * half
    threads = min(1024, 32 * -(-total // 32))
    blocks = -(-total // threads)
    args = (uint64(heads), uint64(half), uint64(inv_freq.size), total)
    layout = (uint64(2), uint64(1)) if interleave else (uint64(1), uint64(inv_freq.size))
    heads_branchless_angle[blocks, threads](x, out, positions, inv_freq, *args, *layout)


ENTRIES = [
    ("04.1", "uint_div_if", table_read_plain),
    ("04.1", "grid_stride_unsigned", table_read_stride),
    ("04.1", "early_return_reordered", table_read_return),
    ("04.2", "while_copy", shared_table_while),
    ("04.2", "range_copy_return_after_barrier", shared_table_range),
    ("04.2", "unrolled_two_entries", shared_table_two_halves),
    ("04.3", "plain_2d_index", cache_plain),
    ("04.3", "loads_first_return", cache_loads_first_return),
    ("04.3", "grid_stride", cache_stride),
    ("04.4", "if_else_copy", heads_plain),
    ("04.4", "early_return_tail", heads_return_copy_first),
    ("04.4", "identity_rotation_tail", heads_branchless_angle),
    ("04.5", "block256", launch_freq_table_256),
    ("04.5", "block64_ceil", launch_freq_table_64),
    ("04.5", "block_fit_star_args", launch_freq_table_fit),
]
