"""Notebook 06 (fused QK-norm + RoPE), steps 06.1 .. 06.5."""
import math

from numba import cuda, float32, uint64

FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------- 06.1
@cuda.jit(fastmath=True)
def my_rms_norm_warp(x, out, weight, rows, eps):
    g = cuda.grid(1)
    row = g // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
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
def my_rms_norm_warp_shifts(x, out, weight, rows, eps):
    g = cuda.grid(1)
    row = g >> 5
    lane = cuda.threadIdx.x & 31
    if row >= rows:
        return
    c = lane + lane
    w0 = weight[c]
    w1 = weight[c + 1]
    a = x[row * 64 + c]
    b = x[row * 64 + c + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    inv = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    out[row * 64 + c] = (a * inv) * w0
    out[row * 64 + c + 1] = (b * inv) * w1


# ---------------------------------------------------------------- 06.2
@cuda.jit(fastmath=True)
def rms_norm_256(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    warp = t // 32
    lane = t % 32
    i = r * 256 + 2 * t
    a = x[i]
    b = x[i + 1]
    ss = a * a + b * b
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m //= 2
    if lane == 0:
        partial[warp] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[i] = a * scale * weight[2 * t]
    out[i + 1] = b * scale * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms_norm_256_broadcast(x, out, weight, rows, eps):
    # thread 0 adds the four warp sums and computes the scale once; a second barrier
    # hands it to everyone
    partial = cuda.shared.array(4, float32)
    shared_scale = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 256
    c = t + t
    a = x[base + c]
    b = x[base + c + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    if (t & 31) == 0:
        partial[t >> 5] = ss
    cuda.syncthreads()
    if t == 0:
        total = (partial[0] + partial[1]) + (partial[2] + partial[3])
        shared_scale[0] = float32(1.0) / math.sqrt(total * float32(1.0 / 256.0) + eps)
    cuda.syncthreads()
    s = shared_scale[0]
    out[base + c] = a * s * weight[c]
    out[base + c + 1] = b * s * weight[c + 1]


# ---------------------------------------------------------------- 06.3
@cuda.jit(fastmath=True)
def rms_rope_head(x, out, weight, positions, inv_freq, rows, eps):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
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
    row = cuda.grid(1) >> 5
    if row >= rows:
        return
    lane = cuda.threadIdx.x & 31
    # the angle does not depend on the norm: start the sin/cos while the sum is reduced
    angle = float32(positions[row]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    k = lane + lane
    i = row * 64 + k
    a = x[i]
    b = x[i + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    scale = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    na = a * scale * weight[k]
    nb = b * scale * weight[k + 1]
    out[i] = na * c - nb * s
    out[i + 1] = na * s + nb * c


# ---------------------------------------------------------------- 06.4
@cuda.jit(fastmath=True)
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    w = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if w >= total_warps:
        return
    wu = uint64(w)
    token = wu // heads_per_token
    head = wu - token * heads_per_token
    i = wu * uint64(64) + uint64(2 * lane)
    a = qkv[i]
    b = qkv[i + uint64(1)]
    if head < heads_q + heads_k:
        ss = a * a + b * b
        for m in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        if head < heads_q:
            w0 = q_weight[2 * lane]
            w1 = q_weight[2 * lane + 1]
        else:
            w0 = k_weight[2 * lane]
            w1 = k_weight[2 * lane + 1]
        na = a * scale * w0
        nb = b * scale * w1
        angle = float32(positions[token]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = na * c - nb * s
        out[i + uint64(1)] = na * s + nb * c
    else:
        out[i] = a
        out[i + uint64(1)] = b


@cuda.jit(device=True, inline=True)
def _norm_rotate(qkv, out, wt, i, k, lane, pos, inv_freq, eps):
    a = qkv[i]
    b = qkv[i + uint64(1)]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    scale = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    na = a * scale * wt[k]
    nb = b * scale * wt[k + 1]
    angle = pos * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    out[i] = na * c - nb * s
    out[i + uint64(1)] = na * s + nb * c


@cuda.jit(fastmath=True)
def rope_fused_head_device_fn(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                              heads_k, heads_per_token, total_warps, eps):
    g = cuda.grid(1)
    w = g >> 5
    if w >= total_warps:
        return
    lane = cuda.threadIdx.x & 31
    k = lane + lane
    wu = uint64(w)
    token = wu // heads_per_token
    head = wu - token * heads_per_token
    i = (wu << uint64(6)) + uint64(k)
    if head < heads_q:
        _norm_rotate(qkv, out, q_weight, i, k, lane, float32(positions[token]), inv_freq, eps)
    elif head < heads_q + heads_k:
        _norm_rotate(qkv, out, k_weight, i, k, lane, float32(positions[token]), inv_freq, eps)
    else:
        out[i] = qkv[i]
        out[i + uint64(1)] = qkv[i + uint64(1)]


# ---------------------------------------------------------------- 06.5
def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                 heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = 4
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    rope_fused_head[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


def launch_fused_8_warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                         heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = 8
    blocks = -(-total_warps // warps_per_block)
    rope_fused_head_device_fn[blocks, 256](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


def launch_fused_fit(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                     heads_k, heads_v, eps):
    # as many warps per block as there are heads, up to 32 (1024 threads)
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = min(32, total_warps)
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    rope_fused_head[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


ENTRIES = [
    ("06.1", "div_mod_loop_butterfly", my_rms_norm_warp),
    ("06.1", "shifts_unrolled", my_rms_norm_warp_shifts),
    ("06.2", "all_threads_add_partials", rms_norm_256),
    ("06.2", "thread0_scale_broadcast", rms_norm_256_broadcast),
    ("06.3", "norm_then_angle", rms_rope_head),
    ("06.3", "angle_first", rms_rope_head_angle_first),
    ("06.4", "weights_select", rope_fused_head),
    ("06.4", "device_fn_per_branch", rope_fused_head_device_fn),
    ("06.5", "warps_4", launch_fused),
    ("06.5", "warps_8_device_fn", launch_fused_8_warps),
    ("06.5", "fit_up_to_32_warps", launch_fused_fit),
]
