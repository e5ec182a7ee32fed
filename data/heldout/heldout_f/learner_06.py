"""Set F, notebook 06 (06_fused_qknorm_rope.ipynb): steps 06.1 .. 06.5."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, int64, uint64

FULL_MASK = 0xFFFFFFFF


# ---- 06.1: my_rms_norm_warp ---------------------------------------------------------------
@cuda.jit(fastmath=True)
def rms_warp_xor(x, out, weight, rows, eps):
    g = cuda.grid(1)
    row = g // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        base = row * 64 + 2 * lane
        a = x[base]
        b = x[base + 1]
        ss = a * a + b * b
        m = 16
        while m > 0:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[base] = a * scale * weight[2 * lane]
        out[base + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def rms_warp_down_bcast(x, out, weight, rows, eps):
    warp = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) >> 5
    lane = cuda.threadIdx.x & 31
    if warp >= rows:
        return
    i = warp * 64 + lane * 2
    v0 = x[i]
    v1 = x[i + 1]
    s = v0 * v0 + v1 * v1
    s += cuda.shfl_down_sync(FULL_MASK, s, 16)
    s += cuda.shfl_down_sync(FULL_MASK, s, 8)
    s += cuda.shfl_down_sync(FULL_MASK, s, 4)
    s += cuda.shfl_down_sync(FULL_MASK, s, 2)
    s += cuda.shfl_down_sync(FULL_MASK, s, 1)
    total = cuda.shfl_sync(FULL_MASK, s, 0)
    inv_rms = float32(1.0) / math.sqrt(total * float32(1.0 / 64.0) + eps)
    w0 = weight[lane * 2]
    w1 = weight[lane * 2 + 1]
    out[i] = w0 * (v0 * inv_rms)
    out[i + 1] = w1 * (v1 * inv_rms)


@cuda.jit(fastmath=True)
def rms_warp_unrolled_xor(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        k = row * 64 + lane + lane
        x0 = x[k]
        x1 = x[k + 1]
        ss = x0 * x0
        ss += x1 * x1
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        rms = math.sqrt(ss / float32(64.0) + eps)
        out[k] = x0 / rms * weight[lane + lane]
        out[k + 1] = x1 / rms * weight[lane + lane + 1]


# ---- 06.2: rms_norm_256 -------------------------------------------------------------------
@cuda.jit(fastmath=True)
def rms256_partials(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
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
def rms256_thread0_total(x, out, weight, rows, eps):
    # warps' sums into shared, thread 0 adds them into one shared total, a second barrier
    sums = cuda.shared.array(5, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 256 + t * 2
    a = x[i]
    b = x[i + 1]
    s = a * a + b * b
    off = 16
    while off >= 1:
        s += cuda.shfl_down_sync(FULL_MASK, s, off)
        off >>= 1
    if (t & 31) == 0:
        sums[t >> 5] = s
    cuda.syncthreads()
    if t == 0:
        acc = float32(0.0)
        for k in range(4):
            acc += sums[k]
        sums[4] = float32(1.0) / math.sqrt(acc / float32(256.0) + eps)
    cuda.syncthreads()
    scale = sums[4]
    out[i] = a * scale * weight[t * 2]
    out[i + 1] = b * scale * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def rms256_loop_sum(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    row = cuda.blockIdx.x
    if row >= rows:  # uniform over the block: every thread of a block leaves together
        return
    base = row * 256
    x0 = x[base + 2 * t]
    x1 = x[base + 2 * t + 1]
    v = x0 * x0 + x1 * x1
    m = 1
    while m < 32:
        v += cuda.shfl_xor_sync(FULL_MASK, v, m)
        m *= 2
    if t % 32 == 0:
        partial[t // 32] = v
    cuda.syncthreads()
    total = float32(0.0)
    for w in range(4):
        total += partial[w]
    inv = float32(1.0) / math.sqrt(total * float32(1.0 / 256.0) + eps)
    out[base + 2 * t] = x0 * inv * weight[2 * t]
    out[base + 2 * t + 1] = x1 * inv * weight[2 * t + 1]


# ---- 06.3: rms_rope_head ------------------------------------------------------------------
@cuda.jit(fastmath=True)
def rms_rope_plain(x, out, weight, positions, inv_freq, rows, eps):
    row = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        i = row * 64 + 2 * lane
        a = x[i]
        b = x[i + 1]
        ss = a * a + b * b
        m = 16
        while m > 0:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        a = a * scale * weight[2 * lane]
        b = b * scale * weight[2 * lane + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = a * c - b * s
        out[i + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rms_rope_trig_first(x, out, weight, positions, inv_freq, rows, eps):
    # the angle, cos and sin before the reduction (they do not depend on it)
    warp = cuda.grid(1) >> 5
    lane = cuda.threadIdx.x & 31
    if warp >= rows:
        return
    theta = float32(positions[warp]) * inv_freq[lane]
    cs = math.cos(theta)
    sn = math.sin(theta)
    k = warp * 64 + lane * 2
    u = x[k]
    v = x[k + 1]
    ss = u * u + v * v
    ss += cuda.shfl_down_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_down_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_down_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_down_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_down_sync(FULL_MASK, ss, 1)
    ss = cuda.shfl_sync(FULL_MASK, ss, 0)
    r = math.sqrt(ss / float32(64.0) + eps)
    n0 = u / r * weight[lane * 2]
    n1 = v / r * weight[lane * 2 + 1]
    out[k + 1] = n0 * sn + n1 * cs
    out[k] = n0 * cs - n1 * sn


# ---- 06.4: rope_fused_head ----------------------------------------------------------------
@cuda.jit(fastmath=True)
def fused_branch(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                 heads_per_token, total_warps, eps):
    w = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if w < total_warps:
        uw = uint64(w)
        token = uw // heads_per_token
        head = uw - token * heads_per_token
        i = uw * uint64(64) + uint64(2 * lane)
        a = qkv[i]
        b = qkv[i + uint64(1)]
        if head < heads_q + heads_k:
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
            a = a * scale * w0
            b = b * scale * w1
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[i] = a * c - b * s
            out[i + uint64(1)] = a * s + b * c
        else:
            out[i] = a
            out[i + uint64(1)] = b


@cuda.jit(fastmath=True)
def fused_uniform_reduce(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                         heads_per_token, total_warps, eps):
    # every head (V too) runs the reduction, so the shuffles are reached by every warp
    warp = cuda.grid(1) >> 5
    if warp >= total_warps:
        return
    lane = cuda.threadIdx.x & 31
    wu = uint64(warp)
    token = wu // heads_per_token
    head = wu - token * heads_per_token
    k = wu * uint64(64) + uint64(lane) * uint64(2)
    v0 = qkv[k]
    v1 = qkv[k + uint64(1)]
    ss = v0 * v0 + v1 * v1
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    if head >= heads_q + heads_k:
        out[k] = v0
        out[k + uint64(1)] = v1
        return
    inv = float32(1.0) / math.sqrt(ss * float32(1.0 / 64.0) + eps)
    if head < heads_q:
        n0 = v0 * inv * q_weight[lane * 2]
        n1 = v1 * inv * q_weight[lane * 2 + 1]
    else:
        n0 = v0 * inv * k_weight[lane * 2]
        n1 = v1 * inv * k_weight[lane * 2 + 1]
    th = inv_freq[lane] * float32(positions[token])
    cs = math.cos(th)
    sn = math.sin(th)
    out[k] = n0 * cs - n1 * sn
    out[k + uint64(1)] = n0 * sn + n1 * cs


@cuda.jit(fastmath=True)
def fused_warp_gridstride(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                          heads_per_token, total_warps, eps):
    # a warp-stride loop over heads: correct for any grid (the loop bound is warp-uniform)
    lane = cuda.threadIdx.x % 32
    w = cuda.grid(1) // 32
    n_warps = cuda.gridsize(1) // 32
    qk = heads_q + heads_k
    while w < total_warps:
        uw = uint64(w)
        token = uw // heads_per_token
        head = uw - token * heads_per_token
        base = uw * uint64(64)
        j = base + uint64(2 * lane)
        a = qkv[j]
        b = qkv[j + uint64(1)]
        if head < qk:
            ss = a * a + b * b
            for m in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            r = math.sqrt(ss / float32(64.0) + eps)
            wt0 = q_weight[2 * lane] if head < heads_q else k_weight[2 * lane]
            wt1 = q_weight[2 * lane + 1] if head < heads_q else k_weight[2 * lane + 1]
            a = a / r * wt0
            b = b / r * wt1
            ang = float32(positions[token]) * inv_freq[lane]
            c = math.cos(ang)
            s = math.sin(ang)
            a, b = a * c - b * s, a * s + b * c
        out[j] = a
        out[j + uint64(1)] = b
        w += n_warps


# ---- 06.5: launch_fused -------------------------------------------------------------------
def launch_fused_4warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = 4
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    fused_branch[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


def launch_fused_32warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                         heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(32, total)  # one block of up to 1024 threads when it fills; else fewer warps
    blocks = -(-total // wpb)
    fused_uniform_reduce[blocks, 32 * wpb](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), int64(total), float32(eps))


def launch_fused_8warps_capped(qkv, out, q_weight, k_weight, positions, inv_freq, tokens,
                               heads_q, heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = 8
    blocks = min(-(-total // wpb), 3)
    fused_warp_gridstride[blocks, 32 * wpb](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), int64(total), float32(eps))


ENTRIES = [
    ("06.1", "xor_loop", rms_warp_xor),
    ("06.1", "down_broadcast", rms_warp_down_bcast),
    ("06.1", "unrolled_xor_divide", rms_warp_unrolled_xor),
    ("06.2", "partials_all_add", rms256_partials),
    ("06.2", "thread0_total_two_barriers", rms256_thread0_total),
    ("06.2", "loop_sum", rms256_loop_sum),
    ("06.3", "plain", rms_rope_plain),
    ("06.3", "trig_first_down_broadcast", rms_rope_trig_first),
    ("06.4", "branch", fused_branch),
    ("06.4", "uniform_reduce", fused_uniform_reduce),
    ("06.4", "warp_gridstride", fused_warp_gridstride),
    ("06.5", "warps_4", launch_fused_4warps),
    ("06.5", "warps_32", launch_fused_32warps),
    ("06.5", "warps_8_capped", launch_fused_8warps_capped),
]
