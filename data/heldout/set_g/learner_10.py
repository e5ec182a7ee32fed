"""Notebook 10: slot scatter, FP8 e4m3 codes, the K/V write, its ragged launch."""
import ropelab  # noqa: F401

import math

import numpy as np
from numba import cuda, float32, uint32, int32, int64

from ropelab.grader.steps.nb10 import float_bits

FULL_MASK = 0xFFFFFFFF


# ---------------- 10.1 slot scatter
@cuda.jit
def scatter_rows(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        t = i // row
        c = i - t * row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * row + c] = k[i]


@cuda.jit
def scatter_rows_stride(k, slot_mapping, out, tokens, heads, head_dim):
    # grid-stride loop, early `continue` for padding
    row = heads * head_dim
    total = tokens * row
    i = cuda.grid(1)
    while i < total:
        t = i // row
        slot = slot_mapping[t]
        if slot < 0:
            i += cuda.gridsize(1)
            continue
        out[slot * row + (i % row)] = k[i]
        i += cuda.gridsize(1)


@cuda.jit
def scatter_rows_headwise(k, slot_mapping, out, tokens, heads, head_dim):
    # token, head and float of the head, each from its own division
    i = cuda.grid(1)
    if i >= tokens * heads * head_dim:
        return
    hr = i // head_dim
    d = i - hr * head_dim
    t = hr // heads
    h = hr - t * heads
    slot = slot_mapping[t]
    if slot < 0:
        return
    v = k[i]
    out[(slot * heads + h) * head_dim + d] = v


# ---------------- 10.2 e4m3 codes
@cuda.jit
def e4m3_codes(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        b = float_bits(v)
        a = b & uint32(0x7FFFFFFF)
        sign = (b >> uint32(24)) & uint32(0x80)
        if a > uint32(0x7F800000):
            code = uint32(0x7F)
        elif a >= uint32(0x43E00000):
            code = uint32(0x7E)
        elif a < uint32(0x3C800000):
            code = float_bits(abs(v) + float32(16384.0)) - float_bits(float32(16384.0))
        else:
            code = (a - uint32(120 << 23) + uint32(0x7FFFF) + ((a >> uint32(20)) & uint32(1))) \
                >> uint32(20)
        out[i] = float32(code | sign)


@cuda.jit
def e4m3_codes_fields(x, out, inv_scale, n):
    # exponent and mantissa fields by hand; subnormals by scaling to units of 2**-9
    i = cuda.grid(1)
    if i >= n:
        return
    v = x[i] * inv_scale
    b = float_bits(v)
    neg = (b >> uint32(31)) != uint32(0)
    a = b & uint32(0x7FFFFFFF)
    if a > uint32(0x7F800000):
        code = int32(0x7F)
    elif a >= uint32(0x43E00000):
        code = int32(0x7E)
    elif a >= uint32(0x3C800000):
        e = int32(a >> uint32(23)) - int32(127)
        m = a & uint32(0x7FFFFF)
        top = int32(m >> uint32(20))
        rest = m & uint32(0xFFFFF)
        up = int32(0)
        if rest > uint32(0x80000) or (rest == uint32(0x80000) and (top & 1) == 1):
            up = int32(1)
        code = ((e + int32(7)) << 3) + top + up
    else:
        q = abs(v) * float32(512.0)
        f = math.floor(q)
        r = q - f
        code = int32(f)
        if r > float32(0.5) or (r == float32(0.5) and (code & 1) == 1):
            code += int32(1)
    if neg:
        code = code | int32(0x80)
    out[i] = float32(code)


# ---------------- 10.3 K/V write
@cuda.jit(fastmath=True)
def write_kv(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    gid = cuda.grid(1)
    w = gid // 32
    lane = cuda.threadIdx.x % 32
    if w < tokens:
        slot = slot_mapping[w]
        if slot >= 0:
            kb = w * 256 + 128 + 2 * lane
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
            theta = float32(positions[w]) * inv_freq[lane]
            c = math.cos(theta)
            s = math.sin(theta)
            o = slot * 64 + 2 * lane
            out[o] = n0 * c - n1 * s
            out[o + 1] = n0 * s + n1 * c
            vb = kb + 64
            ov = (num_slots + slot) * 64 + 2 * lane
            out[ov] = qkv[vb]
            out[ov + 1] = qkv[vb + 1]


@cuda.jit(fastmath=True)
def write_kv_v_first(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                     num_slots):
    # early returns, V copied before K, unrolled butterfly, angle before the reduction
    warp = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    lane = cuda.threadIdx.x & 31
    if warp >= tokens:
        return
    slot = slot_mapping[warp]
    if slot < 0:
        return
    row = warp * 256
    two_l = lane + lane
    v0 = qkv[row + 192 + two_l]
    v1 = qkv[row + 193 + two_l]
    vo = (num_slots + slot) * 64 + two_l
    out[vo] = v0
    out[vo + 1] = v1
    ang = inv_freq[lane] * float32(positions[warp])
    sn = math.sin(ang)
    cs = math.cos(ang)
    a = qkv[row + 128 + two_l]
    b = qkv[row + 129 + two_l]
    s = a * a + b * b
    s += cuda.shfl_xor_sync(FULL_MASK, s, 16)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 8)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 4)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 2)
    s += cuda.shfl_xor_sync(FULL_MASK, s, 1)
    r = math.sqrt(s * float32(0.015625) + float32(1e-6))
    na = a / r * k_weight[two_l]
    nb = b / r * k_weight[two_l + 1]
    ko = slot * 64 + two_l
    out[ko + 1] = na * sn + nb * cs
    out[ko] = na * cs - nb * sn


