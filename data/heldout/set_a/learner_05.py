import ropelab
from numba import cuda, float32, uint64
import math

# 05.1: one thread per pair: one pow, one cos, one sin, both floats rotated.
@cuda.jit(fastmath=True)
def one_angle_basic(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# 05.1: early return; frequency as exp(exponent_step * pair * log(base)) instead of pow.
@cuda.jit(fastmath=True)
def one_angle_explog(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx >= total_pairs:
        return
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    f = math.exp(exponent_step * float32(pair) * math.log(base))
    angle = float32(positions[token]) * f
    e = uint64(2) * i
    x0 = x[e]
    x1 = x[e + uint64(1)]
    c = math.cos(angle)
    s = math.sin(angle)
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x0 * s + x1 * c


# 05.2: the starter's while loop filled in: while j < n_pairs, f *= stride_ratio, j += stride.
@cuda.jit(fastmath=True)
def strided_while(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
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
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


# 05.2: a fixed loop of four slots with a guard inside (at most four slots per thread).
@cuda.jit(fastmath=True)
def strided_four_slots(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                       stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    i = uint64(idx)
    token = i // stride
    j = i - token * stride
    row = token * n_pairs * uint64(2)
    pos = float32(positions[token])
    f = math.pow(base, exponent_step * float32(j))
    for k in range(4):
        if j < n_pairs:
            a = row + uint64(2) * j
            x0 = x[a]
            x1 = x[a + uint64(1)]
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
        f *= stride_ratio
        j += stride


# 05.3 (launched): host computes n_pairs, stride, exponent_step, stride_ratio; 64 threads a block.
def launch_strided_64(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = (total_threads + threads - 1) // threads
    strided_while[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                   total_threads, float32(base), float32(exponent_step),
                                   float32(stride_ratio))


# 05.3: block = total_threads rounded up to a warp, capped at 128; the four-slot kernel.
def launch_strided_128(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = -(-n_pairs // 4)
    total_threads = int(tokens * stride)
    exponent_step = -2.0 / float(hidden)
    stride_ratio = float(base) ** (exponent_step * stride)
    threads = min(128, 32 * -(-total_threads // 32))
    blocks = -(-total_threads // threads)
    strided_four_slots[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                        total_threads, float32(base), float32(exponent_step),
                                        float32(stride_ratio))


# 05.4: stride threads per head, while loop over slots j, j + stride, ..., one pow per thread.
@cuda.jit(fastmath=True)
def pair_sincos_heads_while(x, out, positions, heads, half_dim, stride, total_threads, step,
                            partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            b = a + partner
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


# 05.4: a fixed four-slot loop with a guard inside, the pair's floats through partner.
@cuda.jit(fastmath=True)
def pair_sincos_heads_four_slots(x, out, positions, heads, half_dim, stride, total_threads,
                                 step, partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx >= total_threads:
        return
    u = uint64(idx)
    head_row = u // stride
    j = u - head_row * stride
    token = head_row // heads
    first = (head_row * half_dim) << uint64(1)
    pos = float32(positions[token])
    f = math.pow(base, exponent_step * float32(j))
    for k in range(4):
        if j < half_dim:
            a = first + j * step
            x0 = x[a]
            x1 = x[a + partner]
            c = math.cos(pos * f)
            s = math.sin(pos * f)
            out[a] = x0 * c - x1 * s
            out[a + partner] = x1 * c + x0 * s
        f *= stride_ratio
        j += stride


ENTRIES = [
    ("05.1", "one_angle_pow", one_angle_basic),
    ("05.1", "one_angle_exp_log", one_angle_explog),
    ("05.2", "strided_while", strided_while),
    ("05.2", "strided_four_slots", strided_four_slots),
    ("05.3", "launch_strided_64", launch_strided_64),
    ("05.3", "launch_strided_128_four_slots", launch_strided_128),
    ("05.4", "sincos_heads_while", pair_sincos_heads_while),
    ("05.4", "sincos_heads_four_slots", pair_sincos_heads_four_slots),
]
