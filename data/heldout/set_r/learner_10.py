"""Notebook 10: the paged KV-cache write, FP8, ragged batches."""
import math

import numpy as np
from numba import cuda, float32, uint32, int64

from ropelab.grader.steps.nb10 import float_bits

FULL = 0xFFFFFFFF


# ---------------------------------------------------------------- 10.1
@cuda.jit
def scatter_flat(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        t = i // row
        c = i - t * row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * row + c] = k[i]


@cuda.jit
def scatter_gridstride_mod(k, slot_mapping, out, tokens, heads, head_dim):
    # grid-stride loop, float index split with divmod-style % and //
    width = heads * head_dim
    total = tokens * width
    stride = cuda.gridDim.x * cuda.blockDim.x
    for i in range(cuda.grid(1), total, stride):
        s = slot_mapping[i // width]
        if s < 0:
            continue
        out[s * width + i % width] = k[i]


# ---------------------------------------------------------------- 10.2
@cuda.jit
def e4m3_uint32_floatsub(x, out, inv_scale, n):
    # uint32 bit work for the normal range (rebias by subtracting), float rounding for
    # the subnormals (adding 2**23 rounds to nearest even)
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        u = float_bits(v)
        sign = (u >> uint32(31)) << uint32(7)
        a = u & uint32(0x7FFFFFFF)
        if a > uint32(0x7F800000):
            code = uint32(0x7F)
        elif a >= uint32(0x43E00000):  # 448 and above, infinity too
            code = uint32(0x7E)
        elif a >= uint32(0x3C800000):  # 2**-6: normal
            r = a - uint32(0x3C000000)  # exponent bias 127 -> 7
            lsb = (r >> uint32(20)) & uint32(1)
            code = (r + uint32(0x7FFFF) + lsb) >> uint32(20)
        else:
            f = abs(v) * float32(512.0)
            magic = float32(8388608.0)
            q = (f + magic) - magic
            code = uint32(q)
        out[i] = float32(code | sign)


@cuda.jit
def e4m3_int64_shift(x, out, inv_scale, n):
    # everything in signed 64-bit integers; subnormals by shifting the full mantissa
    i = cuda.grid(1)
    if i >= n:
        return
    bits = int64(float_bits(x[i] * inv_scale))
    neg = (bits >> 31) & 1
    e = (bits >> 23) & 0xFF
    m = bits & 0x7FFFFF
    if e == 255 and m != 0:
        code = 0x7F
    elif e > 135 or (e == 135 and m >= 0x600000):
        code = 0x7E
    elif e >= 121:
        # exponent e - 120 (4 bits) and 3 mantissa bits, nearest even on 20 bits
        q = ((e - 120) << 3) | (m >> 20)
        rem = m & 0xFFFFF
        if rem > 0x80000 or (rem == 0x80000 and (q & 1) == 1):
            q += 1
        code = q
    elif e == 0:
        code = 0
    else:
        full = m | 0x800000  # value = full * 2**(e - 150); code = value * 2**9
        sh = 141 - e
        if sh > 24:
            code = 0
        else:
            q = full >> sh
            rem = full & ((1 << sh) - 1)
            half = 1 << (sh - 1)
            if rem > half or (rem == half and (q & 1) == 1):
                q += 1
            code = q
    out[i] = float32(code + neg * 128)


# ---------------------------------------------------------------- 10.3
@cuda.jit(fastmath=True)
def kv_write_plain(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    g = cuda.grid(1)
    t = g // 32
    lane = g % 32
    if t < tokens:
        slot = slot_mapping[t]
        if slot >= 0:
            kb = t * 256 + 128 + 2 * lane
            a = qkv[kb]
            b = qkv[kb + 1]
            ss = a * a + b * b
            for m in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL, ss, m)
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + float32(1e-6))
            n0 = a * scale * k_weight[2 * lane]
            n1 = b * scale * k_weight[2 * lane + 1]
            ang = float32(positions[t]) * inv_freq[lane]
            c = math.cos(ang)
            s = math.sin(ang)
            ko = slot * 64 + 2 * lane
            out[ko] = n0 * c - n1 * s
            out[ko + 1] = n0 * s + n1 * c
            vo = (num_slots + slot) * 64 + 2 * lane
            out[vo] = qkv[kb + 64]
            out[vo + 1] = qkv[kb + 65]


