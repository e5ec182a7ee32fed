import ropelab
from numba import cuda, float32, uint64
import math
import numpy as np

TABLE_CAPACITY = 128


# 04.1: one thread per pair, frequency read from inv_freq[pair].
@cuda.jit(fastmath=True)
def table_read_basic(x, out, positions, inv_freq, n_pairs, total_pairs):
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


# 04.1: grid-stride loop over pairs, the table read once per pair.
@cuda.jit(fastmath=True)
def table_read_stride(x, out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        f = inv_freq[pair]
        p = float32(positions[token])
        e = uint64(2) * i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        c = math.cos(p * f)
        s = math.sin(p * f)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        i += stride


# 04.2: shared table filled with a block-stride copy (k += blockDim.x), one barrier, then rotate.
@cuda.jit(fastmath=True)
def shared_table_stride_copy(x, out, positions, inv_freq, n_pairs, total_pairs):
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
        e = i + i
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# 04.2: copy in two fixed halves (entries t and t + 64 of the 128-slot table), barrier, then an
# early exit for threads past the last pair.
@cuda.jit(fastmath=True)
def shared_table_two_halves(x, out, positions, inv_freq, n_pairs, total_pairs):
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
    e = uint64(2) * i
    x0 = x[e]
    x1 = x[e + uint64(1)]
    f = table[pair]
    c = math.cos(pos * f)
    s = math.sin(pos * f)
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x0 * s + x1 * c


# 04.2: only the table entries this block's pairs use are copied (from its first pair on,
# wrapping around the row), then a barrier.
@cuda.jit(fastmath=True)
def shared_table_block_window(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    first = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x)
    start = first - (first // n_pairs) * n_pairs  # the pair of the block's first thread
    need = uint64(cuda.blockDim.x)
    if need > n_pairs:
        need = n_pairs
    k = uint64(cuda.threadIdx.x)
    if k < need:
        p = start + k
        if p >= n_pairs:
            p -= n_pairs
        table[p] = inv_freq[p]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * table[pair]
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# 04.3: the starter's lookups: cos_cache[pos, pair], sin_cache[pos, pair].
@cuda.jit(fastmath=True)
def cache_lookup_2d(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        pos = uint64(positions[token])
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# 04.3: grid-stride loop, signed position index into the caches.
@cuda.jit(fastmath=True)
def cache_lookup_stride(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_pairs)
    while i < total:
        token = i // n_pairs
        pair = i - token * n_pairs
        row = positions[token]
        c = cos_cache[row, pair]
        s = sin_cache[row, pair]
        e = uint64(2) * i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x1 * c + x0 * s
        i += stride


# 04.4: one thread per slot: rotate slot j < n_pairs at (first + j*step, + partner), else copy.
@cuda.jit(fastmath=True)
def heads_slot_basic(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
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
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


# 04.4: grid-stride over slots; the copy branch first; the token read only for rotated slots.
@cuda.jit(fastmath=True)
def heads_slot_stride(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                      step, partner):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_slots)
    one = uint64(1)
    while i < total:
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = (head_row * half_dim) << one
        if j >= n_pairs:
            a = first + (j << one)
            v0 = x[a]
            v1 = x[a + one]
            out[a] = v0
            out[a + one] = v1
        else:
            token = head_row // heads
            a = first + j * step
            b = a + partner
            x0 = x[a]
            x1 = x[b]
            theta = float32(positions[token]) * inv_freq[j]
            c = math.cos(theta)
            s = math.sin(theta)
            out[a] = x0 * c - x1 * s
            out[b] = x1 * c + x0 * s
        i += stride


# 04.5 (launched): host computes the uint64 scalars, 64 threads per block.
def launch_freq_table_64(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    step, partner = (2, 1) if interleave else (1, n_pairs)
    threads = 64
    blocks = (total_slots + threads - 1) // threads
    heads_slot_basic[blocks, threads](x, out, positions, inv_freq, uint64(heads),
                                      uint64(half_dim), uint64(n_pairs), total_slots,
                                      uint64(step), uint64(partner))


# 04.5: block = total_slots rounded to a warp and capped at 256, the grid-stride kernel.
def launch_freq_table_256(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = int(inv_freq.shape[0])
    total_slots = int(tokens) * int(heads) * half_dim
    if interleave:
        step, partner = np.uint64(2), np.uint64(1)
    else:
        step, partner = np.uint64(1), np.uint64(n_pairs)
    threads = min(256, 32 * ((total_slots + 31) // 32))
    blocks = -(-total_slots // threads)
    heads_slot_stride[blocks, threads](x, out, positions, inv_freq, np.uint64(heads),
                                       np.uint64(half_dim), np.uint64(n_pairs), total_slots,
                                       step, partner)


ENTRIES = [
    ("04.1", "table_read_basic", table_read_basic),
    ("04.1", "table_read_stride", table_read_stride),
    ("04.2", "shared_table_stride_copy", shared_table_stride_copy),
    ("04.2", "shared_table_two_halves", shared_table_two_halves),
    ("04.2", "shared_table_block_window", shared_table_block_window),
    ("04.3", "cache_lookup_2d", cache_lookup_2d),
    ("04.3", "cache_lookup_stride", cache_lookup_stride),
    ("04.4", "heads_slot_basic", heads_slot_basic),
    ("04.4", "heads_slot_stride", heads_slot_stride),
    ("04.5", "launch_heads_64", launch_freq_table_64),
    ("04.5", "launch_heads_256_stride", launch_freq_table_256),
]
