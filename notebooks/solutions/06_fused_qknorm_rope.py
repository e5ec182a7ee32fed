"""The ladder of notebook 06 (fused QK-RMSNorm + RoPE): a solution for every step, and wrong
attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step]`` (it must pass) and every
function of ``WRONG[step]`` (each must be rejected with a verdict containing the fragment next
to it).  The steps climb: RMSNorm of a 64-float head with a warp shuffle butterfly; a 256-float
head that needs four warps, whose sums meet in shared memory; norm then rotate one head; the
fused kernel over a packed qkv row (Q and K heads normalized and rotated, V copied); its launch.
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, uint64

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part
WARPS_PER_ROW = 4  # step 2: a row of 256 floats, two per thread, 128 threads


# --- step 1: the shuffle butterfly (the exercise this notebook had before the ladder) -------


@cuda.jit(fastmath=True)
def my_rms_norm_warp(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:  # the same for the 32 lanes of a warp: the shuffles stay warp-uniform
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)  # each step adds the partner's partial sum
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]





@cuda.jit(fastmath=True)
def shuffle_down(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 16)  # a reduction to lane 0 only
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_down_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def wrong_lane_mask(x, out, weight, rows, eps):
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
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)  # 2 again where 1 belongs
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def float64_mean(x, out, weight, rows, eps):
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
        scale = float32(1.0) / math.sqrt(ss / 64.0 + eps)  # 64.0: a float64
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def idle_warps_run(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    first = row * 64 + lane * 2  # no row < rows: warps past the end read too
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


# --- step 2: a row of 256 floats: four warps, their sums meet in shared memory --------------

@cuda.jit(fastmath=True)
def rms_norm_256(x, out, weight, rows, eps):
    partial = cuda.shared.array(WARPS_PER_ROW, float32)  # one sum of squares per warp
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    first = cuda.blockIdx.x * 256 + t * 2  # one block per row, two floats per thread
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)  # the warp's 64 floats
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    if lane == 0:
        partial[warp] = ss
    cuda.syncthreads()  # the four sums are written before anyone adds them
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[first] = a * scale * weight[t * 2]
    out[first + 1] = b * scale * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def warp_sums_unsynchronized(x, out, weight, rows, eps):
    partial = cuda.shared.array(WARPS_PER_ROW, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    first = cuda.blockIdx.x * 256 + t * 2
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    if lane == 0:
        partial[warp] = ss
    # no cuda.syncthreads(): another warp's sum may not be written yet
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[first] = a * scale * weight[t * 2]
    out[first + 1] = b * scale * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def warp_sum_only(x, out, weight, rows, eps):
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * 256 + t * 2
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    # the warp's 64 floats stand in for the row's 256
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    out[first] = a * scale * weight[t * 2]
    out[first + 1] = b * scale * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def mean_over_a_warp(x, out, weight, rows, eps):
    partial = cuda.shared.array(WARPS_PER_ROW, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    first = cuda.blockIdx.x * 256 + t * 2
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    if lane == 0:
        partial[warp] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(64.0) + eps)  # 64: a warp's floats, not the row's
    out[first] = a * scale * weight[t * 2]
    out[first + 1] = b * scale * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def a_barrier_per_warp_role(x, out, weight, rows, eps):
    partial = cuda.shared.array(WARPS_PER_ROW, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    first = cuda.blockIdx.x * 256 + t * 2
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    if lane == 0:
        partial[warp] = ss
        cuda.syncthreads()  # lane 0 waits here ...
    else:
        cuda.syncthreads()  # ... and the other lanes at another barrier
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[first] = a * scale * weight[t * 2]
    out[first + 1] = b * scale * weight[t * 2 + 1]


# --- step 3: norm, then rotate, one head of 64 floats per warp -------------------------------

@cuda.jit(fastmath=True)
def rms_rope_head(x, out, weight, positions, inv_freq, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:  # warp-uniform: the whole warp has a head or none does
        first = row * 64 + lane * 2  # lane l holds pair l: floats 2l and 2l + 1
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        a = a * scale * weight[lane * 2]  # normalized first, then rotated
        b = b * scale * weight[lane * 2 + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = a * c - b * s
        out[first + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rotate_then_norm(x, out, weight, positions, inv_freq, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[first]
        x1 = x[first + 1]
        a = x0 * c - x1 * s  # rotated first: the weights then land on rotated floats
        b = x0 * s + x1 * c
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def rope_of_the_row_number(x, out, weight, positions, inv_freq, rows, eps):
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
        angle = float32(row) * inv_freq[lane]  # the row, not the token's position
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = a * c - b * s
        out[first + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def norm_without_weight(x, out, weight, positions, inv_freq, rows, eps):
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
        a = a * scale  # the weight is forgotten
        b = b * scale
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = a * c - b * s
        out[first + 1] = a * s + b * c


# --- step 4: the fused kernel over packed qkv rows: a warp per head --------------------------

@cuda.jit(fastmath=True)
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    lane = cuda.threadIdx.x % 32
    w = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if w < total_warps:  # warp-uniform
        unit = uint64(w)
        token = unit // heads_per_token
        head = unit - token * heads_per_token  # Q heads, then K heads, then V heads
        first = unit * uint64(64) + uint64(lane * 2)
        a = qkv[first]
        b = qkv[first + uint64(1)]
        if head < heads_q + heads_k:  # Q or K: normalize, then rotate
            weight = q_weight if head < heads_q else k_weight
            ss = a * a + b * b
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            a = a * scale * weight[lane * 2]
            b = b * scale * weight[lane * 2 + 1]
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[first] = a * c - b * s
            out[first + uint64(1)] = a * s + b * c
        else:  # V: copied unchanged
            out[first] = a
            out[first + uint64(1)] = b


@cuda.jit(fastmath=True)
def v_heads_normalized(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                       heads_per_token, total_warps, eps):
    lane = cuda.threadIdx.x % 32
    w = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if w < total_warps:
        unit = uint64(w)
        token = unit // heads_per_token
        head = unit - token * heads_per_token
        first = unit * uint64(64) + uint64(lane * 2)
        a = qkv[first]
        b = qkv[first + uint64(1)]
        weight = q_weight if head < heads_q else k_weight  # V heads take K's weight and turn
        ss = a * a + b * b
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        a = a * scale * weight[lane * 2]
        b = b * scale * weight[lane * 2 + 1]
        angle = float32(positions[token]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[first] = a * c - b * s
        out[first + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def k_heads_with_q_weight(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                          heads_per_token, total_warps, eps):
    lane = cuda.threadIdx.x % 32
    w = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if w < total_warps:
        unit = uint64(w)
        token = unit // heads_per_token
        head = unit - token * heads_per_token
        first = unit * uint64(64) + uint64(lane * 2)
        a = qkv[first]
        b = qkv[first + uint64(1)]
        if head < heads_q + heads_k:
            ss = a * a + b * b
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            a = a * scale * q_weight[lane * 2]  # K heads too: one weight for both
            b = b * scale * q_weight[lane * 2 + 1]
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[first] = a * c - b * s
            out[first + uint64(1)] = a * s + b * c
        else:
            out[first] = a
            out[first + uint64(1)] = b


@cuda.jit(fastmath=True)
def v_heads_skipped(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    lane = cuda.threadIdx.x % 32
    w = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if w < total_warps:
        unit = uint64(w)
        token = unit // heads_per_token
        head = unit - token * heads_per_token
        first = unit * uint64(64) + uint64(lane * 2)
        if head < heads_q + heads_k:  # V heads are left alone, and so never reach out
            a = qkv[first]
            b = qkv[first + uint64(1)]
            weight = q_weight if head < heads_q else k_weight
            ss = a * a + b * b
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            a = a * scale * weight[lane * 2]
            b = b * scale * weight[lane * 2 + 1]
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[first] = a * c - b * s
            out[first + uint64(1)] = a * s + b * c


# --- step 5: the fused kernel's launch -----------------------------------------------------

def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                 heads_v, eps):
    """A warp per head of every token, four warps (128 threads) a block."""
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = 4
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    rope_fused_head[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


def launch_qk_warps_only(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                         heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * (heads_q + heads_k)  # no warp for the V heads
    warps_per_block = 4
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    rope_fused_head[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


def launch_block_per_warp_count(qkv, out, q_weight, k_weight, positions, inv_freq, tokens,
                                heads_q, heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    warps_per_block = 4
    blocks = total_warps  # a block per warp, though each block holds four warps
    rope_fused_head[blocks, 32 * warps_per_block](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


def launch_threads_per_head_rows(qkv, out, q_weight, k_weight, positions, inv_freq, tokens,
                                 heads_q, heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    threads = 64 * heads_per_token * tokens  # a thread per float: past 1024 for big rows
    rope_fused_head[1, threads](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


def launch_block_per_token(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                           heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    # a block per token, a warp per head: 1,280 threads for a token of 40 heads
    rope_fused_head[tokens, 32 * heads_per_token](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), tokens * heads_per_token, float32(eps))


def launch_eps_as_float(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                       heads_k, heads_v, eps):
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = tokens * heads_per_token
    blocks = (total_warps + 3) // 4
    rope_fused_head[blocks, 128](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, eps)  # eps a Python float: float64 arithmetic


SOLUTIONS = {
    "06.1": my_rms_norm_warp,
    "06.2": rms_norm_256,
    "06.3": rms_rope_head,
    "06.4": rope_fused_head,
    "06.5": launch_fused,
}

WRONG = {
    "06.1": [(shuffle_down, "only lane 0 is right"), (wrong_lane_mask, "different sums"),
             (float64_mean, "float64 instructions"), (idle_warps_run, "out of bounds")],
    "06.2": [(warp_sums_unsynchronized, "race"), (warp_sum_only, "each warp"),
             (mean_over_a_warp, "same factor"),
             (a_barrier_per_warp_role, "the threads wait at different barriers")],
    "06.3": [(rotate_then_norm, "rotated before"), (rope_of_the_row_number, "position"),
             (norm_without_weight, "weight")],
    "06.4": [(v_heads_normalized, "V heads"), (k_heads_with_q_weight, "k_weight"),
             (v_heads_skipped, "never written")],
    "06.5": [(launch_qk_warps_only, "never written"), (launch_block_per_warp_count, "idle"),
             (launch_threads_per_head_rows, "1024"),
             (launch_block_per_token, "block of 1280 threads: the limit is 1024"),
             (launch_eps_as_float,
              "(eps) is float64 (a Python float), but the contract wants float32")],
}
