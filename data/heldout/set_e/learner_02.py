"""Notebook 02 (block2d), steps 02.1 .. 02.3.  No integer division anywhere."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numba
from numba import cuda, float32, uint64


# ---------------------------------------------------------------- 02.1 rope_rows
@cuda.jit(fastmath=True)
def rope_rows_if(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        e = 2 * (token * n_pairs + pair)
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_rows_return(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    token = cuda.blockIdx.x
    row = 2 * token * n_pairs
    a = x[row + 2 * pair]
    b = x[row + 2 * pair + 1]
    pos = float32(positions[token])
    f = inv_freq[pair]
    s = math.sin(pos * f)
    c = math.cos(pos * f)
    out[row + 2 * pair + 1] = a * s + b * c
    out[row + 2 * pair] = a * c - b * s


# ---------------------------------------------------------------- 02.2 my_rope_block2d
@cuda.jit(fastmath=True)
def block2d_pow_each(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
    row = token * (n_pairs + n_pairs)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) * inv_hidden)
        angle = pos * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = row + pair + pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        pair += step


@cuda.jit(fastmath=True)
def block2d_exp_log(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    pos = float32(positions[token])
    k = -math.log(base) / float32(n_pairs)  # frequency = exp(k * pair)
    while t < n_pairs:
        e = uint64(2) * (token * n_pairs + t)
        a = x[e]
        b = x[e + uint64(1)]
        theta = pos * math.exp(k * float32(t))
        c = math.cos(theta)
        s = math.sin(theta)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        t = t + uint64(cuda.blockDim.x)


@cuda.jit(fastmath=True)
def block2d_ratio(x, out, positions, n_pairs, base):
    # one pow for the thread's first pair, one for the step's ratio, then multiply
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    inv_np = float32(1.0) / float32(n_pairs)
    freq = math.pow(base, -float32(pair) * inv_np)
    ratio = math.pow(base, -float32(step) * inv_np)
    pos = float32(positions[token])
    first = token * n_pairs
    while pair < n_pairs:
        angle = pos * freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = (first + pair) << uint64(1)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        pair += step
        freq = freq * ratio


# ---------------------------------------------------------------- 02.3 launch_block2d
def launch_block2d_min(x, out, positions, n_pairs, base):
    threads = min(((n_pairs + 31) // 32) * 32, 1024)
    blocks = positions.size
    block2d_pow_each[blocks, threads](x, out, positions, numba.uint64(n_pairs),
                                      numba.float32(base))


def launch_block2d_branch(x, out, positions, n_pairs, base):
    if n_pairs >= 1024:
        threads = 1024
    else:
        threads = 32 * math.ceil(n_pairs / 32)
    block2d_exp_log[positions.shape[0], threads](x, out, positions, uint64(n_pairs),
                                                 float32(base))


def launch_block2d_warps(x, out, positions, n_pairs, base):
    warps = min(-(-n_pairs // 32), 32)
    block2d_ratio[(positions.size,), (warps * 32,)](x, out, positions, uint64(n_pairs),
                                                  float32(base))



# ---------------------------------------------------------------- extra approaches
@cuda.jit(fastmath=True)
def rope_rows_unsigned(x, out, positions, inv_freq, n_pairs):
    pair = uint64(cuda.threadIdx.x)
    np_ = uint64(n_pairs)
    if pair < np_:
        token = uint64(cuda.blockIdx.x)
        e = (token * np_ + pair) << uint64(1)
        pos = float32(positions[token])
        f = inv_freq[pair]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        c = math.cos(pos * f)
        s = math.sin(pos * f)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c

ENTRIES = [
    ("02.1", "if_guard", rope_rows_if),
    ("02.1", "early_return_row_base", rope_rows_return),
    ("02.2", "pow_every_pair", block2d_pow_each),
    ("02.2", "exp_log", block2d_exp_log),
    ("02.2", "pow_ratio_recurrence", block2d_ratio),
    ("02.3", "min_rounded", launch_block2d_min),
    ("02.3", "if_cap_ceil", launch_block2d_branch),
    ("02.3", "warps_tuple_config", launch_block2d_warps),
    ("02.1", "unsigned_shift_index", rope_rows_unsigned),
]
