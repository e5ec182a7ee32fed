"""Set F, notebook 03 (03_pack4.ipynb): steps 03.1 .. 03.4."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, int64, uint64


# ---- 03.1: rope_two_pairs -----------------------------------------------------------------
@cuda.jit(fastmath=True)
def two_pairs_plain(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if 2 * t < n_pairs:
        row = 2 * token * n_pairs
        i = row + 4 * t
        pos = float32(positions[token])
        a0 = pos * inv_freq[2 * t]
        a1 = pos * inv_freq[2 * t + 1]
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        c0 = math.cos(a0)
        s0 = math.sin(a0)
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[i] = x0 * c0 - x1 * s0
        out[i + 1] = x0 * s0 + x1 * c0
        out[i + 2] = x2 * c1 - x3 * s1
        out[i + 3] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def two_pairs_loop(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    first = t + t
    if first >= n_pairs:
        return
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    for k in range(2):
        p = first + k
        j = 2 * (token * n_pairs + p)
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        a = x[j]
        b = x[j + 1]
        out[j] = a * c - b * s
        out[j + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def two_pairs_store_as_you_go(x, out, positions, inv_freq, n_pairs):
    t = cuda.threadIdx.x
    p = 2 * t
    if p < n_pairs:
        token = cuda.blockIdx.x
        i = (token * n_pairs + p) * 2
        pos = float32(positions[token])
        th = pos * inv_freq[p]
        out[i] = x[i] * math.cos(th) - x[i + 1] * math.sin(th)
        out[i + 1] = x[i] * math.sin(th) + x[i + 1] * math.cos(th)
        th = pos * inv_freq[p + 1]
        out[i + 2] = x[i + 2] * math.cos(th) - x[i + 3] * math.sin(th)
        out[i + 3] = x[i + 2] * math.sin(th) + x[i + 3] * math.cos(th)


# ---- 03.2: rope_quads ---------------------------------------------------------------------
@cuda.jit(fastmath=True)
def quads_plain(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        i = uint64(2) * (token * n_pairs + pair)
        a = pos * inv_freq[pair]
        c = math.cos(a)
        s = math.sin(a)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            j = i + uint64(2)
            a = pos * inv_freq[pair + uint64(1)]
            c = math.cos(a)
            s = math.sin(a)
            x2 = x[j]
            x3 = x[j + uint64(1)]
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def quads_loads_first(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    row = q // quads_per_row
    p = (q - row * quads_per_row) << uint64(1)
    has_second = p + uint64(1) < n_pairs
    k = (row * n_pairs + p) << uint64(1)
    x0 = x[k]
    x1 = x[k + uint64(1)]
    x2 = float32(0)
    x3 = float32(0)
    if has_second:
        x2 = x[k + uint64(2)]
        x3 = x[k + uint64(3)]
    pos = float32(positions[row])
    a0 = pos * inv_freq[p]
    c0 = math.cos(a0)
    s0 = math.sin(a0)
    out[k] = x0 * c0 - x1 * s0
    out[k + uint64(1)] = x0 * s0 + x1 * c0
    if has_second:
        a1 = pos * inv_freq[p + uint64(1)]
        c1 = math.cos(a1)
        s1 = math.sin(a1)
        out[k + uint64(2)] = x2 * c1 - x3 * s1
        out[k + uint64(3)] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def quads_gridstride(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = uint64(cuda.grid(1))
    step = uint64(cuda.gridsize(1))
    end = uint64(total_quads)
    while q < end:
        token = q // quads_per_row
        first = uint64(2) * (q - quads_per_row * token)
        pos = float32(positions[token])
        last = first + uint64(2)
        if last > n_pairs:
            last = n_pairs
        p = first
        while p < last:
            i = uint64(2) * (token * n_pairs + p)
            ang = pos * inv_freq[p]
            c = math.cos(ang)
            s = math.sin(ang)
            a = x[i]
            b = x[i + uint64(1)]
            out[i] = a * c - b * s
            out[i + uint64(1)] = a * s + b * c
            p += uint64(1)
        q += step


# ---- 03.3: launch_quads -------------------------------------------------------------------
def launch_quads_256(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + 1) // 2
    total_quads = positions.size * quads_per_row
    threads = 256
    blocks = (total_quads + threads - 1) // threads
    quads_plain[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                 uint64(quads_per_row), int64(total_quads))


def launch_quads_fit(x, out, positions, inv_freq, n_pairs):
    qpr = -(-n_pairs // 2)
    total = int(positions.shape[0]) * qpr
    threads = min(1024, 32 * -(-total // 32))
    blocks = -(-total // threads)
    quads_loads_first[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                       uint64(qpr), int64(total))


def launch_quads_stride(x, out, positions, inv_freq, n_pairs):
    qpr = (n_pairs + 1) // 2
    total = positions.size * qpr
    threads = 64
    blocks = min((total + threads - 1) // threads, 6)
    quads_gridstride[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                      uint64(qpr), int64(total))


# ---- 03.4: my_rope_pack4_scalar -----------------------------------------------------------
@cuda.jit(fastmath=True)
def pack4_reordered(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        second = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if second:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if second:
            j = i + uint64(2)
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def pack4_math_then_stores(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx >= total_quads:
        return
    q = uint64(idx)
    token = q // quads_per_row
    pair = (q - token * quads_per_row) * uint64(2)
    i = (token * n_pairs + pair) * uint64(2)
    pos = float32(positions[token])
    hidden = float32(n_pairs + n_pairs)
    # every load first: a one-pair quad loads its own pair twice rather than a missing one
    second = pair + uint64(1) < n_pairs
    j = i + uint64(2) if second else i
    x0 = x[i]
    x1 = x[i + uint64(1)]
    x2 = x[j]
    x3 = x[j + uint64(1)]
    f0 = float32(1.0) / math.pow(base, float32(pair + pair) / hidden)
    f1 = float32(1.0) / math.pow(base, float32(pair + pair + uint64(2)) / hidden)
    s0 = math.sin(pos * f0)
    c0 = math.cos(pos * f0)
    s1 = math.sin(pos * f1)
    c1 = math.cos(pos * f1)
    y0 = x0 * c0 - x1 * s0
    y1 = x0 * s0 + x1 * c0
    y2 = x2 * c1 - x3 * s1
    y3 = x2 * s1 + x3 * c1
    out[i] = y0
    out[i + uint64(1)] = y1
    if second:
        out[j] = y2
        out[j + uint64(1)] = y3


@cuda.jit(fastmath=True)
def pack4_explog(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        has2 = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        if has2:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        else:
            x2 = float32(0.0)
            x3 = float32(0.0)
        pos = float32(positions[token])
        k = -math.log(base) / float32(n_pairs)
        f0 = math.exp(float32(pair) * k)
        a0 = pos * f0
        out[i] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[i + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if has2:
            a1 = pos * math.exp(float32(pair + uint64(1)) * k)
            out[i + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[i + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


ENTRIES = [
    ("03.1", "plain", two_pairs_plain),
    ("03.1", "pair_loop", two_pairs_loop),
    ("03.1", "inline_store_as_you_go", two_pairs_store_as_you_go),
    ("03.2", "plain", quads_plain),
    ("03.2", "loads_first", quads_loads_first),
    ("03.2", "gridstride_inner_loop", quads_gridstride),
    ("03.3", "threads_256", launch_quads_256),
    ("03.3", "fit_1024", launch_quads_fit),
    ("03.3", "gridstride_capped", launch_quads_stride),
    ("03.4", "reordered", pack4_reordered),
    ("03.4", "math_then_stores", pack4_math_then_stores),
    ("03.4", "exp_log", pack4_explog),
]
