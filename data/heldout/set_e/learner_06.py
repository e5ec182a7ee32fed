"""Notebook 06 (fused QK-norm + RoPE), steps 06.1 .. 06.5."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numba
from numba import cuda, float32, uint64

FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------- 06.1 my_rms_norm_warp
@cuda.jit(fastmath=True)
def rms_warp_unrolled(x, out, weight, rows, eps):
    g = cuda.grid(1)
    row = g // 32
    lane = cuda.threadIdx.x % 32
    if row >= rows:
        return
    e = row * 64 + 2 * lane
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    out[e] = a * scale * weight[2 * lane]
    out[e + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def rms_warp_loop(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * (cuda.blockDim.x >> 5) + (cuda.threadIdx.x >> 5)
    if row < rows:  # the same for every lane of the warp
        base = row * 64
        a = x[base + lane + lane]
        b = x[base + lane + lane + 1]
        ss = a * a + b * b
        m = 16
        while m >= 1:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            m >>= 1
        rms = math.sqrt(ss * float32(1.0 / 64.0) + eps)
        out[base + lane + lane] = a / rms * weight[lane + lane]
        out[base + lane + lane + 1] = b / rms * weight[lane + lane + 1]


@cuda.jit(fastmath=True)
def rms_warp_down_broadcast(x, out, weight, rows, eps):
    # a tree to lane 0 with shfl_down, then lane 0's sum is broadcast
    tid = cuda.grid(1)
    row = tid >> 5
    lane = tid & 31
    if row >= rows:
        return
    a = x[row * 64 + 2 * lane]
    b = x[row * 64 + 2 * lane + 1]
    wa = weight[2 * lane]
    wb = weight[2 * lane + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_down_sync(FULL_MASK, ss, m)
    total = cuda.shfl_sync(FULL_MASK, ss, 0)
    inv = float32(1.0) / math.sqrt(total / float32(64.0) + eps)
    out[row * 64 + 2 * lane] = wa * (a * inv)
    out[row * 64 + 2 * lane + 1] = wb * (b * inv)


# ---------------------------------------------------------------- 06.2 rms_norm_256
@cuda.jit(fastmath=True)
def rms256_partials(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    r = cuda.blockIdx.x
    t = cuda.threadIdx.x
    lane = t % 32
    w = t // 32
    e = r * 256 + 2 * t
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    if lane == 0:
        partial[w] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[e] = a * scale * weight[2 * t]
    out[e + 1] = b * scale * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms256_warp0_final(x, out, weight, rows, eps):
    # warp 0 reduces the four partials with a second shuffle and publishes the scale
    partial = cuda.shared.array(4, float32)
    scale_s = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    lane = t & 31
    warp = t >> 5
    row = cuda.blockIdx.x
    a = x[row * 256 + 2 * t]
    b = x[row * 256 + 2 * t + 1]
    ss = a * a + b * b
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m //= 2
    if lane == 0:
        partial[warp] = ss
    cuda.syncthreads()
    if warp == 0:
        v = float32(0.0)
        if lane < 4:
            v = partial[lane]
        v += cuda.shfl_xor_sync(FULL_MASK, v, 2)
        v += cuda.shfl_xor_sync(FULL_MASK, v, 1)
        if lane == 0:
            scale_s[0] = float32(1.0) / math.sqrt(v * float32(1.0 / 256.0) + eps)
    cuda.syncthreads()
    s = scale_s[0]
    out[row * 256 + 2 * t] = a * s * weight[2 * t]
    out[row * 256 + 2 * t + 1] = b * s * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms256_loop_sum(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 256
    wa = weight[t + t]
    wb = weight[t + t + 1]
    a = x[base + t + t]
    b = x[base + t + t + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    if (t & 31) == 0:
        partial[t >> 5] = ss
    cuda.syncthreads()
    total = float32(0.0)
    for k in range(4):
        total += partial[k]
    rms = math.sqrt(total / float32(256.0) + eps)
    out[base + t + t] = wa * a / rms
    out[base + t + t + 1] = wb * b / rms


# ---------------------------------------------------------------- 06.3 rms_rope_head
@cuda.jit(fastmath=True)
def rms_rope_plain(x, out, weight, positions, inv_freq, rows, eps):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row >= rows:
        return
    e = row * 64 + 2 * lane
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    a = a * scale * weight[2 * lane]
    b = b * scale * weight[2 * lane + 1]
    angle = float32(positions[row]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    out[e] = a * c - b * s
    out[e + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rms_rope_loads_first(x, out, weight, positions, inv_freq, rows, eps):
    lane = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if row < rows:
        e = row * 64 + lane * 2
        a = x[e]
        b = x[e + 1]
        wa = weight[lane * 2]
        wb = weight[lane * 2 + 1]
        theta = float32(positions[row]) * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        ss = a * a + b * b
        m = 1
        while m < 32:  # the butterfly the other way round: 1, 2, 4, 8, 16
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            m <<= 1
        r = math.sqrt(ss * float32(0.015625) + eps)
        na = a * wa / r
        nb = b * wb / r
        out[e] = na * c - nb * s
        out[e + 1] = na * s + nb * c


# ---------------------------------------------------------------- 06.4 rope_fused_head
@cuda.jit(fastmath=True)
def fused_plain(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                heads_per_token, total_warps, eps):
    w = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if w >= total_warps:
        return
    uw = uint64(w)
    token = uw // heads_per_token
    head = uw - token * heads_per_token
    e = uw * uint64(64) + uint64(2 * lane)
    a = qkv[e]
    b = qkv[e + uint64(1)]
    if head < heads_q + heads_k:
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
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c
    else:
        out[e] = a
        out[e + uint64(1)] = b


@cuda.jit(fastmath=True)
def fused_three_branches(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                         heads_k, heads_per_token, total_warps, eps):
    # V first (copy and leave), then one norm + rope path with the weight picked
    tid = cuda.grid(1)
    w = tid >> 5
    lane = uint64(tid & 31)
    if w >= total_warps:
        return
    uw = uint64(w)
    token = uw // heads_per_token
    head = uw - heads_per_token * token
    e = (uw << uint64(6)) + lane + lane
    if head >= heads_q + heads_k:
        out[e] = qkv[e]
        out[e + uint64(1)] = qkv[e + uint64(1)]
        return
    a = qkv[e]
    b = qkv[e + uint64(1)]
    ss = a * a + b * b
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m >>= 1
    r = math.sqrt(ss * float32(1.0 / 64.0) + eps)
    if head < heads_q:
        a = a / r * q_weight[lane + lane]
        b = b / r * q_weight[lane + lane + uint64(1)]
    else:
        a = a / r * k_weight[lane + lane]
        b = b / r * k_weight[lane + lane + uint64(1)]
    th = float32(positions[token]) * inv_freq[lane]
    c = math.cos(th)
    s = math.sin(th)
    out[e] = a * c - b * s
    out[e + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def fused_uniform_shuffle(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                          heads_k, heads_per_token, total_warps, eps):
    # every live warp runs the butterfly (V too) and then chooses what to write
    lane = cuda.threadIdx.x & 31
    w = cuda.blockIdx.x * (cuda.blockDim.x // 32) + (cuda.threadIdx.x >> 5)
    if w < total_warps:
        uw = uint64(w)
        token = uw // heads_per_token
        head = uw - token * heads_per_token
        base = uw * uint64(64)
        i0 = base + uint64(2 * lane)
        i1 = i0 + uint64(1)
        a = qkv[i0]
        b = qkv[i1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        if head < heads_q:
            is_v = False
            wa = q_weight[2 * lane]
            wb = q_weight[2 * lane + 1]
        elif head < heads_q + heads_k:
            is_v = False
            wa = k_weight[2 * lane]
            wb = k_weight[2 * lane + 1]
        else:
            is_v = True
            wa = float32(1.0)
            wb = float32(1.0)
        if is_v:
            out[i0] = a
            out[i1] = b
        else:
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            na = a * scale * wa
            nb = b * scale * wb
            th = float32(positions[token]) * inv_freq[lane]
            c = math.cos(th)
            s = math.sin(th)
            out[i0] = na * c - nb * s
            out[i1] = na * s + nb * c


# ---------------------------------------------------------------- 06.5 launch_fused
def launch_fused_4warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = 4
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    fused_plain[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, numba.uint64(heads_q),
        numba.uint64(heads_k), numba.uint64(heads_per_token), total_warps,
        numba.float32(eps))


def launch_fused_8warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = int(tokens * hpt)
    threads = 256
    blocks = math.ceil(total * 32 / threads)
    fused_three_branches[blocks, threads](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), total, float32(eps))


def launch_fused_fit(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                     heads_k, heads_v, eps):
    # up to 32 warps a block, fewer when there are fewer heads in all
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(32, total)
    blocks = -(-total // wpb)
    fused_uniform_shuffle[blocks, wpb * 32](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), total, float32(eps))



# ---------------------------------------------------------------- extra approaches
@cuda.jit(fastmath=True)
def rms_rope_laneid(x, out, weight, positions, inv_freq, rows, eps):
    # lane from cuda.laneid, the row from the warp's first thread; shfl_down + broadcast
    lane = cuda.laneid
    row = (cuda.grid(1) - lane) // 32
    if row >= rows:
        return
    i0 = row * 64 + 2 * lane
    a = x[i0]
    b = x[i0 + 1]
    ss = a * a + b * b
    m = 16
    while m > 0:
        ss += cuda.shfl_down_sync(FULL_MASK, ss, m)
        m //= 2
    ss = cuda.shfl_sync(FULL_MASK, ss, 0)
    inv = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    na = a * inv * weight[2 * lane]
    nb = b * inv * weight[2 * lane + 1]
    th = float32(positions[row]) * inv_freq[lane]
    out[i0] = na * math.cos(th) - nb * math.sin(th)
    out[i0 + 1] = na * math.sin(th) + nb * math.cos(th)

ENTRIES = [
    ("06.1", "unrolled_butterfly_return", rms_warp_unrolled),
    ("06.1", "loop_butterfly_if_divide", rms_warp_loop),
    ("06.1", "shfl_down_broadcast", rms_warp_down_broadcast),
    ("06.2", "lane0_partials", rms256_partials),
    ("06.2", "warp0_second_shuffle", rms256_warp0_final),
    ("06.2", "loop_sum_weights_first", rms256_loop_sum),
    ("06.3", "norm_then_rotate", rms_rope_plain),
    ("06.3", "loads_first_ascending_butterfly", rms_rope_loads_first),
    ("06.4", "qk_branch_v_copy", fused_plain),
    ("06.4", "v_first_return", fused_three_branches),
    ("06.4", "uniform_shuffle_then_branch", fused_uniform_shuffle),
    ("06.5", "warps_4", launch_fused_4warps),
    ("06.5", "warps_8", launch_fused_8warps),
    ("06.5", "fit_up_to_32_warps", launch_fused_fit),
    ("06.3", "laneid_down_broadcast", rms_rope_laneid),
]
