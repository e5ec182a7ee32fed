"""Set F, notebook 10 (10_serving.ipynb): steps 10.1 .. 10.4."""
import ropelab  # noqa: F401

import math

import numpy as np
from numba import cuda, float32, int32, int64, uint32

from ropelab.grader.steps.nb10 import float_bits

FULL_MASK = 0xFFFFFFFF


# ---- 10.1: scatter_rows -------------------------------------------------------------------
@cuda.jit
def scatter_plain(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        t = i // row
        c = i - t * row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * row + c] = k[i]


@cuda.jit
def scatter_modulo_return(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    width = heads * head_dim
    if i >= tokens * width:
        return
    slot = slot_mapping[i // width]
    if slot < 0:
        return
    out[slot * width + i % width] = k[i]


@cuda.jit
def scatter_gridstride(k, slot_mapping, out, tokens, heads, head_dim):
    row = heads * head_dim
    total = tokens * row
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < total:
        t = i // row
        slot = slot_mapping[t]
        if slot >= 0:
            h = (i - t * row) // head_dim
            d = i - t * row - h * head_dim
            out[(slot * heads + h) * head_dim + d] = k[i]
        i += step


# ---- 10.2: e4m3_codes ---------------------------------------------------------------------
@cuda.jit
def e4m3_hint_bits(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        b = float_bits(v)
        sign = (b >> uint32(24)) & uint32(0x80)
        a = b & uint32(0x7FFFFFFF)
        if a > uint32(0x7F800000):  # NaN
            code = uint32(0x7F)
        elif a >= uint32(0x43E00000):  # 448 and above, infinity included
            code = uint32(0x7E)
        elif a >= uint32(0x3C800000):  # normal: 2**-6 and up
            code = (a - uint32(120 << 23) + uint32(0x7FFFF) + ((a >> uint32(20)) & uint32(1))) \
                >> uint32(20)
        else:  # subnormal: multiples of 2**-9, rounded by the float add itself
            av = v if v >= float32(0.0) else -v
            code = float_bits(av + float32(16384.0)) - float_bits(float32(16384.0))
        out[i] = float32(code | sign)


@cuda.jit
def e4m3_explicit_round(x, out, inv_scale, n):
    # exponent and mantissa split by hand, round-to-nearest-even written out
    i = cuda.grid(1)
    if i >= n:
        return
    v = x[i] * inv_scale
    b = float_bits(v)
    neg = (b >> uint32(31)) != uint32(0)
    e = int64((b >> uint32(23)) & uint32(0xFF))
    m = int64(b & uint32(0x7FFFFF))
    if e == 255 and m != 0:
        code = int64(0x7F)
    elif e == 255 or (e > 135) or (e == 135 and m >= 0x600000):
        code = int64(0x7E)  # >= 448 = 1.75 * 2**8 (or infinity)
    elif e >= 121:
        keep = m >> 20
        rest = m & 0xFFFFF
        if rest > 0x80000 or (rest == 0x80000 and (keep & 1) == 1):
            keep += 1
        code = ((e - 120) << 3) + keep  # a mantissa carry moves into the exponent by itself
    else:
        # |v| = (m | implicit) * 2**(e - 150); the code counts units of 2**-9
        if e == 0:
            mant = m
            shift = 150 - 9 - 1  # denormal float32: exponent field 0 means 2**-149 units
        else:
            mant = m | 0x800000
            shift = 150 - 9 - e
        if shift >= 40:
            code = int64(0)
        else:
            q = mant >> shift
            rest = mant - (q << shift)
            half = int64(1) << (shift - 1)
            if rest > half or (rest == half and (q & 1) == 1):
                q += 1
            code = q
    if neg:
        code = code | 0x80
    out[i] = float32(code)


@cuda.jit
def e4m3_float_scaled(x, out, inv_scale, n):
    # clamp, scale |v| so that the e4m3 step becomes 1, round to an integer with the float
    # add of 2**23 (round to nearest even), then code = ((e + 6) << 3) + rounded, e >= -6
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        b = float_bits(v)
        sign = int32((b >> uint32(24)) & uint32(0x80))
        if v != v:
            out[i] = float32(0x7F | sign)
            return
        av = v if v >= float32(0.0) else -v
        if av > float32(448.0):
            av = float32(448.0)
        e = int32((float_bits(av) >> uint32(23)) & uint32(0xFF)) - 127
        if e < -6:
            e = -6  # subnormal codes share the step of the smallest binade, 2**-9
        y = float32(av * float32(math.pow(float32(2.0), float32(3 - e))))
        big = float32(8388608.0)
        r = float32(float32(y + big) - big)
        code = ((e + 6) << 3) + int32(r)
        out[i] = float32(code | sign)


# ---- 10.3: write_kv -----------------------------------------------------------------------
@cuda.jit(fastmath=True)
def write_kv_plain(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    token = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if token < tokens:
        slot = slot_mapping[token]
        if slot >= 0:
            kb = token * 256 + 128 + 2 * lane
            k0 = qkv[kb]
            k1 = qkv[kb + 1]
            ss = k0 * k0 + k1 * k1
            m = 16
            while m > 0:
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
                m //= 2
            scale = float32(1.0) / math.sqrt(ss / float32(64.0) + float32(1e-6))
            n0 = k0 * scale * k_weight[2 * lane]
            n1 = k1 * scale * k_weight[2 * lane + 1]
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            s = math.sin(angle)
            out[slot * 64 + 2 * lane] = n0 * c - n1 * s
            out[slot * 64 + 2 * lane + 1] = n0 * s + n1 * c
            vb = token * 256 + 192 + 2 * lane
            out[(num_slots + slot) * 64 + 2 * lane] = qkv[vb]
            out[(num_slots + slot) * 64 + 2 * lane + 1] = qkv[vb + 1]


@cuda.jit(fastmath=True)
def write_kv_v_first(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                     num_slots):
    warp = cuda.grid(1) >> 5
    if warp >= tokens:
        return
    slot = slot_mapping[warp]
    if slot < 0:
        return  # the whole warp: the slot is the same for all its lanes
    lane = cuda.threadIdx.x & 31
    row = warp * 256
    # V first: a plain copy
    vdst = (num_slots + slot) * 64 + lane * 2
    out[vdst] = qkv[row + 192 + lane * 2]
    out[vdst + 1] = qkv[row + 193 + lane * 2]
    a = qkv[row + 128 + lane * 2]
    b = qkv[row + 129 + lane * 2]
    s = a * a + b * b
    s += cuda.shfl_down_sync(FULL_MASK, s, 16)
    s += cuda.shfl_down_sync(FULL_MASK, s, 8)
    s += cuda.shfl_down_sync(FULL_MASK, s, 4)
    s += cuda.shfl_down_sync(FULL_MASK, s, 2)
    s += cuda.shfl_down_sync(FULL_MASK, s, 1)
    s = cuda.shfl_sync(FULL_MASK, s, 0)
    rms = math.sqrt(s * float32(1.0 / 64.0) + float32(1e-6))
    a = a / rms * k_weight[lane * 2]
    b = b / rms * k_weight[lane * 2 + 1]
    th = inv_freq[lane] * float32(positions[warp])
    cs = math.cos(th)
    sn = math.sin(th)
    kdst = slot * 64 + lane * 2
    out[kdst] = a * cs - b * sn
    out[kdst + 1] = a * sn + b * cs


@cuda.jit(fastmath=True)
def write_kv_warp_stride(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                         num_slots):
    lane = cuda.threadIdx.x % 32
    t = cuda.grid(1) // 32
    warps = cuda.gridsize(1) // 32
    w0 = k_weight[2 * lane]
    w1 = k_weight[2 * lane + 1]
    f = inv_freq[lane]
    while t < tokens:
        slot = slot_mapping[t]
        if slot >= 0:
            src = t * 256 + 2 * lane
            k0 = qkv[src + 128]
            k1 = qkv[src + 129]
            v0 = qkv[src + 192]
            v1 = qkv[src + 193]
            ss = k0 * k0 + k1 * k1
            for m in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
            inv = float32(1.0) / math.sqrt(ss / float32(64.0) + float32(1e-6))
            n0 = k0 * inv * w0
            n1 = k1 * inv * w1
            ang = float32(positions[t]) * f
            c = math.cos(ang)
            s = math.sin(ang)
            kd = slot * 64 + 2 * lane
            vd = kd + num_slots * 64
            out[kd] = n0 * c - n1 * s
            out[kd + 1] = n0 * s + n1 * c
            out[vd] = v0
            out[vd + 1] = v1
        t += warps


# ---- 10.4: launch_kv_write ----------------------------------------------------------------
def launch_kv_concat(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                     num_slots):
    tokens = sum(query_lens)
    positions = np.concatenate([np.arange(c, c + q) for q, c in zip(query_lens, context_lens)])
    positions_dev = cuda.to_device(positions.astype(np.int32))
    blocks = (tokens + 3) // 4
    write_kv_plain[blocks, 128](qkv, k_weight, positions_dev, slot_mapping, inv_freq, out,
                                int64(tokens), int64(num_slots))


def launch_kv_loop(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                   num_slots):
    pos = []
    for q, c in zip(query_lens, context_lens):
        for j in range(q):
            pos.append(c + j)
    tokens = len(pos)
    d_pos = cuda.to_device(np.array(pos, dtype=np.int32))
    write_kv_v_first[math.ceil(tokens / 4), 128](qkv, k_weight, d_pos, slot_mapping, inv_freq,
                                                 out, int64(tokens), int64(num_slots))


def launch_kv_repeat(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                     num_slots):
    q = np.asarray(query_lens, dtype=np.int64)
    c = np.asarray(context_lens, dtype=np.int64)
    tokens = int(q.sum())
    starts = np.cumsum(q) - q
    # positions[t] = context_lens[r] + (t - start[r]) for t of request r
    positions = np.arange(tokens, dtype=np.int64) + np.repeat(c - starts, q)
    write_kv_warp_stride[-(-tokens // 4), 128](
        qkv, k_weight, cuda.to_device(positions.astype(np.int32)), slot_mapping, inv_freq, out,
        int64(tokens), int64(num_slots))


ENTRIES = [
    ("10.1", "plain", scatter_plain),
    ("10.1", "modulo_return", scatter_modulo_return),
    ("10.1", "gridstride_head_split", scatter_gridstride),
    ("10.2", "hint_bits", e4m3_hint_bits),
    ("10.2", "explicit_round", e4m3_explicit_round),
    ("10.2", "float_scaled_round", e4m3_float_scaled),
    ("10.3", "plain", write_kv_plain),
    ("10.3", "v_first_down_broadcast", write_kv_v_first),
    ("10.3", "warp_stride", write_kv_warp_stride),
    ("10.4", "concat_aranges", launch_kv_concat),
    ("10.4", "python_loop", launch_kv_loop),
    ("10.4", "numpy_repeat", launch_kv_repeat),
]
