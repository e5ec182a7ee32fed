import math
from numba import cuda, float32, uint64, int64

FULL = 0xFFFFFFFF


@cuda.jit(fastmath=True)
def rms_warp_a(x, out, weight, rows, eps):
    g = cuda.grid(1)
    w = g // 32
    lane = cuda.threadIdx.x % 32
    if w < rows:
        e = w * 64 + 2 * lane
        a = x[e]
        b = x[e + 1]
        ss = a * a + b * b
        m = 16
        while m >= 1:
            ss += cuda.shfl_xor_sync(FULL, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64) + eps)
        out[e] = a * scale * weight[2 * lane]
        out[e + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit
def rms_warp_b(x, out, weight, rows, eps):
    lane = cuda.threadIdx.x & 31
    w = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if w >= rows:
        return
    base = w * 64
    v0 = x[base + 2 * lane]
    v1 = x[base + 2 * lane + 1]
    s = v0 * v0
    s += v1 * v1
    for m in (1, 2, 4, 8, 16):
        s += cuda.shfl_xor_sync(FULL, s, m)
    inv = float32(1.0) / math.sqrt(s * float32(1.0 / 64.0) + eps)
    out[base + 2 * lane] = weight[2 * lane] * (v0 * inv)
    out[base + 2 * lane + 1] = weight[2 * lane + 1] * (v1 * inv)


@cuda.jit(fastmath=True)
def rms256_a(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x
    e = r * 256 + 2 * t
    a = x[e]
    b = x[e + 1]
    s = a * a + b * b
    m = 16
    while m > 0:
        s += cuda.shfl_xor_sync(FULL, s, m)
        m >>= 1
    if t % 32 == 0:
        partial[t // 32] = s
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256) + eps)
    out[e] = a * scale * weight[2 * t]
    out[e + 1] = b * scale * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms256_b(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    lane = t & 31
    warp = t >> 5
    row = cuda.blockIdx.x
    if row < rows:  # uniform across the block
        off = row * 256 + t * 2
        v0 = x[off]
        v1 = x[off + 1]
        s = v0 * v0 + v1 * v1
        s = s + cuda.shfl_xor_sync(FULL, s, 1)
        s = s + cuda.shfl_xor_sync(FULL, s, 2)
        s = s + cuda.shfl_xor_sync(FULL, s, 4)
        s = s + cuda.shfl_xor_sync(FULL, s, 8)
        s = s + cuda.shfl_xor_sync(FULL, s, 16)
        if lane == 0:
            partial[warp] = s
        cuda.syncthreads()
        total = float32(0)
        for k in range(4):
            total += partial[k]
        r = math.sqrt(total * float32(0.00390625) + eps)
        out[off] = v0 / r * weight[t * 2]
        out[off + 1] = v1 / r * weight[t * 2 + 1]


@cuda.jit(fastmath=True)
def rms_rope_a(x, out, weight, positions, inv_freq, rows, eps):
    g = cuda.grid(1)
    row = g // 32
    l = cuda.threadIdx.x % 32
    if row < rows:
        e = row * 64 + 2 * l
        a = x[e]
        b = x[e + 1]
        ss = a * a + b * b
        m = 16
        while m >= 1:
            ss += cuda.shfl_xor_sync(FULL, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64) + eps)
        na = a * scale * weight[2 * l]
        nb = b * scale * weight[2 * l + 1]
        th = float32(positions[row]) * inv_freq[l]
        c = math.cos(th)
        s = math.sin(th)
        out[e] = na * c - nb * s
        out[e + 1] = na * s + nb * c


@cuda.jit(fastmath=True)
def rms_rope_b(x, out, weight, positions, inv_freq, rows, eps):
    l = cuda.threadIdx.x & 31
    row = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if row >= rows:
        return
    # the angle first, then the norm
    ang = inv_freq[l] * float32(positions[row])
    sn = math.sin(ang)
    cs = math.cos(ang)
    e = row * 64 + l * 2
    v0 = x[e]
    v1 = x[e + 1]
    ss = v0 * v0 + v1 * v1
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL, ss, m)
    rinv = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    n0 = weight[l * 2] * v0 * rinv
    n1 = weight[l * 2 + 1] * v1 * rinv
    out[e + 1] = n1 * cs + n0 * sn
    out[e] = n0 * cs - n1 * sn