# ---------------- 10.4 ragged launch
def launch_kv_write(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                    num_slots):
    positions = np.concatenate([np.arange(c, c + q) for q, c in zip(query_lens, context_lens)])
    tokens = int(sum(query_lens))
    pos_dev = cuda.to_device(positions.astype(np.int32))
    blocks = (tokens + 3) // 4
    write_kv[blocks, 128](qkv, k_weight, pos_dev, slot_mapping, inv_freq, out, tokens,
                          num_slots)


def launch_kv_write_loop(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                         num_slots):
    # positions built by a plain Python loop
    pos = []
    for q, c in zip(query_lens, context_lens):
        for j in range(q):
            pos.append(c + j)
    tokens = len(pos)
    d_pos = cuda.to_device(np.array(pos, dtype=np.int32))
    write_kv_v_first[math.ceil(tokens / 4), 128](qkv, k_weight, d_pos, slot_mapping, inv_freq,
                                                 out, int64(tokens), int64(num_slots))


def launch_kv_write_cumsum(qkv, k_weight, slot_mapping, inv_freq, out, query_lens,
                           context_lens, num_slots):
    # positions = t - start[r] + context[r], vectorized with repeat and cumsum
    q = np.asarray(query_lens, dtype=np.int64)
    c = np.asarray(context_lens, dtype=np.int64)
    tokens = int(q.sum())
    starts = np.cumsum(q) - q
    t = np.arange(tokens, dtype=np.int64)
    positions = t - np.repeat(starts, q) + np.repeat(c, q)
    d_pos = cuda.to_device(positions.astype(np.int32))
    write_kv[-(-tokens // 4), 128](qkv, k_weight, d_pos, slot_mapping, inv_freq, out, tokens,
                                   int(num_slots))


ENTRIES = [
    ("10.1", "plain", scatter_rows),
    ("10.1", "grid_stride_mod", scatter_rows_stride),
    ("10.1", "head_indices", scatter_rows_headwise),
    ("10.2", "hint_bits", e4m3_codes),
    ("10.2", "fields_and_floor", e4m3_codes_fields),
    ("10.3", "plain", write_kv),
    ("10.3", "v_first_unrolled", write_kv_v_first),
    ("10.4", "concat_arange", launch_kv_write),
    ("10.4", "python_loop", launch_kv_write_loop),
    ("10.4", "repeat_cumsum", launch_kv_write_cumsum),
]
