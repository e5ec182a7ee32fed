"""Notebook 04 steps: tables instead of pow, the cos/sin cache, heads and layouts."""
import math

from numba import cuda, float32, int64, uint64

TABLE_CAPACITY = 128


# ---------------- 04.1 rope_table_read
@cuda.jit(fastmath=True)
def rope_table_read_a(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit("void(float32[::1], float32[::1], int32[::1], float32[::1], uint64, int64)")
def rope_table_read_b(x, out, positions, inv_freq, n_pairs, total_pairs):
    # grid-stride, signed element index, loads first, no fastmath
    idx = cuda.grid(1)
    stride = cuda.gridsize(1)
    while idx < total_pairs:
        a = x[2 * idx]
        b = x[2 * idx + 1]
        u = uint64(idx)
        token = u // n_pairs
        f = inv_freq[u - token * n_pairs]
        ang = f * float32(positions[token])
        sn = math.sin(ang)
        cs = math.cos(ang)
        out[2 * idx + 1] = a * sn + b * cs
        out[2 * idx] = a * cs - b * sn
        idx += stride


# ---------------- 04.2 rope_shared_table
@cuda.jit(fastmath=True)
def rope_shared_table_a(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    nt = uint64(cuda.blockDim.x)
    k = t
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += nt
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        theta = float32(positions[token]) * table[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_shared_table_b(x, out, positions, inv_freq, n_pairs, total_pairs):
    # fixed two-round copy (capacity 128 = two blocks of 64), signed copy index
    table = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    np_ = int64(n_pairs)
    for r in range(2):
        k = t + r * 64
        if k < np_:
            table[k] = inv_freq[k]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    x0 = x[2 * idx]
    x1 = x[2 * idx + 1]
    u = uint64(idx)
    token = u // n_pairs
    pair = u - token * n_pairs
    ang = float32(positions[token]) * table[pair]
    out[2 * idx] = x0 * math.cos(ang) - x1 * math.sin(ang)
    out[2 * idx + 1] = x0 * math.sin(ang) + x1 * math.cos(ang)


# ---------------- 04.3 my_rope_cache
@cuda.jit(fastmath=True)
def my_rope_cache_a(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        pos = uint64(positions[token])
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        e = i * uint64(2)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit("void(float32[::1], float32[::1], int32[::1], float32[:, ::1], float32[:, ::1], "
          "uint64, int64)")
def my_rope_cache_b(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    # row views of the caches, early return, loads of x first, fma
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    a = x[2 * idx]
    b = x[2 * idx + 1]
    u = uint64(idx)
    token = u // n_pairs
    pair = u - n_pairs * token
    p = positions[token]
    crow = cos_cache[p]
    srow = sin_cache[p]
    c = crow[pair]
    s = srow[pair]
    out[2 * idx] = cuda.fma(a, c, -(b * s))
    out[2 * idx + 1] = cuda.fma(b, c, a * s)


# ---------------- 04.4 rope_freq_table_heads
@cuda.jit(fastmath=True)
def rope_freq_table_heads_a(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
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
            e = first + j + j
            out[e] = x[e]
            out[e + uint64(1)] = x[e + uint64(1)]


@cuda.jit("void(float32[::1], float32[::1], int32[::1], float32[::1], uint64, uint64, uint64, "
          "int64, uint64, uint64)")
def rope_freq_table_heads_b(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                            step, partner):
    # token from one division by the token's slot count; grid-stride; a/b chosen first
    slots_per_token = heads * half_dim
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_slots)
    while i < total:
        token = i // slots_per_token
        rest = i - token * slots_per_token
        head = rest // half_dim
        j = rest - head * half_dim
        first = (token * slots_per_token + head * half_dim) * uint64(2)
        rotate = j < n_pairs
        if rotate:
            a = first + j * step
            b = a + partner
        else:
            a = first + uint64(2) * j
            b = a + uint64(1)
        xa = x[a]
        xb = x[b]
        if rotate:
            ang = inv_freq[j] * float32(positions[token])
            c = math.cos(ang)
            s = math.sin(ang)
            out[a] = cuda.fma(xa, c, -xb * s)
            out[b] = cuda.fma(xa, s, xb * c)
        else:
            out[a] = xa
            out[b] = xb
        i += stride


# ---------------- 04.5 launch_freq_table
def launch_freq_table_a(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    if interleave:
        step, partner = 2, 1
    else:
        step, partner = 1, n_pairs
    threads = 256
    blocks = (total_slots + threads - 1) // threads
    rope_freq_table_heads_a[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total_slots, uint64(step), uint64(partner))


def launch_freq_table_b(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim >> 1
    n_pairs = int(inv_freq.shape[0])
    total_slots = int(tokens) * int(heads) * half_dim
    step = uint64(2) if interleave else uint64(1)
    partner = uint64(1) if interleave else uint64(n_pairs)
    threads = min(1024, 32 * math.ceil(total_slots / 32))
    blocks = math.ceil(total_slots / threads)
    rope_freq_table_heads_b[(blocks,), (threads,)](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        int64(total_slots), step, partner)


def launch_freq_table_c(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    # one block per token-head row's worth of warps (rounded), grid from the slot count
    half_dim = head_dim // 2
    n_pairs = len(inv_freq)
    total_slots = tokens * heads * half_dim
    threads = 128
    blocks = -(-total_slots // threads)
    args = (uint64(2), uint64(1)) if interleave else (uint64(1), uint64(n_pairs))
    rope_freq_table_heads_a[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        int64(total_slots), *args)


# ---------------- third entries
@cuda.jit(fastmath=True)
def rope_table_read_c(x, out, positions, inv_freq, n_pairs, total_pairs):
    # signed division and remainder (no division limit in this step)
    idx = cuda.grid(1)
    if idx < total_pairs:
        np_ = int64(n_pairs)
        token = idx // np_
        pair = idx % np_
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        out[2 * idx] = x[2 * idx] * c - x[2 * idx + 1] * s
        out[2 * idx + 1] = x[2 * idx] * s + x[2 * idx + 1] * c


@cuda.jit(fastmath=True)
def rope_shared_table_c(x, out, positions, inv_freq, n_pairs, total_pairs):
    # copy with a range() of constant step 64 (the block size of the launch)
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    for k in range(cuda.threadIdx.x, int64(n_pairs), 64):
        table[k] = inv_freq[k]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        np_ = int64(n_pairs)
        token = idx // np_
        pair = idx - token * np_
        ang = table[pair] * float32(positions[token])
        c = math.cos(ang)
        s = math.sin(ang)
        a = x[2 * idx]
        b = x[2 * idx + 1]
        out[2 * idx] = cuda.fma(a, c, -b * s)
        out[2 * idx + 1] = cuda.fma(a, s, b * c)


@cuda.jit(fastmath=True)
def my_rope_cache_c(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    # signed divmod, grid-stride loop
    idx = cuda.grid(1)
    np_ = int64(n_pairs)
    while idx < total_pairs:
        token = idx // np_
        pair = idx % np_
        pos = positions[token]
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        a = x[2 * idx]
        b = x[2 * idx + 1]
        out[2 * idx] = a * c - b * s
        out[2 * idx + 1] = a * s + b * c
        idx += cuda.gridsize(1)


@cuda.jit(fastmath=True)
def rope_freq_table_heads_c(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                            step, partner):
    # signed index math with %, early return, copy branch first
    idx = cuda.grid(1)
    if idx >= total_slots:
        return
    hd = int64(half_dim)
    nh = int64(heads)
    npr = int64(n_pairs)
    j = idx % hd
    head_row = idx // hd
    token = head_row // nh
    first = head_row * hd * 2
    if j >= npr:
        out[first + 2 * j] = x[first + 2 * j]
        out[first + 2 * j + 1] = x[first + 2 * j + 1]
        return
    a = first + j * int64(step)
    b = a + int64(partner)
    ang = float32(positions[token]) * inv_freq[j]
    c = math.cos(ang)
    s = math.sin(ang)
    xa = x[a]
    xb = x[b]
    out[b] = xa * s + xb * c
    out[a] = xa * c - xb * s


ENTRIES = [
    ("04.1", "uint64-index-fastmath", rope_table_read_a),
    ("04.1", "eager-sig-grid-stride-loads-first", rope_table_read_b),
    ("04.1", "signed-divmod", rope_table_read_c),
    ("04.2", "strided-copy-while-uint64", rope_shared_table_a),
    ("04.2", "two-round-copy-early-return", rope_shared_table_b),
    ("04.2", "range-step64-copy-signed-fma", rope_shared_table_c),
    ("04.3", "2d-index-uint64-pos", my_rope_cache_a),
    ("04.3", "row-views-fma-eager-sig", my_rope_cache_b),
    ("04.3", "signed-divmod-grid-stride", my_rope_cache_c),
    ("04.4", "head-row-two-divs-branch", rope_freq_table_heads_a),
    ("04.4", "token-first-three-divs-grid-stride", rope_freq_table_heads_b),
    ("04.4", "signed-mod-copy-first-early-return", rope_freq_table_heads_c),
    ("04.5", "256-python-ints", launch_freq_table_a),
    ("04.5", "warp-rounded-cap1024-math.ceil", launch_freq_table_b),
    ("04.5", "128-tuple-unpack-args", launch_freq_table_c),
]
