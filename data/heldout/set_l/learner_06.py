import ropelab  # noqa: F401
import math

import numba
from numba import cuda, float32, uint64

FULL_MASK = 0xFFFFFFFF


# ---------------- 06.1 my_rms_norm_warp ----------------
@cuda.jit(fastmath=True)
def rms_norm_warp_loop(x, out, weight, rows, eps):
    gid = cuda.grid(1)
    w = gid // 32
    lane = cuda.threadIdx.x % 32
    if w < rows:
        i = w * 64 + 2 * lane
        x0 = x[i]
        x1 = x[i + 1]
        ss = x0 * x0 + x1 * x1
        m = 16
        while m >= 1:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[i] = x0 * scale * weight[2 * lane]
        out[i + 1] = x1 * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def rms_norm_warp_unrolled_return(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x & 31
    w = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if w >= rows:
        return  # the same for the whole warp
    i = w * 64 + lane * 2
    x0 = x[i]
    x1 = x[i + 1]
    w0 = weight[lane * 2]
    w1 = weight[lane * 2 + 1]
    ss = x0 * x0 + x1 * x1
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    r = math.sqrt(ss * float32(1.0 / 64.0) + eps)
    out[i] = x0 / r * w0
    out[i + 1] = x1 / r * w1


@cuda.jit
def rms_norm_warp_down_bcast(x, out, weight, rows, eps):
    # tree with shfl_down to lane 0, then lane 0's total broadcast; no fastmath
    gid = cuda.grid(1)
    w = gid >> 5
    lane = gid & 31
    if w < rows:
        i = w * 64 + 2 * lane
        x0 = x[i]
        x1 = x[i + 1]
        ss = x0 * x0 + x1 * x1
        off = 16
        while off > 0:
            ss += cuda.shfl_down_sync(FULL_MASK, ss, off)
            off >>= 1
        total = cuda.shfl_sync(FULL_MASK, ss, 0)
        inv = float32(1.0) / math.sqrt(total / float32(64.0) + eps)
        out[i] = x0 * inv * weight[2 * lane]
        out[i + 1] = x1 * inv * weight[2 * lane + 1]


# ---------------- 06.2 rms_norm_256 ----------------
@cuda.jit(fastmath=True)
def rms_norm_256(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    lane = t % 32
    warp = t // 32
    i = r * 256 + 2 * t
    x0 = x[i]
    x1 = x[i + 1]
    ss = x0 * x0 + x1 * x1
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m //= 2
    if lane == 0:
        partial[warp] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[i] = x0 * scale * weight[2 * t]
    out[i + 1] = x1 * scale * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms_norm_256_thread0(x, out, weight, rows, eps):
    # thread 0 adds the four warp sums into a shared total, second barrier, all read it
    partial = cuda.shared.array(4, float32)
    total_s = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 256 + 2 * t
    x0 = x[i]
    x1 = x[i + 1]
    ss = x0 * x0 + x1 * x1
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    if (t & 31) == 0:
        partial[t >> 5] = ss
    cuda.syncthreads()
    if t == 0:
        acc = float32(0.0)
        for k in range(4):
            acc += partial[k]
        total_s[0] = math.sqrt(acc * float32(1.0 / 256.0) + eps)
    cuda.syncthreads()
    rms = total_s[0]
    out[i] = x0 / rms * weight[2 * t]
    out[i + 1] = x1 / rms * weight[2 * t + 1]


@cuda.jit
def rms_norm_256_warp0(x, out, weight, rows, eps):
    # warp 0 reduces the four partial sums with a second shuffle round, then shares the scale
    partial = cuda.shared.array(4, float32)
    scale_s = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    i = cuda.blockIdx.x * 256 + 2 * t
    x0 = x[i]
    x1 = x[i + 1]
    ss = x0 * x0 + x1 * x1
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m >>= 1
    if lane == 0:
        partial[t // 32] = ss
    cuda.syncthreads()
    if t < 32:
        v = float32(0.0)
        if lane < 4:
            v = partial[lane]
        v += cuda.shfl_xor_sync(FULL_MASK, v, 2)
        v += cuda.shfl_xor_sync(FULL_MASK, v, 1)
        if lane == 0:
            scale_s[0] = float32(1.0) / math.sqrt(v / float32(256.0) + eps)
    cuda.syncthreads()
    sc = scale_s[0]
    out[i] = x0 * sc * weight[2 * t]
    out[i + 1] = x1 * sc * weight[2 * t + 1]


# ---------------- 06.3 rms_rope_head ----------------
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
        while m >= 1:
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
    # angle and the loads issued before the reduction; early return per warp
    lane = cuda.threadIdx.x & 31
    w = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) >> 5
    if w >= rows:
        return
    i = w * 64 + lane * 2
    x0 = x[i]
    x1 = x[i + 1]
    w0 = weight[2 * lane]
    w1 = weight[2 * lane + 1]
    theta = float32(positions[w]) * inv_freq[lane]
    c = math.cos(theta)
    s = math.sin(theta)
    ss = x0 * x0 + x1 * x1
    for k in range(5):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16 >> k)
    rinv = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    n0 = x0 * rinv * w0
    n1 = x1 * rinv * w1
    out[i] = n0 * c - n1 * s
    out[i + 1] = n0 * s + n1 * c


@cuda.jit
def rms_rope_head_precise(x, out, weight, positions, inv_freq, rows, eps):
    gid = cuda.grid(1)
    w = gid >> 5
    lane = gid & 31
    if w < rows:
        i = w * 64 + 2 * lane
        x0 = x[i]
        x1 = x[i + 1]
        ss = x0 * x0 + x1 * x1
        off = 16
        while off > 0:
            ss += cuda.shfl_down_sync(FULL_MASK, ss, off)
            off >>= 1
        ss = cuda.shfl_sync(FULL_MASK, ss, 0)
        r = math.sqrt(ss / float32(64.0) + eps)
        n0 = x0 / r * weight[2 * lane]
        n1 = x1 / r * weight[2 * lane + 1]
        ang = float32(positions[w]) * inv_freq[lane]
        s = math.sin(ang)
        c = math.cos(ang)
        out[i] = n0 * c - n1 * s
        out[i + 1] = n1 * c + n0 * s


# ---------------- 06.4 rope_fused_head ----------------
@cuda.jit(fastmath=True)
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    gid = cuda.grid(1)
    w = gid // 32
    if w < total_warps:
        lane = uint64(cuda.threadIdx.x % 32)
        uw = uint64(w)
        token = uw // heads_per_token
        head = uw - token * heads_per_token
        i = uw * uint64(64) + uint64(2) * lane
        x0 = qkv[i]
        x1 = qkv[i + uint64(1)]
        if head < heads_q + heads_k:
            ss = x0 * x0 + x1 * x1
            m = 16
            while m >= 1:
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
                m //= 2
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            if head < heads_q:
                w0 = q_weight[uint64(2) * lane]
                w1 = q_weight[uint64(2) * lane + uint64(1)]
            else:
                w0 = k_weight[uint64(2) * lane]
                w1 = k_weight[uint64(2) * lane + uint64(1)]
            n0 = x0 * scale * w0
            n1 = x1 * scale * w1
            theta = float32(positions[token]) * inv_freq[lane]
            c = math.cos(theta)
            s = math.sin(theta)
            out[i] = n0 * c - n1 * s
            out[i + uint64(1)] = n0 * s + n1 * c
        else:
            out[i] = x0
            out[i + uint64(1)] = x1


@cuda.jit(fastmath=True)
def rope_fused_head_return(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                           heads_k, heads_per_token, total_warps, eps):
    # V heads handled first with an early return; signed offsets
    lane = cuda.threadIdx.x & 31
    w = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) >> 5
    if w >= total_warps:
        return
    uw = uint64(w)
    token = uw // heads_per_token
    head = uw - token * heads_per_token
    i = w * 64 + 2 * lane
    x0 = qkv[i]
    x1 = qkv[i + 1]
    if head >= heads_q + heads_k:
        out[i] = x0
        out[i + 1] = x1
        return
    is_q = head < heads_q
    w0 = q_weight[2 * lane] if is_q else k_weight[2 * lane]
    w1 = q_weight[2 * lane + 1] if is_q else k_weight[2 * lane + 1]
    ss = x0 * x0 + x1 * x1
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    r = math.sqrt(ss * float32(1.0 / 64.0) + eps)
    n0 = x0 / r * w0
    n1 = x1 / r * w1
    th = float32(positions[token]) * inv_freq[lane]
    s = math.sin(th)
    c = math.cos(th)
    out[i] = n0 * c - n1 * s
    out[i + 1] = n0 * s + n1 * c


