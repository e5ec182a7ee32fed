import ropelab
from numba import cuda, float32, uint64
import math

FULL_MASK = 0xFFFFFFFF


# a reduction that forgets a stage: the butterfly stops at m = 2 (no m = 1 step).
@cuda.jit(fastmath=True)
def rms_butterfly_missing_step(x, out, weight, rows, eps):
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
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


# float64 creeping in: ss / 64 with a bare int literal (float32 / int64 is float64).
@cuda.jit(fastmath=True)
def rms_int_literal_mean(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        for m in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        scale = float32(1.0) / math.sqrt(ss / 64 + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


# a shuffle inside a branch only half the warp takes (lane < 16 does the m = 16 step).
@cuda.jit(fastmath=True)
def rms_shuffle_divergent(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        if lane < 16:
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


# the barrier inside `if lane == 0`: only the four storing lanes wait; the rest read early.
@cuda.jit(fastmath=True)
def rms256_barrier_in_lane0(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    w = t // 32
    first = cuda.blockIdx.x * 256 + 2 * t
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


# a reduction that forgets a stage: the row's total adds only three of the four warp sums.
@cuda.jit(fastmath=True)
def rms256_three_warps(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    w = t // 32
    first = cuda.blockIdx.x * 256 + 2 * t
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    if lane == 0:
        partial[w] = ss
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[first] = a * scale * weight[2 * t]
    out[first + 1] = b * scale * weight[2 * t + 1]


# a correct 06.4 kernel for the launch probe.
@cuda.jit(fastmath=True)
def _fused_ok(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
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
            for m in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            wt = q_weight if head < heads_q else k_weight
            a = a * scale * wt[lane * uint64(2)]
            b = b * scale * wt[lane * uint64(2) + uint64(1)]
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[e] = a * c - b * s
            out[e + uint64(1)] = a * s + b * c
        else:
            out[e] = a
            out[e + uint64(1)] = b


# one block per token holding all its heads' warps: 40 heads would be 1280 threads.
def launch_fused_block_per_token(qkv, out, q_weight, k_weight, positions, inv_freq, tokens,
                                 heads_q, heads_k, heads_v, eps):
    heads = heads_q + heads_k + heads_v
    _fused_ok[tokens, 32 * heads](qkv, out, q_weight, k_weight, positions, inv_freq,
                                  uint64(heads_q), uint64(heads_k), uint64(heads),
                                  tokens * heads, float32(eps))


# V heads normalized and rotated too (the Q/K branch taken for every head).
@cuda.jit(fastmath=True)
def fused_v_normalized(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
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
        ss = a * a + b * b
        for m in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        wt = q_weight if head < heads_q else k_weight
        a = a * scale * wt[lane * uint64(2)]
        b = b * scale * wt[lane * uint64(2) + uint64(1)]
        angle = float32(positions[token]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c


PROBES = [
    ("06.1", "butterfly_missing_step", rms_butterfly_missing_step, "fail",
     "butterfly without the m = 1 step: lane pairs hold different half sums"),
    ("06.1", "f64_int_literal_mean", rms_int_literal_mean, "fail",
     "ss / 64 with a bare int literal: float64 division"),
    ("06.1", "shuffle_in_divergent_branch", rms_shuffle_divergent, "fail",
     "shfl_xor_sync(FULL_MASK, ...) inside `if lane < 16`: not every lane named in the mask reaches it"),
    ("06.2", "barrier_in_lane0_branch", rms256_barrier_in_lane0, "fail",
     "syncthreads inside `if lane == 0`: other lanes read the partial sums without a barrier"),
    ("06.2", "reduction_forgets_a_warp", rms256_three_warps, "fail",
     "total adds partial[0..2] only: the fourth warp's sum is missing"),
    ("06.4", "v_heads_normalized", fused_v_normalized, "fail",
     "V heads normalized and rotated instead of copied"),
    ("06.5", "launch_block_per_token_1280", launch_fused_block_per_token, "fail",
     "a block per token with a warp per head: 40 heads = 1280 threads, over the 1024 limit"),
]
