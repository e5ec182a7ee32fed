"""Notebook 06: fused QK-RMSNorm + RoPE, a warp per head."""
import math

from numba import cuda, float32, uint64, int64

FULL = 0xFFFFFFFF


# ---------------------------------------------------------------- 06.1
@cuda.jit(fastmath=True)
def rms_warp_loop(x, out, weight, rows, eps):
    gid = cuda.grid(1)
    w = gid // 32
    lane = cuda.threadIdx.x % 32
    if w < rows:
        e = w * 64 + 2 * lane
        a = x[e]
        b = x[e + 1]
        ss = a * a + b * b
        m = 16
        while m > 0:
            ss += cuda.shfl_xor_sync(FULL, ss, m)
            m //= 2
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        out[e] = a * scale * weight[2 * lane]
        out[e + 1] = b * scale * weight[2 * lane + 1]


@cuda.jit(fastmath=True)
def rms_warp_unrolled_zero_fill(x, out, weight, rows, eps):
    # every lane reaches the shuffles; warps past the end use zeros and store nothing
    warp = cuda.blockIdx.x * (cuda.blockDim.x >> 5) + (cuda.threadIdx.x >> 5)
    lane = cuda.threadIdx.x & 31
    live = warp < rows
    v0 = float32(0.0)
    v1 = float32(0.0)
    base = warp * 64 + lane * 2
    if live:
        v0 = x[base]
        v1 = x[base + 1]
    s = v0 * v0
    s = s + v1 * v1
    s = s + cuda.shfl_xor_sync(FULL, s, 1)
    s = s + cuda.shfl_xor_sync(FULL, s, 2)
    s = s + cuda.shfl_xor_sync(FULL, s, 4)
    s = s + cuda.shfl_xor_sync(FULL, s, 8)
    s = s + cuda.shfl_xor_sync(FULL, s, 16)
    inv = float32(1.0) / math.sqrt(s * float32(0.015625) + eps)
    if live:
        out[base + 1] = weight[lane * 2 + 1] * (v1 * inv)
        out[base] = weight[lane * 2] * (v0 * inv)