@cuda.jit(fastmath=True)
def fused_a(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
            heads_per_token, total_warps, eps):
    g = cuda.grid(1)
    w = g // 32
    lane = cuda.threadIdx.x % 32
    if w < total_warps:
        uw = uint64(w)
        token = uw // heads_per_token
        head = uw - token * heads_per_token
        e = w * 64 + 2 * lane
        a = qkv[e]
        b = qkv[e + 1]
        if head < heads_q + heads_k:
            ss = a * a + b * b
            m = 16
            while m >= 1:
                ss += cuda.shfl_xor_sync(FULL, ss, m)
                m //= 2
            scale = float32(1.0) / math.sqrt(ss / float32(64) + eps)
            if head < heads_q:
                wa = q_weight[2 * lane]
                wb = q_weight[2 * lane + 1]
            else:
                wa = k_weight[2 * lane]
                wb = k_weight[2 * lane + 1]
            na = a * scale * wa
            nb = b * scale * wb
            th = float32(positions[token]) * inv_freq[lane]
            c = math.cos(th)
            s = math.sin(th)
            out[e] = na * c - nb * s
            out[e + 1] = na * s + nb * c
        else:
            out[e] = a
            out[e + 1] = b


@cuda.jit(fastmath=True)
def fused_b(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
            heads_per_token, total_warps, eps):
    lane = cuda.threadIdx.x & 31
    w = cuda.blockIdx.x * (cuda.blockDim.x >> 5) + (cuda.threadIdx.x >> 5)
    if w >= total_warps:
        return
    uw = uint64(w)
    tok = uw // heads_per_token
    head = uw - heads_per_token * tok
    off = uw * uint64(64) + uint64(2 * lane)
    v0 = qkv[off]
    v1 = qkv[off + uint64(1)]
    if head >= heads_q + heads_k:  # V head: plain copy
        out[off] = v0
        out[off + uint64(1)] = v1
        return
    ss = v0 * v0 + v1 * v1
    ss += cuda.shfl_xor_sync(FULL, ss, 16)
    ss += cuda.shfl_xor_sync(FULL, ss, 8)
    ss += cuda.shfl_xor_sync(FULL, ss, 4)
    ss += cuda.shfl_xor_sync(FULL, ss, 2)
    ss += cuda.shfl_xor_sync(FULL, ss, 1)
    r = math.sqrt(ss / float32(64.0) + eps)
    is_q = head < heads_q
    w0 = q_weight[2 * lane] if is_q else k_weight[2 * lane]
    w1 = q_weight[2 * lane + 1] if is_q else k_weight[2 * lane + 1]
    n0 = v0 / r * w0
    n1 = v1 / r * w1
    ang = float32(positions[tok]) * inv_freq[lane]
    cs = math.cos(ang)
    sn = math.sin(ang)
    out[off] = n0 * cs - n1 * sn
    out[off + uint64(1)] = n0 * sn + n1 * cs


