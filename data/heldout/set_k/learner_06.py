import ropelab  # noqa: F401  (must come before numba.cuda)

import math

import numba
from numba import cuda, float32, int64, uint64

FULL = 0xFFFFFFFF


# ---- 06.1 my_rms_norm_warp ----
@cuda.jit
def my_rms_norm_warp(x, out, weight, rows, eps):
    t = cuda.threadIdx.x
    lane = t & 31
    row = cuda.blockIdx.x * 4 + (t >> 5)
    if row < rows:
        e = row * 64 + 2 * lane
        a = x[e]
        b = x[e + 1]
        ss = a * a + b * b
        for m in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL, ss, m)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[e] = a * scale * weight[2 * lane]
        out[e + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit
def my_rms_norm_warp_ret(x, out, weight, rows, eps):
    gid = cuda.grid(1)
    row = gid // 32
    if row >= rows:
        return
    lane = gid - row * 32
    base = row * 64
    w0 = weight[lane + lane]
    w1 = weight[lane + lane + 1]
    a = x[base + lane + lane]
    b = x[base + lane + lane + 1]
    ss = cuda.fma(a, a, b * b)
    m = 16
    while m >= 1:
        ss = ss + cuda.shfl_xor_sync(FULL, ss, m)
        m >>= 1
    r = math.sqrt(ss * float32(0.015625) + eps)
    out[base + lane + lane] = (a / r) * w0
    out[base + lane + lane + 1] = (b / r) * w1


@cuda.jit
def my_rms_norm_warp_coalesced(x, out, weight, rows, eps):
    # same pairing, % and // for lane/warp, butterfly written out by hand
    t = cuda.threadIdx.x
    lane = t % 32
    row = cuda.blockIdx.x * 4 + t // 32
    if row < rows:
        base = row * 64
        a = x[base + 2 * lane]
        b = x[base + 2 * lane + 1]
        ss = a * a
        ss += b * b
        ss += cuda.shfl_xor_sync(FULL, ss, 16)
        ss += cuda.shfl_xor_sync(FULL, ss, 8)
        ss += cuda.shfl_xor_sync(FULL, ss, 4)
        ss += cuda.shfl_xor_sync(FULL, ss, 2)
        ss += cuda.shfl_xor_sync(FULL, ss, 1)
        mean = ss / float32(64.0)
        inv = float32(1.0) / math.sqrt(mean + eps)
        out[base + 2 * lane] = weight[2 * lane] * (a * inv)
        out[base + 2 * lane + 1] = weight[2 * lane + 1] * (b * inv)


# ---- 06.2 rms_norm_256 ----
@cuda.jit
def rms_norm_256(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    lane = t & 31
    w = t >> 5
    e = r * 256 + 2 * t
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL, ss, m)
    if lane == 0:
        partial[w] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[e] = a * scale * weight[2 * t]
    out[e + 1] = b * scale * weight[2 * t + 1]


@cuda.jit
def rms_norm_256_loop(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 256
    a = x[base + t + t]
    b = x[base + t + t + 1]
    w0 = weight[t + t]
    w1 = weight[t + t + 1]
    ss = cuda.fma(a, a, b * b)
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL, ss, m)
        m //= 2
    if t % 32 == 0:
        partial[t // 32] = ss
    cuda.syncthreads()
    total = float32(0.0)
    for k in range(4):
        total += partial[k]
    rms = math.sqrt(total * float32(1.0 / 256.0) + eps)
    out[base + t + t] = w0 * a / rms
    out[base + t + t + 1] = w1 * b / rms


# ---- 06.3 rms_rope_head ----
@cuda.jit
def rms_rope_head(x, out, weight, positions, inv_freq, rows, eps):
    t = cuda.threadIdx.x
    lane = t & 31
    row = cuda.blockIdx.x * 4 + (t >> 5)
    if row < rows:
        e = row * 64 + 2 * lane
        a = x[e]
        b = x[e + 1]
        ss = a * a + b * b
        for m in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL, ss, m)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        a = a * scale * weight[2 * lane]
        b = b * scale * weight[2 * lane + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = a * c - b * s
        out[e + 1] = a * s + b * c


@cuda.jit
def rms_rope_head_ret(x, out, weight, positions, inv_freq, rows, eps):
    gid = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = gid >> 5
    if row >= rows:
        return
    lane = gid & 31
    e = row * 64 + lane * 2
    a = x[e]
    b = x[e + 1]
    wa = weight[lane * 2]
    wb = weight[lane * 2 + 1]
    th = float32(positions[row]) * inv_freq[lane]
    ss = cuda.fma(b, b, a * a)
    ss += cuda.shfl_xor_sync(FULL, ss, 1)
    ss += cuda.shfl_xor_sync(FULL, ss, 2)
    ss += cuda.shfl_xor_sync(FULL, ss, 4)
    ss += cuda.shfl_xor_sync(FULL, ss, 8)
    ss += cuda.shfl_xor_sync(FULL, ss, 16)
    rms = math.sqrt(ss * float32(0.015625) + eps)
    na = a * wa / rms
    nb = b * wb / rms
    c = math.cos(th)
    s = math.sin(th)
    out[e] = cuda.fma(na, c, -(nb * s))
    out[e + 1] = cuda.fma(na, s, nb * c)


# ---- 06.4 rope_fused_head ----
@cuda.jit
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    t = cuda.threadIdx.x
    lane = t & 31
    w = cuda.blockIdx.x * (cuda.blockDim.x >> 5) + (t >> 5)
    if w < total_warps:
        uw = uint64(w)
        token = uw // heads_per_token
        head = uw - token * heads_per_token
        e = w * 64 + 2 * lane
        a = qkv[e]
        b = qkv[e + 1]
        if head < heads_q + heads_k:
            ss = a * a + b * b
            for m in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL, ss, m)
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
            out[e] = a * c - b * s
            out[e + 1] = a * s + b * c
        else:
            out[e] = a
            out[e + 1] = b


@cuda.jit
def rope_fused_head_ret(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                        heads_per_token, total_warps, eps):
    gid = cuda.grid(1)
    w = gid >> 5
    if w >= total_warps:
        return
    lane = gid & 31
    uw = uint64(w)
    token = uw // heads_per_token
    head = uw - token * heads_per_token
    e = w * 64 + lane * 2
    if head >= heads_q + heads_k:
        v0 = qkv[e]
        v1 = qkv[e + 1]
        out[e] = v0
        out[e + 1] = v1
        return
    a = qkv[e]
    b = qkv[e + 1]
    pos = positions[token]
    f = inv_freq[lane]
    ss = cuda.fma(a, a, b * b)
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL, ss, m)
        m >>= 1
    rms = math.sqrt(ss * float32(0.015625) + eps)
    if head < heads_q:
        a = a / rms * q_weight[lane * 2]
        b = b / rms * q_weight[lane * 2 + 1]
    else:
        a = a / rms * k_weight[lane * 2]
        b = b / rms * k_weight[lane * 2 + 1]
    th = float32(pos) * f
    c = math.cos(th)
    s = math.sin(th)
    out[e] = cuda.fma(a, c, -(b * s))
    out[e + 1] = cuda.fma(a, s, b * c)


