import ropelab
from numba import cuda, float32, uint64
import math

# 03.1: block = token, thread t rotates pairs 2t and 2t+1, pair by pair (load, store, load, store).
@cuda.jit(fastmath=True)
def rope_two_pairs_seq(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = 2 * t
    if p < n_pairs:
        pos = float32(positions[token])
        e = 2 * token * n_pairs + 4 * t
        a0 = pos * inv_freq[p]
        c = math.cos(a0)
        s = math.sin(a0)
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c
        a1 = pos * inv_freq[p + 1]
        c = math.cos(a1)
        s = math.sin(a1)
        x2 = x[e + 2]
        x3 = x[e + 3]
        out[e + 2] = x2 * c - x3 * s
        out[e + 3] = x2 * s + x3 * c


# 03.1: all four floats and both frequencies loaded first, then both pairs stored.
@cuda.jit(fastmath=True)
def rope_two_pairs_loads_first(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    p = t + t
    if p >= n_pairs:
        return
    e = (token * n_pairs + p) * 2
    x0 = x[e]
    x1 = x[e + 1]
    x2 = x[e + 2]
    x3 = x[e + 3]
    f0 = inv_freq[p]
    f1 = inv_freq[p + 1]
    pos = float32(positions[token])
    c0 = math.cos(pos * f0)
    s0 = math.sin(pos * f0)
    c1 = math.cos(pos * f1)
    s1 = math.sin(pos * f1)
    out[e] = x0 * c0 - x1 * s0
    out[e + 1] = x0 * s0 + x1 * c0
    out[e + 2] = x2 * c1 - x3 * s1
    out[e + 3] = x2 * s1 + x3 * c1


# 03.2: flat grid of quads, one unsigned division, second pair under pair + 1 < n_pairs.
@cuda.jit(fastmath=True)
def rope_quads_basic(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        e = uint64(2) * (token * n_pairs + pair)
        angle = pos * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            angle = pos * inv_freq[pair + uint64(1)]
            c = math.cos(angle)
            s = math.sin(angle)
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
            out[e + uint64(2)] = x2 * c - x3 * s
            out[e + uint64(3)] = x2 * s + x3 * c


# 03.2: grid-stride loop over quads, loads of both pairs before any store.
@cuda.jit(fastmath=True)
def rope_quads_stride(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    total = uint64(total_quads)
    one = uint64(1)
    while q < total:
        token = q // quads_per_row
        pair = (q - token * quads_per_row) << one
        e = (token * n_pairs + pair) << one
        pos = float32(positions[token])
        two = pair + one < n_pairs
        x0 = x[e]
        x1 = x[e + one]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
        a0 = pos * inv_freq[pair]
        out[e] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[e + one] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if two:
            a1 = pos * inv_freq[pair + one]
            out[e + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[e + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)
        q += stride


# 03.3 (launched): quad counts on the host, 64 threads per block.
def launch_quads_64(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + 1) // 2
    total_quads = positions.size * quads_per_row
    threads = 64
    blocks = (total_quads + threads - 1) // threads
    rope_quads_basic[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                      uint64(quads_per_row), total_quads)


# 03.3: 256 threads per block (fewer when the batch is small), the grid-stride kernel.
def launch_quads_256(x, out, positions, inv_freq, n_pairs):
    quads_per_row = -(-int(n_pairs) // 2)
    total_quads = int(positions.shape[0]) * quads_per_row
    threads = min(256, 32 * -(-total_quads // 32))
    blocks = -(-total_quads // threads)
    rope_quads_stride[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                       uint64(quads_per_row), total_quads)


# 03.4: the starter reordered: both pairs' loads first, the second under a flag, then stores.
@cuda.jit(fastmath=True)
def pack4_loads_first_flag(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        has_second = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if has_second:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if has_second:
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[i + uint64(2)] = x2 * c - x3 * s
            out[i + uint64(3)] = x2 * s + x3 * c


# 03.4: two code paths: a whole quad (four loads, four stores) or the lone last pair.
@cuda.jit(fastmath=True)
def pack4_two_paths(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) * uint64(2)
    i = (token * n_pairs + pair) * uint64(2)
    pos = float32(positions[token])
    step = float32(-2.0) / float32(n_pairs + n_pairs)
    f0 = math.pow(base, step * float32(pair))
    if pair + uint64(1) < n_pairs:
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
        f1 = math.pow(base, step * float32(pair + uint64(1)))
        a0 = pos * f0
        a1 = pos * f1
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0
        out[i + uint64(2)] = x2 * c1 - x3 * s1
        out[i + uint64(3)] = x2 * s1 + x3 * c1
    else:
        x0 = x[i]
        x1 = x[i + uint64(1)]
        a0 = pos * f0
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0


# 03.4: the four floats in a local array, loaded in a loop, then rotated and stored in a loop.
@cuda.jit(fastmath=True)
def pack4_local_array(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        count = uint64(2)
        if pair + uint64(1) >= n_pairs:
            count = uint64(1)
        v = cuda.local.array(4, float32)
        for k in range(4):
            v[k] = float32(0.0)
        k = uint64(0)
        while k < count + count:
            v[k] = x[i + k]
            k += uint64(1)
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        k = uint64(0)
        while k < count:
            p = pair + k
            angle = pos / math.pow(base, float32(p + p) * inv_hidden)
            c = math.cos(angle)
            s = math.sin(angle)
            a = v[k + k]
            b = v[k + k + uint64(1)]
            out[i + k + k] = a * c - b * s
            out[i + k + k + uint64(1)] = a * s + b * c
            k += uint64(1)


ENTRIES = [
    ("03.1", "two_pairs_sequential", rope_two_pairs_seq),
    ("03.1", "two_pairs_loads_first", rope_two_pairs_loads_first),
    ("03.2", "quads_basic", rope_quads_basic),
    ("03.2", "quads_stride_loads_first", rope_quads_stride),
    ("03.3", "launch_quads_64", launch_quads_64),
    ("03.3", "launch_quads_256_stride", launch_quads_256),
    ("03.4", "pack4_loads_first_flag", pack4_loads_first_flag),
    ("03.4", "pack4_two_paths", pack4_two_paths),
    ("03.4", "pack4_local_array", pack4_local_array),
]
