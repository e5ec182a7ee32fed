import ropelab  # noqa: F401
import math
import numba
from numba import cuda, uint64, float32


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
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


@cuda.jit
def rope_table_read_v2(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    f = inv_freq[pair]
    pos = positions[token]
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    angle = float32(pos) * f
    s = math.sin(angle)
    c = math.cos(angle)
    out[e] = a * c - b * s
    out[e + uint64(1)] = b * c + a * s


@cuda.jit
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
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


@cuda.jit
def rope_shared_table_v2(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    for r in range(2):
        k = uint64(t + 64 * r)
        if k < n_pairs:
            table[k] = inv_freq[k]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    angle = float32(positions[token]) * table[pair]
    s = math.sin(angle)
    c = math.cos(angle)
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    out[e] = a * c - b * s
    out[e + uint64(1)] = a * s + b * c


@cuda.jit
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
def my_rope_cache_v2(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    pos = uint64(positions[token])
    e = i + i
    a = x[e]
    b = x[e + uint64(1)]
    c = cos_cache[pos, pair]
    s = sin_cache[pos, pair]
    out[e + uint64(1)] = a * s + b * c
    out[e] = a * c - b * s


@cuda.jit
def rope_freq_table_heads(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                          total_slots, step, partner):
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
            e = first + uint64(2) * j
            out[e] = x[e]
            out[e + uint64(1)] = x[e + uint64(1)]


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
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, numba.uint64(heads), numba.uint64(half_dim),
        numba.uint64(n_pairs), numba.int64(total), numba.uint64(step), numba.uint64(partner))


def launch_freq_table_v2(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.shape[0]
    total = tokens * heads * half_dim
    step = 2 if interleave else 1
    partner = 1 if interleave else n_pairs
    threads = min(512, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    u = numba.uint64
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, u(heads), u(half_dim), u(n_pairs),
        numba.int64(total), u(step), u(partner))


ENTRIES = [
    ("04.1", "plain", rope_table_read),
    ("04.1", "uint_index", rope_table_read_v2),
    ("04.2", "while_copy", rope_shared_table),
    ("04.2", "two_round_copy", rope_shared_table_v2),
    ("04.3", "plain", my_rope_cache),
    ("04.3", "uint_index", my_rope_cache_v2),
    ("04.4", "if_else_copy", rope_freq_table_heads),
    ("04.5", "128_threads", launch_freq_table),
    ("04.5", "512_threads", launch_freq_table_v2),
]
