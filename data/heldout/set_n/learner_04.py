import math
from numba import cuda, float32, uint64, int64

CAP = 128


@cuda.jit(fastmath=True)
def table_read_a(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        th = float32(positions[token]) * inv_freq[pair]
        c = math.cos(th)
        s = math.sin(th)
        a = x[2 * i]
        b = x[2 * i + 1]
        out[2 * i] = a * c - b * s
        out[2 * i + 1] = a * s + b * c


@cuda.jit
def table_read_b(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    e = idx * 2
    x0 = x[e]
    x1 = x[e + 1]
    u = uint64(idx)
    tok = u // n_pairs
    f = inv_freq[u - n_pairs * tok]
    ang = f * float32(positions[tok])
    out[e] = x0 * math.cos(ang) - x1 * math.sin(ang)
    out[e + 1] = x1 * math.cos(ang) + x0 * math.sin(ang)


@cuda.jit(fastmath=True)
def shared_table_a(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(CAP, float32)
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
        th = float32(positions[token]) * table[pair]
        c = math.cos(th)
        s = math.sin(th)
        a = x[2 * i]
        b = x[2 * i + 1]
        out[2 * i] = a * c - b * s
        out[2 * i + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def shared_table_b(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    tid = cuda.threadIdx.x
    n = int64(n_pairs)
    # unrolled copy: 64 threads cover at most 128 entries in two rounds
    if tid < n:
        table[tid] = inv_freq[tid]
    if tid + 64 < n:
        table[tid + 64] = inv_freq[tid + 64]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    u = uint64(idx)
    tok = u // n_pairs
    pr = u - tok * n_pairs
    e = u + u
    lo = x[e]
    hi = x[e + uint64(1)]
    ang = table[pr] * float32(positions[tok])
    s = math.sin(ang)
    c = math.cos(ang)
    out[e] = lo * c - hi * s
    out[e + uint64(1)] = hi * c + lo * s


@cuda.jit(fastmath=True)
def cache_a(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        pos = positions[token]
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        a = x[2 * i]
        b = x[2 * i + 1]
        out[2 * i] = a * c - b * s
        out[2 * i + 1] = a * s + b * c


@cuda.jit
def cache_b(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_pairs:
        return
    u = uint64(idx)
    tok = u // n_pairs
    pr = u - n_pairs * tok
    row = uint64(positions[tok])
    a = x[u + u]
    b = x[u + u + uint64(1)]
    cs = cos_cache[row][pr]
    sn = sin_cache[row][pr]
    out[u + u] = cs * a - sn * b
    out[u + u + uint64(1)] = sn * a + cs * b


@cuda.jit(fastmath=True)
def heads_a(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots, step, partner):
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
            th = float32(positions[token]) * inv_freq[j]
            c = math.cos(th)
            s = math.sin(th)
            xa = x[a]
            xb = x[b]
            out[a] = xa * c - xb * s
            out[b] = xa * s + xb * c
        else:
            e = first + uint64(2) * j
            out[e] = x[e]
            out[e + uint64(1)] = x[e + uint64(1)]


@cuda.jit(fastmath=True)
def heads_b(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots, step, partner):
    idx = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if idx >= total_slots:
        return
    u = uint64(idx)
    hr = u // half_dim
    j = u - half_dim * hr
    first = hr * (half_dim + half_dim)
    if j >= n_pairs:
        src = first + j + j
        v0 = x[src]
        v1 = x[src + uint64(1)]
        out[src] = v0
        out[src + uint64(1)] = v1
        return
    tok = hr // heads
    a = first + step * j
    b = a + partner
    xa = x[a]
    xb = x[b]
    f = inv_freq[j]
    ang = f * float32(positions[tok])
    sn = math.sin(ang)
    cs = math.cos(ang)
    out[b] = xb * cs + xa * sn
    out[a] = xa * cs - xb * sn


def launch_freq_table_a(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half = head_dim // 2
    n_pairs = inv_freq.size
    total = tokens * heads * half
    if interleave:
        step, partner = 2, 1
    else:
        step, partner = 1, n_pairs
    threads = 256
    blocks = (total + threads - 1) // threads
    heads_a[blocks, threads](x, out, positions, inv_freq, uint64(heads), uint64(half),
                             uint64(n_pairs), total, uint64(step), uint64(partner))


def launch_freq_table_b(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half = head_dim // 2
    n_pairs = inv_freq.shape[0]
    total = tokens * heads * half
    step = 2 if interleave else 1
    partner = 1 if interleave else n_pairs
    threads = min(1024, 32 * math.ceil(total / 32))
    blocks = math.ceil(total / threads)
    heads_b[blocks, threads](x, out, positions, inv_freq, uint64(heads), uint64(half),
                             uint64(n_pairs), int64(total), uint64(step), uint64(partner))


ENTRIES = [
    ("04.1", "guard, trig then loads", table_read_a),
    ("04.1", "early return, loads first, no fastmath", table_read_b),
    ("04.2", "uint64 strided copy loop", shared_table_a),
    ("04.2", "two-round unrolled copy, early return after barrier", shared_table_b),
    ("04.3", "2-D index [pos, pair]", cache_a),
    ("04.3", "row then column [pos][pair]", cache_b),
    ("04.4", "if rotate else copy", heads_a),
    ("04.4", "copy first with early return", heads_b),
    ("04.5", "256 threads, branches", launch_freq_table_a),
    ("04.5", "fitted warps cap 1024, conditional exprs", launch_freq_table_b),
]


@cuda.jit(fastmath=True)
def table_read_c(x, out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    while i < uint64(total_pairs):
        tok = i // n_pairs
        th = float32(positions[tok]) * inv_freq[i - tok * n_pairs]
        a = x[uint64(2) * i]
        b = x[uint64(2) * i + uint64(1)]
        s = math.sin(th)
        c = math.cos(th)
        out[uint64(2) * i] = a * c - b * s
        out[uint64(2) * i + uint64(1)] = a * s + b * c
        i += stride


@cuda.jit(fastmath=True)
def shared_table_c(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    n = int64(n_pairs)
    for t in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        table[t] = inv_freq[t]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        u = uint64(idx)
        tok = u // n_pairs
        f = table[u - tok * n_pairs]
        pos = float32(positions[tok])
        c = math.cos(pos * f)
        s = math.sin(pos * f)
        e = 2 * idx
        out[e] = x[e] * c - x[e + 1] * s
        out[e + 1] = x[e] * s + x[e + 1] * c


@cuda.jit(fastmath=True)
def cache_c(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    # grid-stride; the cache column from the cache's own width
    width = uint64(cos_cache.shape[1])
    i = uint64(cuda.grid(1))
    while i < uint64(total_pairs):
        tok = i // width
        pr = i - tok * width
        pos = positions[tok]
        c = cos_cache[pos, pr]
        s = sin_cache[pos, pr]
        a = x[i * uint64(2)]
        b = x[i * uint64(2) + uint64(1)]
        out[i * uint64(2)] = a * c - b * s
        out[i * uint64(2) + uint64(1)] = b * c + a * s
        i += uint64(cuda.gridsize(1))


ENTRIES += [
    ("04.1", "uint64 grid-stride", table_read_c),
    ("04.2", "range copy loop", shared_table_c),
    ("04.3", "grid-stride, width from cache shape", cache_c),
]
