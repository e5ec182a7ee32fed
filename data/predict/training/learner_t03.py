"""Training kernels for notebook 03's steps (two pairs per thread, quads, their launch, and
pack4_scalar).

Variants: every load before the first store or not, 128-bit accesses through ropelab's
``load_f32x4`` / ``store_f32x4`` where a row holds whole quads, the pow per pair or a
frequency table, and for the launch step blocks of 32 to 1024 threads and a grid-stride loop.
"""

import math

from numba import cuda, float32, uint64

from ropelab.kernels.vec import load_f32x4, store_f32x4

# --- 03.1: two neighbouring pairs per thread, one block per token ------------------------


@cuda.jit(fastmath=True)
def two_pairs_unhoisted(x, out, positions, inv_freq, n_pairs):
    pair = 2 * cuda.threadIdx.x
    if pair < n_pairs:
        i = 2 * (cuda.blockIdx.x * n_pairs + pair)
        pos = float32(positions[cuda.blockIdx.x])
        for k in range(2):  # first pair stored before the second is read
            a = pos * inv_freq[pair + k]
            x0 = x[i + 2 * k]
            x1 = x[i + 2 * k + 1]
            out[i + 2 * k] = x0 * math.cos(a) - x1 * math.sin(a)
            out[i + 2 * k + 1] = x0 * math.sin(a) + x1 * math.cos(a)


@cuda.jit(fastmath=True)
def two_pairs_wide(x, out, positions, inv_freq, n_pairs):
    pair = 2 * cuda.threadIdx.x
    if pair < n_pairs:
        i = 2 * (cuda.blockIdx.x * n_pairs + pair)  # a multiple of 4: n_pairs is even
        x0, x1, x2, x3 = load_f32x4(x, i)
        pos = float32(positions[cuda.blockIdx.x])
        a0 = pos * inv_freq[pair]
        a1 = pos * inv_freq[pair + 1]
        c0, s0 = math.cos(a0), math.sin(a0)
        c1, s1 = math.cos(a1), math.sin(a1)
        store_f32x4(out, i, x0 * c0 - x1 * s0, x0 * s0 + x1 * c0,
                    x2 * c1 - x3 * s1, x2 * s1 + x3 * c1)


