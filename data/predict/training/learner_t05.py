"""Training kernels for notebook 05's steps (one angle per pair, strided slots with one pow per
thread, their launch, heads).

Variants: a pow per slot instead of the ratio, every slot's floats loaded before the first
store, a counted loop, and for the launch step 2 to 16 slots per thread and blocks of 32 to
1024 threads.
"""

import math

from numba import cuda, float32, uint32, uint64

# --- 05.1: one angle per pair ------------------------------------------------------------


@cuda.jit(fastmath=True)
def one_angle_exp2(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.exp2(exponent_step * float32(pair) * math.log2(base))
        angle = float32(positions[token]) * f
        a = x[i + i]
        b = x[i + i + uint64(1)]
        c, s = math.cos(angle), math.sin(angle)
        out[i + i] = a * c - b * s
        out[i + i + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def one_angle_u32(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint32(idx)
        n = uint32(n_pairs)
        token = i // n
        pair = i - token * n
        angle = float32(positions[token]) * math.pow(base, exponent_step * float32(pair))
        e = i + i
        a = x[e]
        b = x[e + uint32(1)]
        out[e] = a * math.cos(angle) - b * math.sin(angle)
        out[e + uint32(1)] = a * math.sin(angle) + b * math.cos(angle)


@cuda.jit(fastmath=True)
def one_angle_grid_stride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    i = uint64(cuda.grid(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        angle = float32(positions[token]) * math.pow(base, exponent_step * float32(pair))
        a = x[i + i]
        b = x[i + i + uint64(1)]
        out[i + i] = a * math.cos(angle) - b * math.sin(angle)
        out[i + i + uint64(1)] = a * math.sin(angle) + b * math.cos(angle)
        i += uint64(cuda.gridsize(1))


# --- 05.2: strided slots, one pow per thread ---------------------------------------------


@cuda.jit(fastmath=True)
def strided_pow_per_slot(x, out, positions, n_pairs, stride, total_threads, base,
                         exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        first = token * (n_pairs + n_pairs)
        pos = float32(positions[token])
        while j < n_pairs:
            angle = pos * math.pow(base, exponent_step * float32(j))
            a = first + j + j
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * math.cos(angle) - x1 * math.sin(angle)
            out[a + uint64(1)] = x0 * math.sin(angle) + x1 * math.cos(angle)
            j += stride


@cuda.jit(fastmath=True)
def strided_loads_first(x, out, positions, n_pairs, stride, total_threads, base,
                        exponent_step, stride_ratio):
    # up to four slots: all their floats read before the first store
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j0 = i - token * stride
        first = token * (n_pairs + n_pairs)
        v = cuda.local.array(8, float32)
        for k in range(4):
            j = j0 + uint64(k) * stride
            if j < n_pairs:
                v[2 * k] = x[first + j + j]
                v[2 * k + 1] = x[first + j + j + uint64(1)]
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j0))
        for k in range(4):
            j = j0 + uint64(k) * stride
            if j < n_pairs:
                angle = pos * f
                c, s = math.cos(angle), math.sin(angle)
                out[first + j + j] = v[2 * k] * c - v[2 * k + 1] * s
                out[first + j + j + uint64(1)] = v[2 * k] * s + v[2 * k + 1] * c
            f = f * stride_ratio


@cuda.jit(fastmath=True)
def strided_for_loop(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                     stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        first = token * (n_pairs + n_pairs)
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        for slot in range(j, n_pairs, stride):
            a = first + slot + slot
            x0 = x[a]
            x1 = x[a + uint64(1)]
            c, s = math.cos(pos * f), math.sin(pos * f)
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f *= stride_ratio


# --- 05.3: the launch --------------------------------------------------------------------


@cuda.jit(fastmath=True)
def strided_kernel(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                   stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        first = token * (n_pairs + n_pairs)
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j < n_pairs:
            a = first + j + j
            x0 = x[a]
            x1 = x[a + uint64(1)]
            c, s = math.cos(pos * f), math.sin(pos * f)
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


def _strided_launch(per_thread, threads):
    def launch(x, out, positions, tokens, hidden, base):
        n_pairs = hidden // 2
        stride = (n_pairs + per_thread - 1) // per_thread
        total = tokens * stride
        step = -2.0 / hidden
        ratio = base ** (step * stride)
        blocks = (total + threads - 1) // threads
        strided_kernel[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                        total, float32(base), float32(step), float32(ratio))
    launch.__name__ = f"launch_strided_{per_thread}x{threads}"
    return launch


# --- 05.4: heads and both layouts ----------------------------------------------------------


@cuda.jit(fastmath=True)
def heads_pow_per_slot(x, out, positions, heads, half_dim, stride, total_threads, step,
                       partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = head_row * (half_dim + half_dim)
        pos = float32(positions[head_row // heads])
        while j < half_dim:
            a = first + j * step
            b = a + partner
            angle = pos * math.pow(base, exponent_step * float32(j))
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * math.cos(angle) - x1 * math.sin(angle)
            out[b] = x0 * math.sin(angle) + x1 * math.cos(angle)
            j += stride


@cuda.jit(fastmath=True)
def heads_token_first(x, out, positions, heads, half_dim, stride, total_threads, step,
                      partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        per_token = heads * stride
        token = i // per_token
        rest = i - token * per_token
        head = rest // stride
        j = rest - head * stride
        first = (token * heads + head) * (half_dim + half_dim)
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            b = a + partner
            x0 = x[a]
            x1 = x[b]
            c, s = math.cos(pos * f), math.sin(pos * f)
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f *= stride_ratio
            j += stride


ENTRIES = [
    ("05.1", "exp2 of log2", one_angle_exp2),
    ("05.1", "32-bit index math", one_angle_u32),
    ("05.1", "grid-stride loop", one_angle_grid_stride),
    ("05.2", "pow per slot", strided_pow_per_slot),
    ("05.2", "four slots loaded first", strided_loads_first),
    ("05.2", "range loop", strided_for_loop),
    *[("05.3", f"{p} slots per thread, block {t}", _strided_launch(p, t))
      for p, t in ((4, 32), (4, 128), (4, 256), (4, 1024), (1, 128), (2, 256), (8, 64),
                   (16, 128))],
    ("05.4", "pow per slot", heads_pow_per_slot),
    ("05.4", "token first, then head", heads_token_first),
]
