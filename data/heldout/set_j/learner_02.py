import ropelab
import math
import numba
from numba import cuda, float32, uint64, int64


# 02.1 rope_rows
@cuda.jit(fastmath=True)
def rope_rows_a(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        e = token * 2 * n_pairs + 2 * pair
        a = x[e]
        b = x[e + 1]
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rope_rows_b(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    token = cuda.blockIdx.x
    row = token * (n_pairs + n_pairs)
    a = x[row + 2 * pair]
    b = x[row + 2 * pair + 1]
    pos = float32(positions[token])
    f = inv_freq[pair]
    theta = pos * f
    s = math.sin(theta)
    c = math.cos(theta)
    out[row + 2 * pair] = cuda.fma(a, c, -(b * s))
    out[row + 2 * pair + 1] = cuda.fma(b, c, a * s)


# 02.2 my_rope_block2d
@cuda.jit(fastmath=True)
def block2d_a(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    pos = float32(positions[token])
    row = token * n_pairs * uint64(2)
    inv_n = float32(1.0) / float32(n_pairs)
    while pair < n_pairs:
        freq = math.pow(base, -float32(pair) * inv_n)
        angle = pos * freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = row + pair * uint64(2)
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        pair += step


@cuda.jit(fastmath=True)
def block2d_b(x, out, positions, n_pairs, base):
    t = uint64(cuda.threadIdx.x)
    nt = uint64(cuda.blockDim.x)
    token = uint64(cuda.blockIdx.x)
    hidden = float32(n_pairs * uint64(2))
    p = float32(positions[token])
    base_idx = token * (n_pairs + n_pairs)
    j = t
    while j < n_pairs:
        expo = float32(2.0) * float32(j) / hidden
        inv = float32(1.0) / (base ** expo)
        th = p * inv
        sn = math.sin(th)
        cs = math.cos(th)
        k = base_idx + j + j
        u = x[k]
        v = x[k + uint64(1)]
        out[k] = u * cs - v * sn
        out[k + uint64(1)] = u * sn + v * cs
        j = j + nt


# 02.3 launch_block2d
def launch_block2d_a(x, out, positions, n_pairs, base):
    threads = ((n_pairs + 31) // 32) * 32
    if threads > 1024:
        threads = 1024
    blocks = positions.size
    block2d_a[blocks, threads](x, out, positions, numba.uint64(n_pairs), numba.float32(base))


def launch_block2d_b(x, out, positions, n_pairs, base):
    warps = math.ceil(n_pairs / 32)
    threads = min(32 * warps, 1024)
    block2d_b[positions.size, threads](x, out, positions, numba.uint64(n_pairs),
                                       numba.float32(base))


ENTRIES = [
    ("02.1", "guard_if", rope_rows_a),
    ("02.1", "early_return_loads_first_fma", rope_rows_b),
    ("02.2", "while_stride_mul_inv", block2d_a),
    ("02.2", "while_stride_pow_op", block2d_b),
    ("02.3", "roundup_cap_if", launch_block2d_a),
    ("02.3", "ceil_warps_min", launch_block2d_b),
]