@cuda.jit(fastmath=True)
def two_pairs_unsigned(x, out, positions, inv_freq, n_pairs):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(2) * uint64(cuda.threadIdx.x)
    n = uint64(n_pairs)
    if pair < n:
        i = uint64(2) * (token * n + pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[i + uint64(2)]
        x3 = x[i + uint64(3)]
        f0 = inv_freq[pair]
        f1 = inv_freq[pair + uint64(1)]
        pos = float32(positions[token])
        c0, s0 = math.cos(pos * f0), math.sin(pos * f0)
        c1, s1 = math.cos(pos * f1), math.sin(pos * f1)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0
        out[i + uint64(2)] = x2 * c1 - x3 * s1
        out[i + uint64(3)] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def two_pairs_local_array(x, out, positions, inv_freq, n_pairs):
    pair = 2 * cuda.threadIdx.x
    if pair < n_pairs:
        i = 2 * (cuda.blockIdx.x * n_pairs + pair)
        v = cuda.local.array(4, float32)
        for k in range(4):
            v[k] = x[i + k]
        pos = float32(positions[cuda.blockIdx.x])
        for k in range(2):
            a = pos * inv_freq[pair + k]
            c, s = math.cos(a), math.sin(a)
            out[i + 2 * k] = v[2 * k] * c - v[2 * k + 1] * s
            out[i + 2 * k + 1] = v[2 * k] * s + v[2 * k + 1] * c


# --- 03.2: a flat grid of quads ----------------------------------------------------------


@cuda.jit(fastmath=True)
def quads_wide_when_even(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        c0, s0 = math.cos(a0), math.sin(a0)
        if n_pairs % uint64(2) == uint64(0):  # whole quads: 16-byte aligned, one access
            x0, x1, x2, x3 = load_f32x4(x, i)
            a1 = pos * inv_freq[pair + uint64(1)]
            c1, s1 = math.cos(a1), math.sin(a1)
            store_f32x4(out, i, x0 * c0 - x1 * s0, x0 * s0 + x1 * c0,
                        x2 * c1 - x3 * s1, x2 * s1 + x3 * c1)
        else:
            x0 = x[i]
            x1 = x[i + uint64(1)]
            out[i] = x0 * c0 - x1 * s0
            out[i + uint64(1)] = x0 * s0 + x1 * c0
            if pair + uint64(1) < n_pairs:
                a1 = pos * inv_freq[pair + uint64(1)]
                x2 = x[i + uint64(2)]
                x3 = x[i + uint64(3)]
                out[i + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
                out[i + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


@cuda.jit(fastmath=True)
def quads_loop_over_pairs(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        first = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        pair = first
        while pair < first + uint64(2) and pair < n_pairs:
            i = uint64(2) * (token * n_pairs + pair)
            a = pos * inv_freq[pair]
            x0 = x[i]
            x1 = x[i + uint64(1)]
            out[i] = x0 * math.cos(a) - x1 * math.sin(a)
            out[i + uint64(1)] = x0 * math.sin(a) + x1 * math.cos(a)
            pair += uint64(1)


@cuda.jit(fastmath=True)
def quads_two_divisions(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q % quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        has_second = pair + uint64(1) < n_pairs
        x2 = x[i + uint64(2)] if has_second else float32(0.0)
        x3 = x[i + uint64(3)] if has_second else float32(0.0)
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        out[i] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[i + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if has_second:
            a1 = pos * inv_freq[pair + uint64(1)]
            out[i + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[i + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


# --- 03.3: the launch --------------------------------------------------------------------


@cuda.jit(fastmath=True)
def quads_kernel(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        two = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        out[i] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[i + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if two:
            a1 = pos * inv_freq[pair + uint64(1)]
            out[i + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[i + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


@cuda.jit(fastmath=True)
def quads_kernel_strided(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    q = uint64(cuda.grid(1))
    while q < uint64(total_quads):
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        for k in range(2):
            p = pair + uint64(k)
            if p < n_pairs:
                i = uint64(2) * (token * n_pairs + p)
                a = pos * inv_freq[p]
                x0 = x[i]
                x1 = x[i + uint64(1)]
                out[i] = x0 * math.cos(a) - x1 * math.sin(a)
                out[i + uint64(1)] = x0 * math.sin(a) + x1 * math.cos(a)
        q += uint64(cuda.gridsize(1))


def _quads_launch(threads):
    def launch(x, out, positions, inv_freq, n_pairs):
        quads = (int(n_pairs) + 1) // 2
        total = positions.size * quads
        blocks = (total + threads - 1) // threads
        quads_kernel[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                                      uint64(quads), total)
    launch.__name__ = f"launch_quads_{threads}"
    return launch


def launch_quads_grid_stride(x, out, positions, inv_freq, n_pairs):
    quads = (int(n_pairs) + 1) // 2
    total = positions.size * quads
    blocks = min(132 * 4, (total + 255) // 256)
    quads_kernel_strided[blocks, 256](x, out, positions, inv_freq, uint64(n_pairs),
                                      uint64(quads), total)


# --- 03.4: pack4_scalar, frequencies from base -------------------------------------------


@cuda.jit(fastmath=True)
def pack4_scalar_unhoisted(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        for k in range(2):
            p = pair + uint64(k)
            if p < n_pairs:
                i = uint64(2) * (token * n_pairs + p)
                a = pos * math.pow(base, -float32(p) / float32(n_pairs))
                x0 = x[i]
                x1 = x[i + uint64(1)]
                out[i] = x0 * math.cos(a) - x1 * math.sin(a)
                out[i + uint64(1)] = x0 * math.sin(a) + x1 * math.cos(a)


@cuda.jit(fastmath=True)
def pack4_scalar_ratio(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    # one pow per quad: the second pair's frequency is the first's times base ** (-1/n)
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        two = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[i + uint64(2)] if two else float32(0.0)
        x3 = x[i + uint64(3)] if two else float32(0.0)
        pos = float32(positions[token])
        f0 = math.pow(base, -float32(pair) / float32(n_pairs))
        a0 = pos * f0
        out[i] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[i + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
        if two:
            a1 = pos * (f0 * math.pow(base, float32(-1.0) / float32(n_pairs)))
            out[i + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
            out[i + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


@cuda.jit(fastmath=True)
def pack4_wide(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        a0 = pos * math.pow(base, -float32(pair) / float32(n_pairs))
        if n_pairs % uint64(2) == uint64(0):
            x0, x1, x2, x3 = load_f32x4(x, i)
            a1 = pos * math.pow(base, -float32(pair + uint64(1)) / float32(n_pairs))
            store_f32x4(out, i, x0 * math.cos(a0) - x1 * math.sin(a0),
                        x0 * math.sin(a0) + x1 * math.cos(a0),
                        x2 * math.cos(a1) - x3 * math.sin(a1),
                        x2 * math.sin(a1) + x3 * math.cos(a1))
        else:
            x0 = x[i]
            x1 = x[i + uint64(1)]
            out[i] = x0 * math.cos(a0) - x1 * math.sin(a0)
            out[i + uint64(1)] = x0 * math.sin(a0) + x1 * math.cos(a0)
            if pair + uint64(1) < n_pairs:
                a1 = pos * math.pow(base, -float32(pair + uint64(1)) / float32(n_pairs))
                x2 = x[i + uint64(2)]
                x3 = x[i + uint64(3)]
                out[i + uint64(2)] = x2 * math.cos(a1) - x3 * math.sin(a1)
                out[i + uint64(3)] = x2 * math.sin(a1) + x3 * math.cos(a1)


ENTRIES = [
    ("03.1", "second pair after the first store", two_pairs_unhoisted),
    ("03.1", "128-bit load and store", two_pairs_wide),
    ("03.1", "unsigned, tables read first", two_pairs_unsigned),
    ("03.1", "local array", two_pairs_local_array),
    ("03.2", "128-bit when rows are whole quads", quads_wide_when_even),
    ("03.2", "loop over the quad's pairs", quads_loop_over_pairs),
    ("03.2", "two divisions", quads_two_divisions),
    *[("03.3", f"block {t}", _quads_launch(t)) for t in (32, 64, 128, 256, 512, 1024)],
    ("03.3", "grid-stride 528 blocks of 256", launch_quads_grid_stride),
    ("03.4", "pairs one after the other", pack4_scalar_unhoisted),
    ("03.4", "one pow and a ratio", pack4_scalar_ratio),
    ("03.4", "128-bit when rows are whole quads", pack4_wide),
]
