"""Set F, notebook 02 (02_block2d.ipynb): steps 02.1 .. 02.3."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, int64, uint64


# ---- 02.1: rope_rows ----------------------------------------------------------------------
@cuda.jit(fastmath=True)
def rope_rows_plain(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        row = 2 * token * n_pairs
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[row + 2 * pair]
        x1 = x[row + 2 * pair + 1]
        out[row + 2 * pair] = x0 * c - x1 * s
        out[row + 2 * pair + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rope_rows_return(x, out, positions, inv_freq, n_pairs):
    p = cuda.threadIdx.x
    if p >= n_pairs:
        return
    t = cuda.blockIdx.x
    k = (t * n_pairs + p) * 2
    a = x[k]
    b = x[k + 1]
    theta = inv_freq[p] * float32(positions[t])
    sn = math.sin(theta)
    cs = math.cos(theta)
    out[k] = a * cs - b * sn
    out[k + 1] = b * cs + a * sn


@cuda.jit(fastmath=True)
def rope_rows_blockloop(x, out, positions, inv_freq, n_pairs):
    # a stride loop over the row: with a block as wide as the row it runs once
    t = cuda.blockIdx.x
    pos = float32(positions[t])
    base = 2 * t * n_pairs
    p = cuda.threadIdx.x
    while p < n_pairs:  # a while loop: range() with a run-time step divides for its trip count
        ang = pos * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        i = base + p + p
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c
        p += cuda.blockDim.x


# ---- 02.2: my_rope_block2d ----------------------------------------------------------------
@cuda.jit(fastmath=True)
def rope_block2d_while(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    stride = uint64(cuda.blockDim.x)
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
    row = uint64(2) * token * n_pairs
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) * inv_hidden)
        angle = pos * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        i = row + uint64(2) * pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += stride


@cuda.jit(fastmath=True)
def rope_block2d_int64(x, out, positions, n_pairs, base):
    n = int64(n_pairs)
    t = cuda.blockIdx.x
    pos = float32(positions[t])
    row = 2 * t * n
    p = int64(cuda.threadIdx.x)
    step = int64(cuda.blockDim.x)
    while p < n:
        angle = pos / math.pow(base, float32(2 * p) / float32(2 * n))
        c = math.cos(angle)
        s = math.sin(angle)
        a = x[row + 2 * p]
        b = x[row + 2 * p + 1]
        out[row + 2 * p] = a * c - b * s
        out[row + 2 * p + 1] = a * s + b * c
        p += step


@cuda.jit(fastmath=True)
def rope_block2d_explog(x, out, positions, n_pairs, base):
    t = cuda.blockIdx.x
    pos = float32(positions[t])
    neg_log_over_n = -math.log(base) / float32(n_pairs)
    n = int64(n_pairs)
    p = int64(cuda.threadIdx.x)
    while p < n:
        angle = pos * math.exp(float32(p) * neg_log_over_n)
        k = 2 * (t * n + p)
        x0 = x[k]
        x1 = x[k + 1]
        s = math.sin(angle)
        c = math.cos(angle)
        out[k] = x0 * c - x1 * s
        out[k + 1] = x0 * s + x1 * c
        p += cuda.blockDim.x


# ---- 02.3: launch_block2d -----------------------------------------------------------------
def launch_block2d_min(x, out, positions, n_pairs, base):
    tokens = positions.size
    threads = min(((n_pairs + 31) // 32) * 32, 1024)
    rope_block2d_while[tokens, threads](x, out, positions, numba.uint64(n_pairs),
                                        numba.float32(base))


def launch_block2d_ifcap(x, out, positions, n_pairs, base):
    warps = -(-n_pairs // 32)
    if warps > 32:
        warps = 32
    rope_block2d_int64[positions.shape[0], 32 * warps](x, out, positions, uint64(n_pairs),
                                                       float32(base))


ENTRIES = [
    ("02.1", "plain", rope_rows_plain),
    ("02.1", "early_return", rope_rows_return),
    ("02.1", "block_stride_loop", rope_rows_blockloop),
    ("02.2", "uint64_while", rope_block2d_while),
    ("02.2", "int64_while_divide", rope_block2d_int64),
    ("02.2", "exp_log", rope_block2d_explog),
    ("02.3", "min_rounded", launch_block2d_min),
    ("02.3", "warps_capped", launch_block2d_ifcap),
]
