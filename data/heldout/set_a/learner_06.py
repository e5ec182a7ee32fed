import ropelab
from numba import cuda, float32, uint64
import math

FULL_MASK = 0xFFFFFFFF


# 06.1: the starter with the butterfly written out, five shfl_xor_sync steps (16 .. 1).
@cuda.jit(fastmath=True)
def rms_warp_unrolled(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


# 06.1: butterfly as a loop over m = 1, 2, 4, 8, 16 (ascending), early return for idle warps.
@cuda.jit(fastmath=True)
def rms_warp_loop(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x & 31
    row = cuda.grid(1) >> 5
    if row >= rows:
        return
    first = row * 64 + 2 * lane
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    m = 1
    while m < 32:
        ss = ss + cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m = m << 1
    inv_rms = float32(1.0) / math.sqrt(ss * float32(1.0 / 64.0) + eps)
    out[first] = a * inv_rms * weight[2 * lane]
    out[first + 1] = b * inv_rms * weight[2 * lane + 1]


# 06.2: per-warp butterfly, lane 0 stores the warp's sum in shared[4], barrier, all add the four.
@cuda.jit(fastmath=True)
def rms256_all_read_partials(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    w = t // 32
    row = cuda.blockIdx.x
    first = row * 256 + 2 * t
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    if lane == 0:
        partial[w] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[first] = a * scale * weight[2 * t]
    out[first + 1] = b * scale * weight[2 * t + 1]


# 06.2: two barriers: warp 0 reduces the four warp sums with a second butterfly and
# publishes the row's total in shared memory.
@cuda.jit(fastmath=True)
def rms256_warp0_final(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    total_s = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    lane = t & 31
    w = t >> 5
    base_i = cuda.blockIdx.x * 256 + t * 2
    a = x[base_i]
    b = x[base_i + 1]
    ss = a * a + b * b
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m >>= 1
    if lane == 0:
        partial[w] = ss
    cuda.syncthreads()
    if w == 0:
        v = float32(0.0)
        if lane < 4:
            v = partial[lane]
        v += cuda.shfl_xor_sync(FULL_MASK, v, 2)
        v += cuda.shfl_xor_sync(FULL_MASK, v, 1)
        if lane == 0:
            total_s[0] = v
    cuda.syncthreads()
    mean = total_s[0] * float32(1.0 / 256.0)
    scale = float32(1.0) / math.sqrt(mean + eps)
    out[base_i] = a * scale * weight[t * 2]
    out[base_i + 1] = b * scale * weight[t * 2 + 1]


# 06.3: warp per head: butterfly, weighted norm, then rotate the lane's pair.
@cuda.jit(fastmath=True)
def rms_rope_basic(x, out, weight, positions, inv_freq, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        a = a * scale * weight[lane * 2]
        b = b * scale * weight[lane * 2 + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = a * c - b * s
        out[first + 1] = a * s + b * c


# 06.3: sincos computed before the reduction, butterfly loop, rsqrt-style scale, early return.
@cuda.jit(fastmath=True)
def rms_rope_angle_first(x, out, weight, positions, inv_freq, rows, eps):
    lane = cuda.threadIdx.x & 31
    row = cuda.grid(1) >> 5
    if row >= rows:
        return
    angle = float32(positions[row]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    e = row * 64 + lane * 2
    v0 = x[e]
    v1 = x[e + 1]
    ss = v0 * v0 + v1 * v1
    for m in (1, 2, 4, 8, 16):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    r = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    n0 = v0 * r * weight[lane * 2]
    n1 = v1 * r * weight[lane * 2 + 1]
    out[e] = n0 * c - n1 * s
    out[e + 1] = n1 * c + n0 * s


# 06.4: warp per head of the packed rows; Q/K pick their weight in two branches, V copied.
@cuda.jit(fastmath=True)
def fused_head_branches(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                        heads_per_token, total_warps, eps):
    w = cuda.grid(1) // 32
    if w < total_warps:
        lane = uint64(cuda.threadIdx.x % 32)
        wu = uint64(w)
        token = wu // heads_per_token
        head = wu - token * heads_per_token
        e = wu * uint64(64) + lane * uint64(2)
        a = qkv[e]
        b = qkv[e + uint64(1)]
        if head < heads_q + heads_k:
            ss = a * a + b * b
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            if head < heads_q:
                w0 = q_weight[lane * uint64(2)]
                w1 = q_weight[lane * uint64(2) + uint64(1)]
            else:
                w0 = k_weight[lane * uint64(2)]
                w1 = k_weight[lane * uint64(2) + uint64(1)]
            a = a * scale * w0
            b = b * scale * w1
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[e] = a * c - b * s
            out[e + uint64(1)] = a * s + b * c
        else:
            out[e] = a
            out[e + uint64(1)] = b


# 06.4: V heads copied first and returned; Q and K share one path with the weight array
# chosen by a conditional expression; butterfly in a loop; warp index from blockIdx/threadIdx.
@cuda.jit(fastmath=True)
def fused_head_select_weight(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                             heads_k, heads_per_token, total_warps, eps):
    warps_per_block = cuda.blockDim.x >> 5
    w = cuda.blockIdx.x * warps_per_block + (cuda.threadIdx.x >> 5)
    if w >= total_warps:
        return
    lane = uint64(cuda.threadIdx.x & 31)
    wu = uint64(w)
    token = wu // heads_per_token
    head = wu - token * heads_per_token
    e = (wu << uint64(6)) + (lane << uint64(1))
    v0 = qkv[e]
    v1 = qkv[e + uint64(1)]
    if head >= heads_q + heads_k:
        out[e] = v0
        out[e + uint64(1)] = v1
        return
    wt = q_weight if head < heads_q else k_weight
    ss = v0 * v0 + v1 * v1
    m = 16
    while m >= 1:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m >>= 1
    r = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    n0 = v0 * r * wt[lane << uint64(1)]
    n1 = v1 * r * wt[(lane << uint64(1)) + uint64(1)]
    theta = float32(positions[token]) * inv_freq[lane]
    c = math.cos(theta)
    s = math.sin(theta)
    out[e] = n0 * c - n1 * s
    out[e + uint64(1)] = n0 * s + n1 * c


# 06.5 (launched): 4 warps (128 threads) per block, blocks = ceil(total_warps / 4).
def launch_fused_4warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps = 4
    blocks = (total_warps + warps - 1) // warps
    fused_head_branches[blocks, 32 * warps](qkv, out, q_weight, k_weight, positions, inv_freq,
                                            uint64(heads_q), uint64(heads_k),
                                            uint64(heads_per_token), total_warps, float32(eps))


# 06.5: up to 8 warps per block (fewer when there are fewer heads), the select-weight kernel.
def launch_fused_8warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    heads_per_token = int(heads_q) + int(heads_k) + int(heads_v)
    total_warps = int(tokens) * heads_per_token
    warps = min(8, total_warps)
    blocks = -(-total_warps // warps)
    fused_head_select_weight[blocks, warps * 32](qkv, out, q_weight, k_weight, positions,
                                                 inv_freq, uint64(heads_q), uint64(heads_k),
                                                 uint64(heads_per_token), total_warps,
                                                 float32(eps))


ENTRIES = [
    ("06.1", "rms_warp_unrolled", rms_warp_unrolled),
    ("06.1", "rms_warp_loop_ascending", rms_warp_loop),
    ("06.2", "rms256_all_read_partials", rms256_all_read_partials),
    ("06.2", "rms256_warp0_final", rms256_warp0_final),
    ("06.3", "rms_rope_basic", rms_rope_basic),
    ("06.3", "rms_rope_angle_first", rms_rope_angle_first),
    ("06.4", "fused_head_branches", fused_head_branches),
    ("06.4", "fused_head_select_weight", fused_head_select_weight),
    ("06.5", "launch_fused_4warps", launch_fused_4warps),
    ("06.5", "launch_fused_8warps", launch_fused_8warps),
]