def launch_fused_a(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                   heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    warps_per_block = 4
    blocks = (total + warps_per_block - 1) // warps_per_block
    fused_a[blocks, 32 * warps_per_block](qkv, out, q_weight, k_weight, positions, inv_freq,
                                          uint64(heads_q), uint64(heads_k), uint64(hpt),
                                          total, float32(eps))


def launch_fused_b(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                   heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    wpb = min(8, total)  # up to 8 warps a block, fewer when there are few heads
    blocks = math.ceil(total / wpb)
    fused_b[blocks, 32 * wpb](qkv, out, q_weight, k_weight, positions, inv_freq,
                              uint64(heads_q), uint64(heads_k), uint64(hpt), int64(total),
                              float32(eps))


ENTRIES = [
    ("06.1", "grid//32, while butterfly", rms_warp_a),
    ("06.1", "bit ops, tuple butterfly 1..16, no fastmath", rms_warp_b),
    ("06.2", "mod/div lane, direct 4-sum", rms256_a),
    ("06.2", "bit ops, unrolled butterfly, loop over partials, divide by r", rms256_b),
    ("06.3", "norm then angle", rms_rope_a),
    ("06.3", "angle first, early return", rms_rope_b),
    ("06.4", "if QK else copy, weight branch", fused_a),
    ("06.4", "V early return, conditional weights, divide by r", fused_b),
    ("06.5", "4 warps per block", launch_fused_a),
    ("06.5", "up to 8 warps per block", launch_fused_b),
]


@cuda.jit(fastmath=True)
def rms_warp_c(x, out, weight, rows, eps):
    # shfl_down tree to lane 0, then broadcast from lane 0
    lane = cuda.laneid
    w = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // 32
    if w < rows:
        e = w * 64 + 2 * lane
        a = x[e]
        b = x[e + 1]
        s = a * a + b * b
        off = 16
        while off > 0:
            s += cuda.shfl_down_sync(FULL, s, off)
            off //= 2
        s = cuda.shfl_sync(FULL, s, 0)
        scale = float32(1.0) / math.sqrt(s / float32(64) + eps)
        out[e] = a * scale * weight[2 * lane]
        out[e + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def rms256_c(x, out, weight, rows, eps):
    # shfl_down per warp, thread 0 combines the four warps, second barrier
    partial = cuda.shared.array(4, float32)
    scale_s = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    e = cuda.blockIdx.x * 256 + 2 * t
    a = x[e]
    b = x[e + 1]
    s = a * a + b * b
    for off in (16, 8, 4, 2, 1):
        s += cuda.shfl_down_sync(FULL, s, off)
    if cuda.laneid == 0:
        partial[t // 32] = s
    cuda.syncthreads()
    if t == 0:
        tot = partial[0] + partial[1] + partial[2] + partial[3]
        scale_s[0] = float32(1.0) / math.sqrt(tot / float32(256) + eps)
    cuda.syncthreads()
    sc = scale_s[0]
    out[e] = a * sc * weight[2 * t]
    out[e + 1] = b * sc * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms_rope_c(x, out, weight, positions, inv_freq, rows, eps):
    # shfl_down + broadcast, rotation written with a swapped partner
    lane = cuda.laneid
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        e = row * 64 + 2 * lane
        a = x[e] * weight[2 * lane]
        b = x[e + 1] * weight[2 * lane + 1]
        xa = x[e]
        xb = x[e + 1]
        s = xa * xa + xb * xb
        for off in (16, 8, 4, 2, 1):
            s += cuda.shfl_down_sync(FULL, s, off)
        s = cuda.shfl_sync(FULL, s, 0)
        r = float32(1.0) / math.sqrt(s / float32(64) + eps)
        a = a * r
        b = b * r
        th = float32(positions[row]) * inv_freq[lane]
        out[e] = a * math.cos(th) + (-b) * math.sin(th)
        out[e + 1] = b * math.cos(th) + a * math.sin(th)


def launch_fused_c(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                   heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total = tokens * hpt
    threads = 1024 if total * 32 >= 1024 else 32 * total  # as many warps as fit, max 32
    blocks = -(-total * 32 // threads)
    fused_a[blocks, threads](qkv, out, q_weight, k_weight, positions, inv_freq,
                             uint64(heads_q), uint64(heads_k), uint64(hpt), total,
                             float32(eps))


ENTRIES += [
    ("06.1", "shfl_down then broadcast", rms_warp_c),
    ("06.2", "shfl_down, thread 0 scale in shared, two barriers", rms256_c),
    ("06.3", "weight first, shfl_down + broadcast", rms_rope_c),
    ("06.5", "1024-thread blocks", launch_fused_c),
]
