import ropelab  # noqa: F401
import math
import numba
from numba import cuda, uint64, float32

FULL = 0xFFFFFFFF


@cuda.jit(device=True)
def _warp_allsum(v):
    m = 16
    while m > 0:
        v += cuda.shfl_xor_sync(FULL, v, m)
        m //= 2
    return v


@cuda.jit
def my_rms_norm_warp(x, out, weight, rows, eps):
    g = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = g // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        e = row * 64 + 2 * lane
        x0 = x[e]
        x1 = x[e + 1]
        ss = x0 * x0 + x1 * x1
        ss = _warp_allsum(ss)
        inv = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[e] = x0 * inv * weight[2 * lane]
        out[e + 1] = x1 * inv * weight[2 * lane + 1]


@cuda.jit
def my_rms_norm_warp_v2(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if row >= rows:
        return
    e = row * 64 + lane * 2
    x0 = x[e]
    x1 = x[e + 1]
    ss = x0 * x0 + x1 * x1
    ss += cuda.shfl_xor_sync(FULL, ss, 16)
    ss += cuda.shfl_xor_sync(FULL, ss, 8)
    ss += cuda.shfl_xor_sync(FULL, ss, 4)
    ss += cuda.shfl_xor_sync(FULL, ss, 2)
    ss += cuda.shfl_xor_sync(FULL, ss, 1)
    r = math.sqrt(ss * float32(0.015625) + eps)
    out[e] = weight[lane * 2] * (x0 / r)
    out[e + 1] = weight[lane * 2 + 1] * (x1 / r)


@cuda.jit
def rms_norm_256(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    e = r * 256 + 2 * t
    x0 = x[e]
    x1 = x[e + 1]
    ss = _warp_allsum(x0 * x0 + x1 * x1)
    if t % 32 == 0:
        partial[t // 32] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    inv = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[e] = x0 * inv * weight[2 * t]
    out[e + 1] = x1 * inv * weight[2 * t + 1]


@cuda.jit
def rms_rope_head(x, out, weight, positions, inv_freq, rows, eps):
    g = cuda.grid(1)
    row = g // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        e = row * 64 + 2 * lane
        x0 = x[e]
        x1 = x[e + 1]
        ss = _warp_allsum(x0 * x0 + x1 * x1)
        inv = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        n0 = x0 * inv * weight[2 * lane]
        n1 = x1 * inv * weight[2 * lane + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = n0 * c - n1 * s
        out[e + 1] = n0 * s + n1 * c


@cuda.jit
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    g = cuda.grid(1)
    w = g // 32
    lane = cuda.threadIdx.x % 32
    if w < total_warps:
        wu = uint64(w)
        token = wu // heads_per_token
        h = wu - token * heads_per_token
        e = w * 64 + 2 * lane
        x0 = qkv[e]
        x1 = qkv[e + 1]
        if h < heads_q + heads_k:
            ss = _warp_allsum(x0 * x0 + x1 * x1)
            inv = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            if h < heads_q:
                w0 = q_weight[2 * lane]
                w1 = q_weight[2 * lane + 1]
            else:
                w0 = k_weight[2 * lane]
                w1 = k_weight[2 * lane + 1]
            n0 = x0 * inv * w0
            n1 = x1 * inv * w1
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[e] = n0 * c - n1 * s
            out[e + 1] = n0 * s + n1 * c
        else:
            out[e] = x0
            out[e + 1] = x1


def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                 heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    blocks = (total + 3) // 4
    u = numba.uint64
    rope_fused_head[blocks, 128](qkv, out, q_weight, k_weight, positions, inv_freq,
                                 u(heads_q), u(heads_k), u(hpt), numba.int64(total),
                                 numba.float32(eps))


def launch_fused_v2(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                    heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(8, total)
    blocks = math.ceil(total / wpb)
    u = numba.uint64
    rope_fused_head[blocks, 32 * wpb](qkv, out, q_weight, k_weight, positions, inv_freq,
                                      u(heads_q), u(heads_k), u(hpt), numba.int64(total),
                                      numba.float32(eps))


ENTRIES = [
    ("06.1", "loop_butterfly", my_rms_norm_warp),
    ("06.1", "unrolled_divide", my_rms_norm_warp_v2),
    ("06.2", "warp_then_shared", rms_norm_256),
    ("06.3", "norm_rotate", rms_rope_head),
    ("06.4", "branch_qkv", rope_fused_head),
    ("06.5", "4_warps", launch_fused),
    ("06.5", "8_warps", launch_fused_v2),
]
