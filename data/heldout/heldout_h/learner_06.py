"""Notebook 06: RMSNorm by warp shuffles, then the fused QK-norm + RoPE head."""
import ropelab  # noqa: F401

import math

import numba
from numba import cuda, float32, int64, uint64

FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------- 06.1
@cuda.jit(fastmath=True)
def rms_norm_warp_xor(x, out, weight, rows, eps):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row >= rows:
        return
    i = row * 64 + 2 * lane
    a = x[i]
    b = x[i + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    out[i] = a * scale * weight[2 * lane]
    out[i + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def rms_norm_warp_down(x, out, weight, rows, eps):
    tid = cuda.threadIdx.x
    row = cuda.blockIdx.x * (cuda.blockDim.x >> 5) + (tid >> 5)
    lane = tid & 31
    if row < rows:
        base = row * 64 + lane * 2
        a = x[base]
        b = x[base + 1]
        ss = a * a
        ss += b * b
        off = 16
        while off > 0:
            ss += cuda.shfl_down_sync(FULL_MASK, ss, off)
            off >>= 1
        ss = cuda.shfl_sync(FULL_MASK, ss, 0)  # lane 0 holds the sum: hand it to all
        r = math.sqrt(ss * float32(1.0 / 64.0) + eps)
        out[base] = weight[lane * 2] * (a / r)
        out[base + 1] = weight[lane * 2 + 1] * (b / r)


# ---------------------------------------------------------------- 06.2
@cuda.jit(fastmath=True)
def rms_norm_256_partials(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    lane = t % 32
    w = t // 32
    i = r * 256 + 2 * t
    a = x[i]
    b = x[i + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    if lane == 0:
        partial[w] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[i] = a * scale * weight[2 * t]
    out[i + 1] = b * scale * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms_norm_256_two_level(x, out, weight, rows, eps):
    # warp sums to shared, warp 0 reduces the four by shuffles, the result back via shared
    partial = cuda.shared.array(4, float32)
    result = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    lane = t & 31
    warp = t >> 5
    base = cuda.blockIdx.x * 256 + (t << 1)
    a = x[base]
    b = x[base + 1]
    v = a * a + b * b
    m = 16
    while m >= 1:
        v += cuda.shfl_down_sync(FULL_MASK, v, m)
        m >>= 1
    if lane == 0:
        partial[warp] = v
    cuda.syncthreads()
    if warp == 0:
        u = partial[lane] if lane < 4 else float32(0.0)
        u += cuda.shfl_xor_sync(FULL_MASK, u, 2)
        u += cuda.shfl_xor_sync(FULL_MASK, u, 1)
        if lane == 0:
            result[0] = u
    cuda.syncthreads()
    inv = float32(1.0) / math.sqrt(result[0] * float32(1.0 / 256.0) + eps)
    out[base] = a * inv * weight[t << 1]
    out[base + 1] = b * inv * weight[(t << 1) + 1]


# ---------------------------------------------------------------- 06.3
@cuda.jit(fastmath=True)
def rms_rope_head_plain(x, out, weight, positions, inv_freq, rows, eps):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row >= rows:
        return
    i = row * 64 + 2 * lane
    a = x[i]
    b = x[i + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    a = a * scale * weight[2 * lane]
    b = b * scale * weight[2 * lane + 1]
    angle = float32(positions[row]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    out[i] = a * c - b * s
    out[i + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rms_rope_head_angle_first(x, out, weight, positions, inv_freq, rows, eps):
    tid = cuda.threadIdx.x
    row = cuda.blockIdx.x * 4 + (tid >> 5)
    lane = tid & 31
    if row < rows:
        # every load up front: the pair, its weights, the angle's inputs
        base = (row << 6) + (lane << 1)
        a = x[base]
        b = x[base + 1]
        wa = weight[lane << 1]
        wb = weight[(lane << 1) + 1]
        theta = inv_freq[lane] * float32(positions[row])
        c = math.cos(theta)
        s = math.sin(theta)
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        r = math.sqrt(ss * float32(0.015625) + eps)
        na = a * wa / r
        nb = b * wb / r
        out[base] = na * c - nb * s
        out[base + 1] = na * s + nb * c


# ---------------------------------------------------------------- 06.4
@cuda.jit(fastmath=True)
def fused_head_branches(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                        heads_per_token, total_warps, eps):
    w = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if w >= total_warps:
        return
    uw = uint64(w)
    token = uw // heads_per_token
    head = uw - token * heads_per_token
    i = w * 64 + 2 * lane
    a = qkv[i]
    b = qkv[i + 1]
    if head >= heads_q + heads_k:  # V: copied as is
        out[i] = a
        out[i + 1] = b
        return
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    if head < heads_q:
        wa = q_weight[2 * lane]
        wb = q_weight[2 * lane + 1]
    else:
        wa = k_weight[2 * lane]
        wb = k_weight[2 * lane + 1]
    a = a * scale * wa
    b = b * scale * wb
    angle = float32(positions[token]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    out[i] = a * c - b * s
    out[i + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def fused_head_uint(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    gid = cuda.grid(1)
    w = gid >> 5
    if w >= total_warps:
        return
    lane = cuda.threadIdx.x & 31
    uw = uint64(w)
    token = uw // heads_per_token
    head = uw - token * heads_per_token
    base = (w << 6) + (lane << 1)
    x0 = qkv[base]
    x1 = qkv[base + 1]
    is_v = head >= heads_q + heads_k
    # the butterfly runs in every warp (V warps too: all lanes of a warp agree)
    ss = x0 * x0 + x1 * x1
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m >>= 1
    if is_v:
        out[base] = x0
        out[base + 1] = x1
    else:
        r = math.sqrt(ss * float32(1.0 / 64.0) + eps)
        is_q = head < heads_q
        wa = q_weight[lane << 1] if is_q else k_weight[lane << 1]
        wb = q_weight[(lane << 1) + 1] if is_q else k_weight[(lane << 1) + 1]
        n0 = x0 / r * wa
        n1 = x1 / r * wb
        theta = float32(positions[token]) * inv_freq[lane]
        s = math.sin(theta)
        c = math.cos(theta)
        out[base + 1] = n0 * s + n1 * c
        out[base] = n0 * c - n1 * s


# ---------------------------------------------------------------- 06.5
def launch_fused_4warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = 4
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    fused_head_branches[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, numba.uint64(heads_q),
        numba.uint64(heads_k), numba.uint64(heads_per_token), numba.int64(total_warps),
        numba.float32(eps))


def launch_fused_fit(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                     heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(8, total)  # up to 8 warps a block, fewer when there are fewer heads
    blocks = math.ceil(total / wpb)
    fused_head_uint[blocks, 32 * wpb](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), int64(total), float32(eps))


ENTRIES = [
    ("06.1", "xor_butterfly", rms_norm_warp_xor),
    ("06.1", "down_then_broadcast", rms_norm_warp_down),
    ("06.2", "four_partials_shared", rms_norm_256_partials),
    ("06.2", "two_level_shuffle", rms_norm_256_two_level),
    ("06.3", "norm_then_rotate", rms_rope_head_plain),
    ("06.3", "loads_and_angle_first", rms_rope_head_angle_first),
    ("06.4", "v_copy_early_return", fused_head_branches),
    ("06.4", "select_weights", fused_head_uint),
    ("06.5", "four_warps", launch_fused_4warps),
    ("06.5", "up_to_eight_warps", launch_fused_fit),
]