# ---------------------------------------------------------------- 06.2
@cuda.jit(fastmath=True)
def rms256_shared(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if row < rows:  # uniform over the block
        e = row * 256 + 2 * t
        a = x[e]
        b = x[e + 1]
        s = a * a + b * b
        for m in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL, s, m)
        if t % 32 == 0:
            partial[t // 32] = s
        cuda.syncthreads()
        total = partial[0] + partial[1] + partial[2] + partial[3]
        r = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
        out[e] = a * r * weight[2 * t]
        out[e + 1] = b * r * weight[2 * t + 1]


@cuda.jit(fastmath=True)
def rms256_rowloop_two_barriers(x, out, weight, rows, eps):
    # block-stride over rows; a second barrier keeps the next row's sums from
    # overwriting this row's before every thread has read them
    sums = cuda.shared.array(4, float32)
    tid = cuda.threadIdx.x
    lane = tid & 31
    wid = tid >> 5
    row = cuda.blockIdx.x
    while row < rows:
        off = row * 256 + tid * 2
        x0 = x[off]
        x1 = x[off + 1]
        acc = x0 * x0 + x1 * x1
        m = 1
        while m < 32:
            acc += cuda.shfl_xor_sync(FULL, acc, m)
            m *= 2
        if lane == 0:
            sums[wid] = acc
        cuda.syncthreads()
        tot = float32(0.0)
        for k in range(4):
            tot += sums[k]
        cuda.syncthreads()
        scale = float32(1.0) / math.sqrt(tot * float32(1.0 / 256.0) + eps)
        out[off] = x0 * weight[tid * 2] * scale
        out[off + 1] = x1 * weight[tid * 2 + 1] * scale
        row += cuda.gridDim.x


# ---------------------------------------------------------------- 06.3
@cuda.jit(fastmath=True)
def rms_then_rope(x, out, weight, positions, inv_freq, rows, eps):
    gid = cuda.grid(1)
    w = gid // 32
    lane = gid % 32
    if w < rows:
        e = w * 64 + 2 * lane
        a = x[e]
        b = x[e + 1]
        ss = a * a + b * b
        for m in (16, 8, 4, 2, 1):
            ss += cuda.shfl_xor_sync(FULL, ss, m)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
        n0 = a * scale * weight[2 * lane]
        n1 = b * scale * weight[2 * lane + 1]
        ang = float32(positions[w]) * inv_freq[lane]
        c = math.cos(ang)
        s = math.sin(ang)
        out[e] = n0 * c - n1 * s
        out[e + 1] = n0 * s + n1 * c


@cuda.jit(fastmath=True)
def rope_scale_on_cossin(x, out, weight, positions, inv_freq, rows, eps):
    # sin/cos first, then the reduction; the norm's scale rides on cos and sin
    warp = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    lane = cuda.threadIdx.x - (cuda.threadIdx.x // 32) * 32
    if warp >= rows:
        return
    theta = float32(positions[warp]) * inv_freq[lane]
    sn = math.sin(theta)
    cs = math.cos(theta)
    p = warp * 64 + lane + lane
    y0 = x[p] * weight[lane + lane]
    y1 = x[p + 1] * weight[lane + lane + 1]
    sq = x[p] * x[p] + x[p + 1] * x[p + 1]
    sq += cuda.shfl_xor_sync(FULL, sq, 16)
    sq += cuda.shfl_xor_sync(FULL, sq, 8)
    sq += cuda.shfl_xor_sync(FULL, sq, 4)
    sq += cuda.shfl_xor_sync(FULL, sq, 2)
    sq += cuda.shfl_xor_sync(FULL, sq, 1)
    rs = float32(1.0) / math.sqrt(sq * float32(0.015625) + eps)
    cs = cs * rs
    sn = sn * rs
    out[p] = y0 * cs - y1 * sn
    out[p + 1] = y1 * cs + y0 * sn


# ---------------------------------------------------------------- 06.4
@cuda.jit(fastmath=True)
def fused_head_branches(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                        heads_per_token, total_warps, eps):
    g = cuda.grid(1)
    w = g // 32
    lane = uint64(cuda.threadIdx.x % 32)
    if w < total_warps:
        wu = uint64(w)
        token = wu // heads_per_token
        head = wu - token * heads_per_token
        e = wu * uint64(64) + lane * uint64(2)
        a = qkv[e]
        b = qkv[e + uint64(1)]
        if head < heads_q + heads_k:
            if head < heads_q:
                w0 = q_weight[lane * uint64(2)]
                w1 = q_weight[lane * uint64(2) + uint64(1)]
            else:
                w0 = k_weight[lane * uint64(2)]
                w1 = k_weight[lane * uint64(2) + uint64(1)]
            ss = a * a + b * b
            for m in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL, ss, m)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
            n0 = a * scale * w0
            n1 = b * scale * w1
            ang = float32(positions[token]) * inv_freq[lane]
            c = math.cos(ang)
            s = math.sin(ang)
            out[e] = n0 * c - n1 * s
            out[e + uint64(1)] = n0 * s + n1 * c
        else:
            out[e] = a
            out[e + uint64(1)] = b


@cuda.jit(fastmath=True)
def fused_head_int64_vfirst(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q,
                            heads_k, heads_per_token, total_warps, eps):
    # signed index math; V handled first with an early return; the weight chosen by
    # reading both and selecting
    tid = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    warp = tid >> 5
    lane = tid & 31
    if warp >= total_warps:
        return
    hpt = int64(heads_per_token)
    nq = int64(heads_q)
    nqk = nq + int64(heads_k)
    token = warp // hpt
    head = warp - token * hpt
    off = warp * 64 + 2 * lane
    if head >= nqk:
        out[off] = qkv[off]
        out[off + 1] = qkv[off + 1]
        return
    x0 = qkv[off]
    x1 = qkv[off + 1]
    is_q = head < nq
    w0 = q_weight[2 * lane] if is_q else k_weight[2 * lane]
    w1 = q_weight[2 * lane + 1] if is_q else k_weight[2 * lane + 1]
    theta = float32(positions[token]) * inv_freq[lane]
    cth = math.cos(theta)
    sth = math.sin(theta)
    acc = x0 * x0 + x1 * x1
    m = 1
    while m <= 16:
        acc += cuda.shfl_xor_sync(FULL, acc, m)
        m <<= 1
    r = float32(1.0) / math.sqrt(acc * float32(1.0 / 64.0) + eps)
    y0 = x0 * w0 * r
    y1 = x1 * w1 * r
    out[off + 1] = y0 * sth + y1 * cth
    out[off] = y0 * cth - y1 * sth


# ---------------------------------------------------------------- 06.5
def launch_fused_4warps(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                        heads_k, heads_v, eps):
    hpt = heads_q + heads_k + heads_v
    total_warps = tokens * hpt
    blocks = (total_warps + 3) // 4
    fused_head_branches[blocks, 128](qkv, out, q_weight, k_weight, positions, inv_freq,
                                     uint64(heads_q), uint64(heads_k), uint64(hpt),
                                     total_warps, float32(eps))


def launch_fused_least_waste(qkv, out, q_weight, k_weight, positions, inv_freq, tokens,
                             heads_q, heads_k, heads_v, eps):
    # pick warps per block among 8, 4, 2, 1 to waste the fewest warps in the last block
    hpt = heads_q + heads_k + heads_v
    total_warps = tokens * hpt
    if total_warps <= 0:
        return
    best = None
    for wpb in (8, 4, 2, 1):
        if wpb > total_warps:
            continue
        waste = (-total_warps) % wpb
        if best is None or waste < best[0]:
            best = (waste, wpb)
    wpb = best[1]
    grid = -(-total_warps // wpb)
    fused_head_int64_vfirst[grid, 32 * wpb](qkv, out, q_weight, k_weight, positions, inv_freq,
                                            uint64(heads_q), uint64(heads_k), uint64(hpt),
                                            int(total_warps), float32(eps))


ENTRIES = [
    ("06.1", "while-halving butterfly, if-skip", rms_warp_loop),
    ("06.1", "unrolled rising butterfly, zero-fill", rms_warp_unrolled_zero_fill),
    ("06.2", "one row per block, explicit 4-sum", rms256_shared),
    ("06.2", "block-stride rows, two barriers", rms256_rowloop_two_barriers),
    ("06.3", "norm, weight, then rotate", rms_then_rope),
    ("06.3", "sincos first, scale folded into cos/sin", rope_scale_on_cossin),
    ("06.4", "uint64, nested Q/K branch, V else", fused_head_branches),
    ("06.4", "int64, V early return, weight select", fused_head_int64_vfirst),
    ("06.5", "4 warps per block", launch_fused_4warps),
    ("06.5", "least-waste warps per block", launch_fused_least_waste),
]


# ---------------------------------------------------------------- third entries


@cuda.jit(fastmath=True)
def rms_warp_pow_shiftloop(x, out, weight, rows, eps):
    # masks from a shift loop, scale as (mean + eps) ** -0.5, weight loaded before the sum
    t = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    r = t >> 5
    l = t & 31
    if rows - r > 0:
        w0 = weight[l * 2]
        w1 = weight[l * 2 + 1]
        p = r * 64 + l * 2
        h0 = x[p]
        h1 = x[p + 1]
        acc = h0 * h0 + h1 * h1
        for k in range(5):
            acc += cuda.shfl_xor_sync(FULL, acc, 16 >> k)
        inv = math.pow(acc * float32(1.0 / 64.0) + eps, float32(-0.5))
        out[p] = (h0 * w0) * inv
        out[p + 1] = (h1 * w1) * inv


@cuda.jit(fastmath=True)
def rms256_zero_fill_divide(x, out, weight, rows, eps):
    # the butterfly in a shift loop, the four sums read in a loop, divide by the rms
    red = cuda.shared.array(4, float32)
    tid = cuda.threadIdx.x
    r = cuda.blockIdx.x
    warp = tid // 32
    p = r * 256 + tid * 2
    h0 = float32(0.0)
    h1 = float32(0.0)
    if r < rows:
        h0 = x[p]
        h1 = x[p + 1]
    part = h0 * h0 + h1 * h1
    for k in range(4, -1, -1):
        part += cuda.shfl_xor_sync(FULL, part, 1 << k)
    if (tid & 31) == 0:
        red[warp] = part
    cuda.syncthreads()
    total = float32(0.0)
    for k in range(3, -1, -1):
        total += red[k]
    if r < rows:
        rms = math.sqrt(total / float32(256.0) + eps)
        out[p] = h0 / rms * weight[tid * 2]
        out[p + 1] = h1 / rms * weight[tid * 2 + 1]


@cuda.jit(fastmath=True)
def rms_rope_divide_by_rms(x, out, weight, positions, inv_freq, rows, eps):
    # divide by the rms instead of multiplying by its reciprocal; uint-free signed math
    w = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    lane = cuda.threadIdx.x % 32
    if not (w < rows):
        return
    base = 64 * w
    i0 = base + 2 * lane
    v = x[i0]
    u = x[i0 + 1]
    ss = u * u + v * v
    mask = 16
    while mask >= 1:
        ss = ss + cuda.shfl_xor_sync(FULL, ss, mask)
        mask = mask >> 1
    rms = math.sqrt(ss / float32(64.0) + eps)
    z0 = v / rms * weight[2 * lane]
    z1 = u / rms * weight[2 * lane + 1]
    f = inv_freq[lane]
    ang = f * float32(positions[w])
    out[i0 + 1] = z1 * math.cos(ang) + z0 * math.sin(ang)
    out[i0] = z0 * math.cos(ang) - z1 * math.sin(ang)


@cuda.jit(device=True, inline=True, fastmath=True)
def _norm_rope_pair(a, b, w0, w1, pos, f, eps):
    ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL, ss, m)
    sc = float32(1.0) / math.sqrt(ss * float32(0.015625) + eps)
    n0 = a * sc * w0
    n1 = b * sc * w1
    th = pos * f
    c = math.cos(th)
    s = math.sin(th)
    return n0 * c - n1 * s, n0 * s + n1 * c


@cuda.jit(fastmath=True)
def fused_head_device_fn(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                         heads_per_token, total_warps, eps):
    # a device function does norm + rope; the kind of head picks its weights; grid-stride warps
    lane = cuda.threadIdx.x % 32
    warps_in_grid = (cuda.gridDim.x * cuda.blockDim.x) // 32
    w = cuda.grid(1) // 32
    hpt = int64(heads_per_token)
    hq = int64(heads_q)
    hk = int64(heads_k)
    while w < total_warps:
        token = w // hpt
        head = w % hpt
        e = w * 64 + lane * 2
        a = qkv[e]
        b = qkv[e + 1]
        if head < hq:
            o0, o1 = _norm_rope_pair(a, b, q_weight[lane * 2], q_weight[lane * 2 + 1],
                                     float32(positions[token]), inv_freq[lane], eps)
        elif head < hq + hk:
            o0, o1 = _norm_rope_pair(a, b, k_weight[lane * 2], k_weight[lane * 2 + 1],
                                     float32(positions[token]), inv_freq[lane], eps)
        else:
            o0 = a
            o1 = b
        out[e] = o0
        out[e + 1] = o1
        w += warps_in_grid


def launch_fused_big_blocks(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                            heads_k, heads_v, eps):
    # as many warps a block as there are, up to 32 (1024 threads)
    heads_per_token = heads_q + heads_k + heads_v
    total_warps = int(tokens) * int(heads_per_token)
    if total_warps < 1:
        return
    warps_per_block = total_warps if total_warps < 32 else 32
    blocks = (total_warps + warps_per_block - 1) // warps_per_block
    fused_head_device_fn[blocks, warps_per_block * 32](
        qkv, out, q_weight, k_weight, positions, inv_freq, uint64(heads_q), uint64(heads_k),
        uint64(heads_per_token), total_warps, float32(eps))


ENTRIES += [
    ("06.1", "shift-loop masks, pow(-0.5) scale", rms_warp_pow_shiftloop),
    ("06.2", "zero-fill block, loop over sums, divide", rms256_zero_fill_divide),
    ("06.3", "divide by rms, while-halving", rms_rope_divide_by_rms),
    ("06.4", "device function, grid-stride warps", fused_head_device_fn),
    ("06.5", "up to 32 warps a block", launch_fused_big_blocks),
]
