"""Notebook 06: shuffle RMSNorm, 256-float head, norm+rope, fused head, launch."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, uint64, int64

FULL_MASK = 0xFFFFFFFF


# ---------------- 06.1 RMSNorm, one warp per row
@cuda.jit(fastmath=True)
def my_rms_norm_warp(x, out, weight, rows, eps):
    gid = cuda.grid(1)
    w = gid // 32
    lane = cuda.threadIdx.x % 32
    if w < rows:
        i = w * 64 + 2 * lane
        x0 = x[i]
        x1 = x[i + 1]
        ss = x0 * x0 + x1 * x1
        m = 16
        while m > 0:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[i] = x0 * scale * weight[2 * lane]
        out[i + 1] = x1 * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def my_rms_norm_warp_unrolled(x, out, weight, rows, eps):
    # warp from block and threadIdx, early return uniform per warp, unrolled butterfly
    warp = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    lane = cuda.threadIdx.x & 31
    if warp >= rows:
        return
    base = warp * 64
    a = x[base + lane + lane]
    b = x[base + lane + lane + 1]
    s = a * a + b * b
    s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
    r = math.sqrt(s * float32(0.015625) + eps)
    out[base + lane + lane] = weight[lane + lane] * (a / r)
    out[base + lane + lane + 1] = weight[lane + lane + 1] * (b / r)


@cuda.jit(fastmath=True)
def my_rms_norm_warp_down(x, out, weight, rows, eps):
    # shfl_down tree to lane 0, then broadcast from lane 0
    gid = cuda.grid(1)
    w = gid >> 5
    lane = gid & 31
    if w < rows:
        i = w * 64 + 2 * lane
        v0 = x[i]
        v1 = x[i + 1]
        t = v0 * v0 + v1 * v1
        for off in (16, 8, 4, 2, 1):
            t += cuda.shfl_down_sync(FULL_MASK, t, off)
        t = cuda.shfl_sync(FULL_MASK, t, 0)
        inv = float32(1.0) / math.sqrt(t / float32(64) + eps)
        out[i] = v0 * inv * weight[2 * lane]
        out[i + 1] = v1 * inv * weight[2 * lane + 1]


# ---------------- 06.2 256 floats, 4 warps
@cuda.jit(fastmath=True)
def rms_norm_256(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    lane = t % 32
    wid = t // 32
    i = r * 256 + 2 * t
    x0 = x[i]
    x1 = x[i + 1]
    ss = x0 * x0 + x1 * x1
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m //= 2
    if lane == 0:
        partial[wid] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[i] = x0 * scale * weight[2 * t]
    out[i + 1] = x1 * scale * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms_norm_256_warp0(x, out, weight, rows, eps):
    # warp 0 combines the four partials and publishes the scale through shared memory
    partial = cuda.shared.array(4, float32)
    scale_sh = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    lane = t & 31
    wid = t >> 5
    base = cuda.blockIdx.x * 256
    a = x[base + 2 * t]
    b = x[base + 2 * t + 1]
    s = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        s += cuda.shfl_xor_sync(FULL_MASK, s, m)
    if lane == 0:
        partial[wid] = s
    cuda.syncthreads()
    if t == 0:
        tot = float32(0.0)
        for k in range(4):
            tot += partial[k]
        scale_sh[0] = float32(1.0) / math.sqrt(tot * float32(1.0 / 256.0) + eps)
    cuda.syncthreads()
    sc = scale_sh[0]
    out[base + 2 * t] = a * sc * weight[2 * t]
    out[base + 2 * t + 1] = b * sc * weight[2 * t + 1]


# ---------------- 06.3 norm then rotate
@cuda.jit(fastmath=True)
def rms_rope_head(x, out, weight, positions, inv_freq, rows, eps):
    gid = cuda.grid(1)
    w = gid // 32
    lane = cuda.threadIdx.x % 32
    if w < rows:
        i = w * 64 + 2 * lane
        x0 = x[i]
        x1 = x[i + 1]
        ss = x0 * x0 + x1 * x1
        m = 16
        while m > 0:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        n0 = x0 * scale * weight[2 * lane]
        n1 = x1 * scale * weight[2 * lane + 1]
        theta = float32(positions[w]) * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        out[i] = n0 * c - n1 * s
        out[i + 1] = n0 * s + n1 * c


@cuda.jit(fastmath=True)
def rms_rope_head_early(x, out, weight, positions, inv_freq, rows, eps):
    # angle computed before the reduction; sincos overlapped with the shuffles
    warp = cuda.blockIdx.x * (cuda.blockDim.x >> 5) + (cuda.threadIdx.x >> 5)
    lane = cuda.threadIdx.x & 31
    if warp >= rows:
        return
    ang = float32(positions[warp]) * inv_freq[lane]
    sn = math.sin(ang)
    cs = math.cos(ang)
    e = warp * 64 + lane * 2
    a = x[e]
    b = x[e + 1]
    s = a * a + b * b
    s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
    r = math.sqrt(s * float32(0.015625) + eps)
    na = a / r * weight[lane * 2]
    nb = b / r * weight[lane * 2 + 1]
    out[e + 1] = na * sn + nb * cs
    out[e] = na * cs - nb * sn


# ---------------- 06.4 fused head
@cuda.jit(device=True, inline=True)
def _norm_rotate(qkv, out, wt, e, lane, pos, inv_freq, eps):
    a = qkv[e]
    b = qkv[e + 1]
    s = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        s += cuda.shfl_xor_sync(FULL_MASK, s, m)
    scale = float32(1.0) / math.sqrt(s / float32(64.0) + eps)
    na = a * scale * wt[2 * lane]
    nb = b * scale * wt[2 * lane + 1]
    th = pos * inv_freq[lane]
    c = math.cos(th)
    sn = math.sin(th)
    out[e] = na * c - nb * sn
    out[e + 1] = na * sn + nb * c


@cuda.jit(fastmath=True)
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    gid = cuda.grid(1)
    wi = gid // 32
    lane = cuda.threadIdx.x % 32
    if wi < total_warps:
        w = uint64(wi)
        token = w // heads_per_token
        head = w - token * heads_per_token
        e = w * uint64(64) + uint64(2 * lane)
        if head < heads_q + heads_k:
            a = qkv[e]
            b = qkv[e + uint64(1)]
            ss = a * a + b * b
            m = 16
            while m > 0:
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
                m //= 2
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            if head < heads_q:
                w0 = q_weight[2 * lane]
                w1 = q_weight[2 * lane + 1]
            else:
                w0 = k_weight[2 * lane]
                w1 = k_weight[2 * lane + 1]
            n0 = a * scale * w0
            n1 = b * scale * w1
            theta = float32(positions[token]) * inv_freq[lane]
            c = math.cos(theta)
            s = math.sin(theta)
            out[e] = n0 * c - n1 * s
            out[e + uint64(1)] = n0 * s + n1 * c
        else:
            out[e] = qkv[e]
            out[e + uint64(1)] = qkv[e + uint64(1)]


@cuda.jit(fastmath=True)
def rope_fused_head_branches(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                             heads_k, heads_per_token, total_warps, eps):
    # three explicit branches, a device function for the norm + rotation
    lane = cuda.threadIdx.x & 31
    wi = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if wi >= total_warps:
        return
    w = uint64(wi)
    token = w // heads_per_token
    head = w - token * heads_per_token
    e = w * uint64(64) + uint64(lane + lane)
    pos = float32(positions[token])
    if head < heads_q:
        _norm_rotate(qkv, out, q_weight, e, lane, pos, inv_freq, eps)
    elif head < heads_q + heads_k:
        _norm_rotate(qkv, out, k_weight, e, lane, pos, inv_freq, eps)
    else:
        v0 = qkv[e]
        v1 = qkv[e + uint64(1)]
        out[e] = v0
        out[e + uint64(1)] = v1


# ---------------- 06.5 launch
def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                 heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total_warps = tokens * hpt
    warps_per_block = 4
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    rope_fused_head[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), total_warps, float32(eps))


def launch_fused_8warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(8, total)
    blocks = math.ceil(total / wpb)
    rope_fused_head_branches[blocks, wpb * 32](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), int64(total), float32(eps))


def launch_fused_one_warp(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                          heads_k, heads_v, eps):
    total = tokens * (heads_q + heads_k + heads_v)
    rope_fused_head_branches[total, 32](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_q + heads_k + heads_v), total, float32(eps))


ENTRIES = [
    ("06.1", "xor_while", my_rms_norm_warp),
    ("06.1", "unrolled_return", my_rms_norm_warp_unrolled),
    ("06.1", "down_broadcast", my_rms_norm_warp_down),
    ("06.2", "all_threads_sum", rms_norm_256),
    ("06.2", "thread0_scale", rms_norm_256_warp0),
    ("06.3", "norm_then_angle", rms_rope_head),
    ("06.3", "angle_first_unrolled", rms_rope_head_early),
    ("06.4", "qk_shared_path", rope_fused_head),
    ("06.4", "device_fn_branches", rope_fused_head_branches),
    ("06.5", "four_warps", launch_fused),
    ("06.5", "eight_warps", launch_fused_8warps),
    ("06.5", "one_warp_blocks", launch_fused_one_warp),
]
