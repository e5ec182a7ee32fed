"""Training kernels for notebook 06's steps (RMSNorm by warp shuffles, a 256-float head, norm
then rope, the fused head, its launch).

Variants: the sum by a shared-memory tree or by shuffles, lanes reading neighbouring floats
(lane, lane + 32) or a pair each, lane 0 summing alone, shared atomics, and for the launch
step 1 to 32 warps a block.
"""

import math

from numba import cuda, float32, uint64

FULL = 0xFFFFFFFF

# --- 06.1: RMSNorm of a 64-float row, one warp ---------------------------------------------


@cuda.jit(fastmath=True)
def norm_lanes_apart(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        a = x[row * 64 + lane]  # lanes on neighbouring floats: one sector run per load
        b = x[row * 64 + lane + 32]
        ss = a * a + b * b
        for k in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL, ss, k)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[row * 64 + lane] = a * scale * weight[lane]
        out[row * 64 + lane + 32] = b * scale * weight[lane + 32]


@cuda.jit(fastmath=True)
def norm_shared_tree(x, out, weight, rows, eps):
    buf = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    row = cuda.blockIdx.x * 4 + t // 32
    a = float32(0.0)
    b = float32(0.0)
    if row < rows:
        a = x[row * 64 + 2 * lane]
        b = x[row * 64 + 2 * lane + 1]
    buf[t] = a * a + b * b
    cuda.syncthreads()
    step = 16
    while step > 0:
        if lane < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if row < rows:
        scale = float32(1.0) / math.sqrt(buf[t - lane] / float32(64.0) + eps)
        out[row * 64 + 2 * lane] = a * scale * weight[2 * lane]
        out[row * 64 + 2 * lane + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def norm_down_then_broadcast(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        for k in (16, 8, 4, 2, 1):
            ss += cuda.shfl_down_sync(FULL, ss, k)
        total = cuda.shfl_sync(FULL, ss, 0)
        scale = float32(1.0) / math.sqrt(total * float32(1.0 / 64.0) + eps)
        out[first] = a * scale * weight[lane * 2]
        out[first + 1] = b * scale * weight[lane * 2 + 1]


@cuda.jit(fastmath=True)
def norm_weights_first(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        w0 = weight[lane * 2]  # every load before the first store
        w1 = weight[lane * 2 + 1]
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        ss = a * a + b * b
        for k in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL, ss, k)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[first] = a * scale * w0
        out[first + 1] = b * scale * w1


# --- 06.2: a 256-float row, one block of four warps ----------------------------------------


@cuda.jit(fastmath=True)
def norm256_shared_tree(x, out, weight, rows, eps):
    buf = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * 256 + t * 2
    a = x[first]
    b = x[first + 1]
    buf[t] = a * a + b * b
    cuda.syncthreads()
    step = 64
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    scale = float32(1.0) / math.sqrt(buf[0] / float32(256.0) + eps)
    out[first] = a * scale * weight[t * 2]
    out[first + 1] = b * scale * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def norm256_shared_atomic(x, out, weight, rows, eps):
    total = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    if t == 0:
        total[0] = float32(0.0)
    cuda.syncthreads()
    first = cuda.blockIdx.x * 256 + t * 2
    a = x[first]
    b = x[first + 1]
    ss = a * a + b * b
    for k in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL, ss, k)
    if t % 32 == 0:
        cuda.atomic.add(total, 0, ss)
    cuda.syncthreads()
    scale = float32(1.0) / math.sqrt(total[0] / float32(256.0) + eps)
    out[first] = a * scale * weight[t * 2]
    out[first + 1] = b * scale * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def norm256_lanes_apart(x, out, weight, rows, eps):
    part = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * 256
    a = x[base + t]
    b = x[base + t + 128]
    ss = a * a + b * b
    for k in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL, ss, k)
    if t % 32 == 0:
        part[t // 32] = ss
    cuda.syncthreads()
    scale = float32(1.0) / math.sqrt((part[0] + part[1] + part[2] + part[3]) / float32(256.0)
                                     + eps)
    out[base + t] = a * scale * weight[t]
    out[base + t + 128] = b * scale * weight[t + 128]


# --- 06.3: norm, then rotate ---------------------------------------------------------------


@cuda.jit(fastmath=True)
def rms_rope_tables_first(x, out, weight, positions, inv_freq, rows, eps):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        first = row * 64 + lane * 2
        a = x[first]
        b = x[first + 1]
        w0 = weight[lane * 2]
        w1 = weight[lane * 2 + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        ss = a * a + b * b
        for k in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL, ss, k)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        c, s = math.cos(angle), math.sin(angle)
        a = a * scale * w0
        b = b * scale * w1
        out[first] = a * c - b * s
        out[first + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rms_rope_shared_tree(x, out, weight, positions, inv_freq, rows, eps):
    buf = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    row = cuda.blockIdx.x * 4 + t // 32
    a = float32(0.0)
    b = float32(0.0)
    if row < rows:
        a = x[row * 64 + 2 * lane]
        b = x[row * 64 + 2 * lane + 1]
    buf[t] = a * a + b * b
    cuda.syncthreads()
    step = 16
    while step > 0:
        if lane < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if row < rows:
        scale = float32(1.0) / math.sqrt(buf[t - lane] / float32(64.0) + eps)
        a = a * scale * weight[2 * lane]
        b = b * scale * weight[2 * lane + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        out[row * 64 + 2 * lane] = a * math.cos(angle) - b * math.sin(angle)
        out[row * 64 + 2 * lane + 1] = a * math.sin(angle) + b * math.cos(angle)


# --- 06.4 / 06.5: the fused head -----------------------------------------------------------


@cuda.jit(fastmath=True)
def fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
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
            for k in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL, ss, k)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            if head < heads_q:
                w0, w1 = q_weight[lane * 2], q_weight[lane * 2 + 1]
            else:
                w0, w1 = k_weight[lane * 2], k_weight[lane * 2 + 1]
            a = a * scale * w0
            b = b * scale * w1
            angle = float32(positions[token]) * inv_freq[lane]
            c, s = math.cos(angle), math.sin(angle)
            out[first] = a * c - b * s
            out[first + uint64(1)] = a * s + b * c
        else:
            out[first] = a
            out[first + uint64(1)] = b


@cuda.jit(fastmath=True)
def fused_head_lanes_apart(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                           heads_k, heads_per_token, total_warps, eps):
    # lane l holds floats l and l + 32 (the pairs are (2p, 2p + 1)): the rotation needs the
    # partner float from another lane
    lane = cuda.threadIdx.x % 32
    w = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if w < total_warps:
        unit = uint64(w)
        token = unit // heads_per_token
        head = unit - token * heads_per_token
        first = unit * uint64(64)
        a = qkv[first + uint64(lane)]
        b = qkv[first + uint64(lane + 32)]
        if head < heads_q + heads_k:
            ss = a * a + b * b
            for k in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL, ss, k)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            weight = q_weight if head < heads_q else k_weight
            a = a * scale * weight[lane]
            b = b * scale * weight[lane + 32]
            pa = cuda.shfl_xor_sync(FULL, a, 1)  # float lane ^ 1 of the same half
            pb = cuda.shfl_xor_sync(FULL, b, 1)
            pos = float32(positions[token])
            odd = lane % 2
            ang_a = pos * inv_freq[lane // 2]
            ang_b = pos * inv_freq[16 + lane // 2]
            ca, sa = math.cos(ang_a), math.sin(ang_a)
            cb, sb = math.cos(ang_b), math.sin(ang_b)
            if odd == 0:
                out[first + uint64(lane)] = a * ca - pa * sa
                out[first + uint64(lane + 32)] = b * cb - pb * sb
            else:
                out[first + uint64(lane)] = pa * sa + a * ca
                out[first + uint64(lane + 32)] = pb * sb + b * cb
        else:
            out[first + uint64(lane)] = a
            out[first + uint64(lane + 32)] = b


def _fused_launch(warps_per_block):
    def launch(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
               heads_v, eps):
        per_token = heads_q + heads_k + heads_v
        total = tokens * per_token
        blocks = (total + warps_per_block - 1) // warps_per_block
        fused_head[blocks, 32 * warps_per_block](
            qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q),
            uint64(heads_k), uint64(per_token), total, float32(eps))
    launch.__name__ = f"launch_fused_{warps_per_block}"
    return launch


ENTRIES = [
    ("06.1", "lanes on neighbouring floats", norm_lanes_apart),
    ("06.1", "shared-memory tree", norm_shared_tree),
    ("06.1", "shuffle down, then broadcast", norm_down_then_broadcast),
    ("06.1", "weights read first", norm_weights_first),
    ("06.2", "shared-memory tree", norm256_shared_tree),
    ("06.2", "shared atomic sum", norm256_shared_atomic),
    ("06.2", "lanes on neighbouring floats", norm256_lanes_apart),
    ("06.3", "tables read first", rms_rope_tables_first),
    ("06.3", "shared-memory tree", rms_rope_shared_tree),
    ("06.4", "weights by branch", fused_head),
    ("06.4", "lanes on neighbouring floats", fused_head_lanes_apart),
    *[("06.5", f"{w} warps a block", _fused_launch(w)) for w in (1, 2, 8, 16, 32)],
]
