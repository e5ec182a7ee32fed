import ropelab
import math
import numba
from numba import cuda, float32, uint64, int64

FULL = 0xffffffff


# 06.1 my_rms_norm_warp
@cuda.jit(fastmath=True)
def rms_warp_a(x, out, weight, rows, eps):
    g = cuda.grid(1)
    row = g >> 5
    lane = cuda.threadIdx.x & 31
    if row >= rows:
        return
    e = row * 64 + 2 * lane
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    off = 16
    while off >= 1:
        ss += cuda.shfl_xor_sync(FULL, ss, off)
        off >>= 1
    r = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    out[e] = a * r * weight[2 * lane]
    out[e + 1] = b * r * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def rms_warp_b(x, out, weight, rows, eps):
    warp = cuda.threadIdx.x // 32
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + warp
    if row < rows:
        base = row * 64 + lane * 2
        a = x[base]
        b = x[base + 1]
        w0 = weight[lane * 2]
        w1 = weight[lane * 2 + 1]
        ss = cuda.fma(a, a, b * b)
        ss += cuda.shfl_xor_sync(FULL, ss, 1)
        ss += cuda.shfl_xor_sync(FULL, ss, 2)
        ss += cuda.shfl_xor_sync(FULL, ss, 4)
        ss += cuda.shfl_xor_sync(FULL, ss, 8)
        ss += cuda.shfl_xor_sync(FULL, ss, 16)
        inv = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
        out[base] = a * inv * w0
        out[base + 1] = b * inv * w1