@cuda.jit
def rope_fused_head_stride(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                           heads_k, heads_per_token, total_warps, eps):
    # warp-stride loop over heads (each warp may take several), accurate math
    lane = cuda.threadIdx.x % 32
    w = cuda.grid(1) // 32
    n_warps = cuda.gridsize(1) // 32
    while w < total_warps:
        uw = uint64(w)
        token = uw // heads_per_token
        head = uw - token * heads_per_token
        i = w * 64 + 2 * lane
        x0 = qkv[i]
        x1 = qkv[i + 1]
        if head < heads_q + heads_k:
            ss = x0 * x0 + x1 * x1
            m = 16
            while m > 0:
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
                m >>= 1
            inv = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            if head < heads_q:
                n0 = x0 * inv * q_weight[2 * lane]
                n1 = x1 * inv * q_weight[2 * lane + 1]
            else:
                n0 = x0 * inv * k_weight[2 * lane]
                n1 = x1 * inv * k_weight[2 * lane + 1]
            ang = float32(positions[token]) * inv_freq[lane]
            c = math.cos(ang)
            s = math.sin(ang)
            out[i] = n0 * c - n1 * s
            out[i + 1] = n0 * s + n1 * c
        else:
            out[i] = x0
            out[i + 1] = x1
        w += n_warps