# ---- 06.5 launch_fused ----
def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                 heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = 4
    blocks = (total + wpb - 1) // wpb
    rope_fused_head[blocks, 32 * wpb](qkv, out, q_weight, k_weight, positions, inv_freq,
                                      uint64(heads_q), uint64(heads_k), uint64(hpt),
                                      int64(total), float32(eps))


def launch_fused_8(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                   heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(8, total)
    blocks = -(-total // wpb)
    rope_fused_head_ret[blocks, 32 * wpb](qkv, out, q_weight, k_weight, positions, inv_freq,
                                          uint64(heads_q), uint64(heads_k), uint64(hpt),
                                          int64(total), float32(eps))


def launch_fused_32(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                    heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = 32 if total >= 32 else total
    blocks = (total + wpb - 1) // wpb
    rope_fused_head[blocks, 32 * wpb](qkv, out, q_weight, k_weight, positions, inv_freq,
                                      uint64(heads_q), uint64(heads_k), uint64(hpt),
                                      int64(total), float32(eps))


ENTRIES = [
    ("06.1", "for_tuple_butterfly", my_rms_norm_warp),
    ("06.1", "grid1_while_div_early_return", my_rms_norm_warp_ret),
    ("06.1", "unrolled_butterfly_mod", my_rms_norm_warp_coalesced),
    ("06.2", "shared4_unrolled_sum", rms_norm_256),
    ("06.2", "shared4_loop_sum_fma", rms_norm_256_loop),
    ("06.3", "guard_tuple_loop", rms_rope_head),
    ("06.3", "early_return_loads_first_fma", rms_rope_head_ret),
    ("06.4", "guard_branch_qk_v", rope_fused_head),
    ("06.4", "v_early_return_fma", rope_fused_head_ret),
    ("06.5", "4warps", launch_fused),
    ("06.5", "8warps_ret_kernel", launch_fused_8),
    ("06.5", "32warps_1024thr", launch_fused_32),
]