# 06.2 rms_norm_256
@cuda.jit(fastmath=True)
def rms256_a(x, out, weight, rows, eps):
    sums = cuda.shared.array(4, float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    lane = t & 31
    warp = t >> 5
    e = row * 256 + 2 * t
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    off = 16
    while off > 0:
        ss += cuda.shfl_xor_sync(FULL, ss, off)
        off //= 2
    if lane == 0:
        sums[warp] = ss
    cuda.syncthreads()
    total = sums[0] + sums[1] + sums[2] + sums[3]
    r = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[e] = a * r * weight[2 * t]
    out[e + 1] = b * r * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms256_b(x, out, weight, rows, eps):
    sums = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 256 + 2 * t
    a = x[base]
    b = x[base + 1]
    w0 = weight[2 * t]
    w1 = weight[2 * t + 1]
    ss = a * a
    ss = cuda.fma(b, b, ss)
    for k in range(5):
        ss += cuda.shfl_xor_sync(FULL, ss, 1 << k)
    if t % 32 == 0:
        sums[t // 32] = ss
    cuda.syncthreads()
    total = float32(0.0)
    for w in range(4):
        total += sums[w]
    mean = total * float32(1.0 / 256.0)
    scale = float32(1.0) / math.sqrt(mean + eps)
    out[base] = a * scale * w0
    out[base + 1] = b * scale * w1


# 06.3 rms_rope_head
@cuda.jit(fastmath=True)
def rms_rope_a(x, out, weight, positions, inv_freq, rows, eps):
    g = cuda.grid(1)
    row = g >> 5
    l = g & 31
    if row >= rows:
        return
    e = row * 64 + 2 * l
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    off = 16
    while off > 0:
        ss += cuda.shfl_xor_sync(FULL, ss, off)
        off >>= 1
    r = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    n0 = a * r * weight[2 * l]
    n1 = b * r * weight[2 * l + 1]
    th = float32(positions[row]) * inv_freq[l]
    c = math.cos(th)
    s = math.sin(th)
    out[e] = n0 * c - n1 * s
    out[e + 1] = n0 * s + n1 * c


@cuda.jit(fastmath=True)
def rms_rope_b(x, out, weight, positions, inv_freq, rows, eps):
    t = cuda.threadIdx.x
    l = t % 32
    row = cuda.blockIdx.x * 4 + t // 32
    if row < rows:
        e = row * 64 + l * 2
        a = x[e]
        b = x[e + 1]
        w0 = weight[l * 2]
        w1 = weight[l * 2 + 1]
        f = inv_freq[l]
        pos = float32(positions[row])
        ss = cuda.fma(a, a, b * b)
        for k in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL, ss, k)
        r = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
        n0 = a * r * w0
        n1 = b * r * w1
        th = pos * f
        s = math.sin(th)
        c = math.cos(th)
        out[e] = cuda.fma(n0, c, -n1 * s)
        out[e + 1] = cuda.fma(n0, s, n1 * c)


# 06.4 rope_fused_head
@cuda.jit(fastmath=True)
def fused_a(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
            heads_per_token, total_warps, eps):
    g = cuda.grid(1)
    w = g >> 5
    lane = g & 31
    if w >= total_warps:
        return
    uw = uint64(w)
    token = uw // heads_per_token
    h = uw - token * heads_per_token
    e = w * 64 + 2 * lane
    a = qkv[e]
    b = qkv[e + 1]
    if h >= heads_q + heads_k:
        out[e] = a
        out[e + 1] = b
        return
    ss = a * a + b * b
    off = 16
    while off > 0:
        ss += cuda.shfl_xor_sync(FULL, ss, off)
        off >>= 1
    r = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    if h < heads_q:
        w0 = q_weight[2 * lane]
        w1 = q_weight[2 * lane + 1]
    else:
        w0 = k_weight[2 * lane]
        w1 = k_weight[2 * lane + 1]
    n0 = a * r * w0
    n1 = b * r * w1
    th = float32(positions[token]) * inv_freq[lane]
    c = math.cos(th)
    s = math.sin(th)
    out[e] = n0 * c - n1 * s
    out[e + 1] = n0 * s + n1 * c


@cuda.jit(fastmath=True)
def fused_b(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
            heads_per_token, total_warps, eps):
    t = cuda.threadIdx.x
    lane = uint64(t % 32)
    w = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x // 32) + uint64(t // 32)
    if w < uint64(total_warps):
        token = w // heads_per_token
        h = w - heads_per_token * token
        e = w * uint64(64) + lane * uint64(2)
        a = qkv[e]
        b = qkv[e + uint64(1)]
        if h < heads_q + heads_k:
            ss = cuda.fma(a, a, b * b)
            for k in range(5):
                ss += cuda.shfl_xor_sync(FULL, ss, 16 >> k)
            r = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
            if h < heads_q:
                n0 = a * r * q_weight[lane * uint64(2)]
                n1 = b * r * q_weight[lane * uint64(2) + uint64(1)]
            else:
                n0 = a * r * k_weight[lane * uint64(2)]
                n1 = b * r * k_weight[lane * uint64(2) + uint64(1)]
            th = float32(positions[token]) * inv_freq[lane]
            sn = math.sin(th)
            cs = math.cos(th)
            out[e] = cuda.fma(n0, cs, -n1 * sn)
            out[e + uint64(1)] = cuda.fma(n0, sn, n1 * cs)
        else:
            out[e] = a
            out[e + uint64(1)] = b


# 06.5 launch_fused
def launch_fused_4warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    blocks = (total + 3) // 4
    fused_a[blocks, 128](qkv, out, q_weight, k_weight, positions, inv_freq,
                         numba.uint64(heads_q), numba.uint64(heads_k), numba.uint64(hpt),
                         numba.int64(total), numba.float32(eps))


def launch_fused_8warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(8, total)
    blocks = math.ceil(total / wpb)
    fused_b[blocks, 32 * wpb](qkv, out, q_weight, k_weight, positions, inv_freq,
                              numba.uint64(heads_q), numba.uint64(heads_k), numba.uint64(hpt),
                              numba.int64(total), numba.float32(eps))


# 06.3 third version: weight and frequencies staged in shared memory
@cuda.jit(fastmath=True)
def rms_rope_shared(x, out, weight, positions, inv_freq, rows, eps):
    w_s = cuda.shared.array(64, float32)
    f_s = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    if t < 64:
        w_s[t] = weight[t]
    if t < 32:
        f_s[t] = inv_freq[t]
    cuda.syncthreads()
    l = t & 31
    row = cuda.blockIdx.x * 4 + (t >> 5)
    if row >= rows:
        return
    e = row * 64 + 2 * l
    a = x[e]
    b = x[e + 1]
    ss = a * a + b * b
    for k in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL, ss, k)
    r = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    n0 = a * r * w_s[2 * l]
    n1 = b * r * w_s[2 * l + 1]
    th = float32(positions[row]) * f_s[l]
    c = math.cos(th)
    s = math.sin(th)
    out[e] = n0 * c - n1 * s
    out[e + 1] = n0 * s + n1 * c

ENTRIES = [
    ("06.1", "grid1_shift_while_butterfly", rms_warp_a),
    ("06.1", "manual_warp_unrolled_weights_first", rms_warp_b),
    ("06.2", "adjacent_floats_while", rms256_a),
    ("06.2", "for_shift_fma_weights_first", rms256_b),
    ("06.3", "grid1_early_return", rms_rope_a),
    ("06.3", "manual_loads_first_fma", rms_rope_b),
    ("06.4", "grid1_v_copy_return", fused_a),
    ("06.4", "manual_uint_for_butterfly_fma", fused_b),
    ("06.5", "4warps", launch_fused_4warps),
    ("06.5", "8warps", launch_fused_8warps),
    ("06.3", "shared_weight_freq_staged", rms_rope_shared),
]