# ---------------- 06.5 launch_fused ----------------
def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                 heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    warps_per_block = 4
    blocks = (total + warps_per_block - 1) // warps_per_block
    rope_fused_head[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), total, float32(eps))


def launch_fused_8warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(8, total)
    blocks = math.ceil(total / wpb)
    rope_fused_head_return[blocks, wpb * 32](
        qkv, out, q_weight, k_weight, positions, inv_freq, numba.uint64(heads_q),
        numba.uint64(heads_k), numba.uint64(hpt), numba.int64(total), numba.float32(eps))


def launch_fused_32warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                         heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = 32 if total >= 32 else total  # up to 1024 threads
    blocks = -(-total // wpb)
    rope_fused_head_stride[blocks, 32 * wpb](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(hpt), total, float32(eps))


ENTRIES = [
    ("06.1", "xor_loop_guard", rms_norm_warp_loop),
    ("06.1", "xor_unrolled_return_div", rms_norm_warp_unrolled_return),
    ("06.1", "down_then_bcast_precise", rms_norm_warp_down_bcast),
    ("06.2", "all_threads_add_4", rms_norm_256),
    ("06.2", "thread0_total_2barriers", rms_norm_256_thread0),
    ("06.2", "warp0_second_shuffle", rms_norm_256_warp0),
    ("06.3", "xor_loop_then_rotate", rms_rope_head),
    ("06.3", "angle_first_for5_return", rms_rope_head_early),
    ("06.3", "down_bcast_precise", rms_rope_head_precise),
    ("06.4", "uint_index_if_else", rope_fused_head),
    ("06.4", "v_first_return_ternary", rope_fused_head_return),
    ("06.4", "warp_stride_precise", rope_fused_head_stride),
    ("06.5", "4warps", launch_fused),
    ("06.5", "8warps_mathceil", launch_fused_8warps),
    ("06.5", "32warps_1024", launch_fused_32warps),
]
