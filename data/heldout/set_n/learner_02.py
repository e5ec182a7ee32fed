import math
import numba
from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def rope_rows_a(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        theta = float32(positions[token]) * inv_freq[pair]
        c = math.cos(theta)
        s = math.sin(theta)
        e = token * 2 * n_pairs + 2 * pair
        a = x[e]
        b = x[e + 1]
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c


@cuda.jit
def rope_rows_b(x, out, positions, inv_freq, n_pairs):
    pair = cuda.threadIdx.x
    if pair >= n_pairs:
        return
    row = cuda.blockIdx.x * (n_pairs + n_pairs)
    a = x[row + pair + pair]
    b = x[row + pair + pair + 1]
    pos = float32(positions[cuda.blockIdx.x])
    ang = inv_freq[pair] * pos
    sn = math.sin(ang)
    cs = math.cos(ang)
    out[row + pair + pair] = cs * a - sn * b
    out[row + pair + pair + 1] = sn * a + cs * b


@cuda.jit(fastmath=True)
def block2d_a(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pos = float32(positions[token])
    hidden = float32(2 * n_pairs)
    row = token * uint64(2) * n_pairs
    p = uint64(cuda.threadIdx.x)
    while p < n_pairs:
        f = float32(1.0) / math.pow(base, float32(2 * p) / hidden)
        th = pos * f
        c = math.cos(th)
        s = math.sin(th)
        e = row + uint64(2) * p
        a = x[e]
        b = x[e + uint64(1)]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        p += uint64(cuda.blockDim.x)


@cuda.jit(fastmath=True)
def block2d_b(x, out, positions, n_pairs, base):
    n = numba.int64(n_pairs)
    tok = cuda.blockIdx.x
    pos = float32(positions[tok])
    lnb = math.log(base)
    start = tok * 2 * n
    p = cuda.threadIdx.x
    while p < n:
        f = math.exp(-float32(p) / float32(n) * lnb)
        th = pos * f
        e = start + 2 * p
        a = x[e]
        b = x[e + 1]
        s = math.sin(th)
        c = math.cos(th)
        out[e] = a * c - b * s
        out[e + 1] = b * c + a * s
        p += cuda.blockDim.x


def launch_block2d_a(x, out, positions, n_pairs, base):
    tokens = positions.size
    threads = min(1024, ((n_pairs + 31) // 32) * 32)
    block2d_a[tokens, threads](x, out, positions, numba.uint64(n_pairs), numba.float32(base))


def launch_block2d_b(x, out, positions, n_pairs, base):
    warps = math.ceil(n_pairs / 32)
    if warps > 32:
        warps = 32
    block2d_b[positions.shape[0], 32 * warps](x, out, positions, uint64(n_pairs), float32(base))


ENTRIES = [
    ("02.1", "guarded if, fastmath, trig before loads", rope_rows_a),
    ("02.1", "early return, loads first, no fastmath", rope_rows_b),
    ("02.2", "uint64 while loop, 1/pow", block2d_a),
    ("02.2", "int64 while loop, exp/log", block2d_b),
    ("02.3", "min(1024, roundup)", launch_block2d_a),
    ("02.3", "warps capped at 32", launch_block2d_b),
]


@cuda.jit(fastmath=True)
def rope_rows_c(x, out, positions, inv_freq, n_pairs):
    # a view of the token's row, indexed by the pair
    token = cuda.blockIdx.x
    hidden = 2 * n_pairs
    xr = x[token * hidden:(token + 1) * hidden]
    orow = out[token * hidden:(token + 1) * hidden]
    p = cuda.threadIdx.x
    if p < n_pairs:
        ang = float32(positions[token]) * inv_freq[p]
        c = math.cos(ang)
        s = math.sin(ang)
        orow[2 * p] = xr[2 * p] * c - xr[2 * p + 1] * s
        orow[2 * p + 1] = xr[2 * p] * s + xr[2 * p + 1] * c


@cuda.jit(fastmath=True)
def block2d_c(x, out, positions, n_pairs, base):
    # one pow for the first pair, then a fixed ratio per stride step
    token = uint64(cuda.blockIdx.x)
    bd = uint64(cuda.blockDim.x)
    p = uint64(cuda.threadIdx.x)
    es = float32(-1.0) / float32(n_pairs)
    f = math.pow(base, es * float32(p))
    ratio = math.pow(base, es * float32(bd))
    pos = float32(positions[token])
    row = token * (n_pairs + n_pairs)
    while p < n_pairs:
        th = pos * f
        e = row + p + p
        a = x[e]
        b = x[e + uint64(1)]
        c = math.cos(th)
        s = math.sin(th)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
        f = f * ratio
        p += bd


def launch_block2d_c(x, out, positions, n_pairs, base):
    threads = 32 * ((n_pairs + 31) // 32)
    if threads > 1024:
        threads = 1024
    block2d_c[(positions.size,), (threads,)](x, out, positions, uint64(n_pairs), float32(base))


ENTRIES += [
    ("02.1", "row slices", rope_rows_c),
    ("02.2", "pow ratio recurrence per stride step", block2d_c),
    ("02.3", "if-capped, tuple grid/block, ratio kernel", launch_block2d_c),
]