@cuda.jit(fastmath=True)
def kv_write_vfirst_folded(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                           num_slots):
    # V copied first; the norm's scale folded into cos and sin; rising butterfly
    tx = cuda.threadIdx.x
    tok = cuda.blockIdx.x * 4 + (tx >> 5)
    lane = tx & 31
    if tok >= tokens:
        return
    slot = slot_mapping[tok]
    if slot < 0:
        return
    row = tok * 256
    two_l = lane << 1
    v_src = row + 192 + two_l
    v_dst = (slot + num_slots) * 64 + two_l
    out[v_dst] = qkv[v_src]
    out[v_dst + 1] = qkv[v_src + 1]
    k0 = qkv[row + 128 + two_l]
    k1 = qkv[row + 129 + two_l]
    theta = float32(positions[tok]) * inv_freq[lane]
    cs = math.cos(theta)
    sn = math.sin(theta)
    acc = k0 * k0 + k1 * k1
    m = 1
    while m < 32:
        acc += cuda.shfl_xor_sync(FULL, acc, m)
        m <<= 1
    rs = float32(1.0) / math.sqrt(acc * float32(0.015625) + float32(1e-6))
    cs *= rs
    sn *= rs
    y0 = k0 * k_weight[two_l]
    y1 = k1 * k_weight[two_l + 1]
    dst = slot * 64 + two_l
    out[dst + 1] = y0 * sn + y1 * cs
    out[dst] = y0 * cs - y1 * sn


# ---------------------------------------------------------------- 10.4
def launch_kv_loop(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                   num_slots):
    tokens = sum(query_lens)
    pos = np.zeros(tokens, dtype=np.int32)
    start = 0
    for q, ctx in zip(query_lens, context_lens):
        for j in range(q):
            pos[start + j] = ctx + j
        start += q
    if tokens == 0:
        return
    d_pos = cuda.to_device(pos)
    kv_write_plain[(tokens + 3) // 4, 128](qkv, k_weight, d_pos, slot_mapping, inv_freq, out,
                                           tokens, num_slots)


def launch_kv_cumsum(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                     num_slots):
    # positions vectorized: token index minus its request's start, plus its context
    ql = np.asarray(query_lens, dtype=np.int64)
    cl = np.asarray(context_lens, dtype=np.int64)
    tokens = int(ql.sum())
    if tokens == 0:
        return
    starts = np.concatenate(([0], np.cumsum(ql)[:-1]))
    req = np.repeat(np.arange(len(ql)), ql)
    positions = (cl[req] + np.arange(tokens) - starts[req]).astype(np.int32)
    blocks = -(-tokens // 4)
    kv_write_vfirst_folded[blocks, 128](qkv, k_weight, cuda.to_device(positions), slot_mapping,
                                        inv_freq, out, int64(tokens), int64(num_slots))


ENTRIES = [
    ("10.1", "flat index, guard then slot test", scatter_flat),
    ("10.1", "grid-stride, % and //, continue", scatter_gridstride_mod),
    ("10.2", "uint32 subtract-rebias, float magic subnormals", e4m3_uint32_floatsub),
    ("10.2", "int64 fields, shifted-mantissa subnormals", e4m3_int64_shift),
    ("10.3", "guarded warp, K then V", kv_write_plain),
    ("10.3", "V first, early returns, scale on cos/sin", kv_write_vfirst_folded),
    ("10.4", "python loop positions, to_device", launch_kv_loop),
    ("10.4", "numpy repeat/cumsum positions", launch_kv_cumsum),
]


# ---------------------------------------------------------------- third entries
@cuda.jit
def scatter_head_dim_split(k, slot_mapping, out, tokens, heads, head_dim):
    # split the thread number into (token, head, dim) and rebuild the cache address
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= tokens * heads * head_dim:
        return
    d = i % head_dim
    th = i // head_dim
    h = th % heads
    t = th // heads
    slot = slot_mapping[t]
    if slot < 0:
        return
    out[(slot * heads + h) * head_dim + d] = k[(t * heads + h) * head_dim + d]


@cuda.jit
def e4m3_clamp_then_float_round(x, out, inv_scale, n):
    # clamp to [-448, 448] first, then round a float32 built from the mantissa bits:
    # 8 + m / 2**20 (exact) rounded to nearest even by adding and removing 2**23
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        if v != v:
            code = 0x7F
            u = float_bits(v)
            if u >= uint32(0x80000000):
                code = 0xFF
            out[i] = float32(code)
            return
        v = min(max(v, float32(-448.0)), float32(448.0))
        u = float_bits(v)
        sgn = 0
        if u >= uint32(0x80000000):
            sgn = 128
        mag = abs(v)
        big = float32(8388608.0)
        if mag >= float32(0.015625):  # 2**-6
            ex = int64(u >> uint32(23)) & 0xFF
            mant = int64(u & uint32(0x7FFFFF))
            q = float32(8.0) + float32(mant) * float32(1.0 / 1048576.0)
            qi = int64((q + big) - big)  # 8 .. 16
            code = ((ex - 120) << 3) + qi - 8
        else:
            code = int64((mag * float32(512.0) + big) - big)
        out[i] = float32(code + sgn)


@cuda.jit(fastmath=True)
def kv_write_compute_then_guard(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                                num_slots):
    # every live warp computes; only the stores look at the slot; uint32-free int64 math
    tid = cuda.grid(1)
    tok = tid >> 5
    lane = tid & 31
    if tok < tokens:
        src = tok * 256 + 2 * lane
        k0 = qkv[src + 128]
        k1 = qkv[src + 129]
        s2 = k0 * k0
        s2 += k1 * k1
        for k in range(5):
            s2 += cuda.shfl_xor_sync(FULL, s2, 1 << k)
        rms = math.sqrt(s2 / float32(64.0) + float32(1e-6))
        z0 = k0 / rms * k_weight[2 * lane]
        z1 = k1 / rms * k_weight[2 * lane + 1]
        th = inv_freq[lane] * float32(positions[tok])
        c = math.cos(th)
        s = math.sin(th)
        slot = slot_mapping[tok]
        if slot >= 0:
            kd = 64 * slot + 2 * lane
            vd = kd + 64 * num_slots
            out[kd] = z0 * c - z1 * s
            out[kd + 1] = z1 * c + z0 * s
            out[vd] = qkv[src + 192]
            out[vd + 1] = qkv[src + 193]


def launch_kv_accumulate(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                         num_slots):
    # request starts by itertools.accumulate; a device array filled by copy_to_device
    from itertools import accumulate
    starts = [0] + list(accumulate(query_lens))
    tokens = starts[-1]
    if tokens <= 0:
        return
    host = np.empty(tokens, dtype=np.int32)
    for r in range(len(query_lens)):
        host[starts[r]:starts[r + 1]] = np.arange(starts[r + 1] - starts[r]) + context_lens[r]
    d_positions = cuda.device_array(tokens, dtype=np.int32)
    d_positions.copy_to_device(host)
    grid = (tokens + 3) // 4
    kv_write_compute_then_guard[grid, 128](qkv, k_weight, d_positions, slot_mapping, inv_freq,
                                           out, tokens, num_slots)


ENTRIES += [
    ("10.1", "(token, head, dim) split, early returns", scatter_head_dim_split),
    ("10.2", "clamp first, float rounding of mantissa", e4m3_clamp_then_float_round),
    ("10.3", "compute all, guard only the stores", kv_write_compute_then_guard),
    ("10.4", "accumulate starts, copy_to_device", launch_kv_accumulate),
]
