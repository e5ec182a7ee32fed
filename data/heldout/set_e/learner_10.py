"""Notebook 10 (serving), steps 10.1 .. 10.4."""
import ropelab  # noqa: F401  (before numba.cuda)
import math

import numpy as np
from numba import cuda, float32, int32, uint32

from ropelab.grader.steps.nb10 import float_bits

FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------- 10.1 scatter_rows
@cuda.jit
def scatter_divmod(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        t = i // row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * row + i % row] = k[i]


@cuda.jit
def scatter_sub(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = heads * head_dim
    if i >= tokens * row:
        return
    t = i // row
    c = i - t * row
    slot = slot_mapping[t]
    if slot < 0:
        return
    v = k[i]
    out[slot * row + c] = v


@cuda.jit
def scatter_stride(k, slot_mapping, out, tokens, heads, head_dim):
    row = heads * head_dim
    n = tokens * row
    i = cuda.grid(1)
    while i < n:
        t = i // row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * row + (i - t * row)] = k[i]
        i += cuda.gridsize(1)


# ---------------------------------------------------------------- 10.2 e4m3_codes
@cuda.jit
def e4m3_hint(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        b = float_bits(v)
        a = b & uint32(0x7FFFFFFF)
        sign = (b >> uint32(24)) & uint32(0x80)
        if a > uint32(0x7F800000):
            code = uint32(0x7F)
        elif a >= uint32(0x43E00000):  # 448 and above, infinity included
            code = uint32(0x7E)
        elif a < uint32(0x3C800000):  # below 2**-6: multiples of 2**-9
            code = float_bits(abs(v) + float32(16384.0)) - float_bits(float32(16384.0))
        else:
            code = (a - uint32(120 << 23) + uint32(0x7FFFF) + ((a >> uint32(20)) & uint32(1))) \
                >> uint32(20)
        out[i] = float32(code | sign)


@cuda.jit
def e4m3_integer_only(x, out, inv_scale, n):
    # subnormals by integer shifting of the mantissa, rounding to nearest even by hand
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    b = float_bits(x[i] * inv_scale)
    a = b & uint32(0x7FFFFFFF)
    sign = (b >> uint32(24)) & uint32(0x80)
    e = int32(a >> uint32(23))
    code = uint32(0)
    if a > uint32(0x7F800000):
        code = uint32(0x7F)
    elif a >= uint32(0x43E00000):
        code = uint32(0x7E)
    elif e >= 121:  # 2**-6 and up: normal e4m3
        lsb = (a >> uint32(20)) & uint32(1)
        code = (a - uint32(0x3C000000) + uint32(0x7FFFF) + lsb) >> uint32(20)
    elif e >= 117:  # [2**-10, 2**-6): code = m / 2**sh, rounded to nearest even
        m = (a & uint32(0x7FFFFF)) | uint32(0x800000)
        sh = uint32(141 - e)
        half = uint32(1) << (sh - uint32(1))
        q = m >> sh
        rest = m & ((uint32(1) << sh) - uint32(1))
        if rest > half or (rest == half and (q & uint32(1)) == uint32(1)):
            q += uint32(1)
        code = q
    out[i] = float32(code | sign)


@cuda.jit
def e4m3_float_scaling(x, out, inv_scale, n):
    # the magnitude handled in float32: subnormal codes by rint(|v| * 2**9), normal codes
    # from the rebiased bits; the sign from the bits
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        b = float_bits(v)
        neg = (b >> uint32(31)) == uint32(1)
        mag = abs(v)
        if mag != mag:
            code = float32(127.0)
        elif mag >= float32(448.0):
            code = float32(126.0)
        elif mag < float32(0.015625):
            m = mag * float32(512.0)  # exact: a power-of-two scaling
            q = int32(m)  # truncation, then round half to even by hand
            frac = m - float32(q)
            if frac > float32(0.5) or (frac == float32(0.5) and (q & 1) == 1):
                q += 1
            code = float32(q)
        else:
            a = float_bits(mag)
            r = (a - uint32(0x3C000000) + uint32(0x7FFFF) + ((a >> uint32(20)) & uint32(1))) \
                >> uint32(20)
            code = float32(r)
        if neg:
            code += float32(128.0)
        out[i] = code


# ---------------------------------------------------------------- 10.3 write_kv
@cuda.jit(fastmath=True)
def write_kv_plain(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                   num_slots):
    token = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if token >= tokens:
        return
    slot = slot_mapping[token]
    if slot < 0:
        return
    kb = token * 256 + 128 + 2 * lane
    k0 = qkv[kb]
    k1 = qkv[kb + 1]
    v0 = qkv[kb + 64]
    v1 = qkv[kb + 65]
    ss = k0 * k0 + k1 * k1
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + float32(1e-6))
    n0 = k0 * scale * k_weight[2 * lane]
    n1 = k1 * scale * k_weight[2 * lane + 1]
    angle = float32(positions[token]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    ko = slot * 64 + 2 * lane
    out[ko] = n0 * c - n1 * s
    out[ko + 1] = n0 * s + n1 * c
    vo = (num_slots + slot) * 64 + 2 * lane
    out[vo] = v0
    out[vo + 1] = v1


@cuda.jit(fastmath=True)
def write_kv_if_nested(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                       num_slots):
    lane = cuda.threadIdx.x & 31
    token = cuda.blockIdx.x * 4 + (cuda.threadIdx.x >> 5)
    if token < tokens:
        slot = slot_mapping[token]
        if slot >= 0:  # the same for the whole warp
            row = token * 256
            # V first: a plain copy
            v_out = (num_slots + slot) * 64 + lane * 2
            out[v_out] = qkv[row + 192 + lane * 2]
            out[v_out + 1] = qkv[row + 193 + lane * 2]
            k0 = qkv[row + 128 + lane * 2]
            k1 = qkv[row + 129 + lane * 2]
            ss = k0 * k0 + k1 * k1
            m = 1
            while m <= 16:
                ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
                m *= 2
            rms = math.sqrt(ss * float32(0.015625) + float32(1e-6))
            n0 = k0 / rms * k_weight[lane * 2]
            n1 = k1 / rms * k_weight[lane * 2 + 1]
            th = float32(positions[token]) * inv_freq[lane]
            c = math.cos(th)
            s = math.sin(th)
            out[slot * 64 + lane * 2] = n0 * c - n1 * s
            out[slot * 64 + lane * 2 + 1] = n0 * s + n1 * c


# ---------------------------------------------------------------- 10.4 launch_kv_write
def launch_kv_concat(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                     num_slots):
    positions = np.concatenate([np.arange(c, c + q) for q, c in zip(query_lens,
                                                                      context_lens)])
    tokens = int(sum(query_lens))
    d_positions = cuda.to_device(positions.astype(np.int32))
    blocks = (tokens + 3) // 4
    write_kv_plain[blocks, 128](qkv, k_weight, d_positions, slot_mapping, inv_freq, out,
                                tokens, num_slots)


def launch_kv_loop(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                   num_slots):
    tokens = 0
    for q in query_lens:
        tokens += q
    positions = np.zeros(tokens, dtype=np.int32)
    start = 0
    for q, c in zip(query_lens, context_lens):
        for t in range(q):
            positions[start + t] = c + t
        start += q
    d_pos = cuda.to_device(positions)
    write_kv_if_nested[math.ceil(tokens / 4), 128](qkv, k_weight, d_pos, slot_mapping,
                                                   inv_freq, out, tokens, int(num_slots))


def launch_kv_repeat(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                     num_slots):
    # vectorised: positions = t - start[r] + context[r], with r repeated per token
    q = np.asarray(query_lens, dtype=np.int64)
    c = np.asarray(context_lens, dtype=np.int64)
    starts = np.cumsum(q) - q
    tokens = int(q.sum())
    t = np.arange(tokens, dtype=np.int64)
    positions = (t - np.repeat(starts, q) + np.repeat(c, q)).astype(np.int32)
    write_kv_plain[-(-tokens // 4), 128](qkv, k_weight, cuda.to_device(positions),
                                         slot_mapping, inv_freq, out, tokens, num_slots)



# ---------------------------------------------------------------- extra approaches
@cuda.jit(fastmath=True)
def write_kv_down_broadcast(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                            num_slots):
    lane = cuda.laneid
    token = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // 32
    if token < tokens and slot_mapping[token] >= 0:
        slot = slot_mapping[token]
        src = token * 256 + 2 * lane
        k0 = qkv[src + 128]
        k1 = qkv[src + 129]
        v0 = qkv[src + 192]
        v1 = qkv[src + 193]
        w0 = k_weight[2 * lane]
        w1 = k_weight[2 * lane + 1]
        th = float32(positions[token]) * inv_freq[lane]
        ss = k0 * k0 + k1 * k1
        for m in (16, 8, 4, 2, 1):
            ss += cuda.shfl_down_sync(FULL_MASK, ss, m)
        ss = cuda.shfl_sync(FULL_MASK, ss, 0)
        scale = float32(1.0) / math.sqrt(ss / float32(64.0) + float32(1e-6))
        n0 = k0 * scale * w0
        n1 = k1 * scale * w1
        c = math.cos(th)
        s = math.sin(th)
        kd = slot * 64 + 2 * lane
        vd = kd + num_slots * 64
        out[kd] = n0 * c - n1 * s
        out[kd + 1] = n0 * s + n1 * c
        out[vd] = v0
        out[vd + 1] = v1

ENTRIES = [
    ("10.1", "divmod_hint", scatter_divmod),
    ("10.1", "sub_early_returns", scatter_sub),
    ("10.1", "grid_stride", scatter_stride),
    ("10.2", "hint_bits_add_2pow14", e4m3_hint),
    ("10.2", "integer_only_rne", e4m3_integer_only),
    ("10.2", "float_round_subnormal", e4m3_float_scaling),
    ("10.3", "early_returns", write_kv_plain),
    ("10.3", "nested_if_v_first", write_kv_if_nested),
    ("10.4", "concat_arange", launch_kv_concat),
    ("10.4", "python_loops", launch_kv_loop),
    ("10.4", "numpy_repeat", launch_kv_repeat),
    ("10.3", "loads_first_down_broadcast", write_kv_down_broadcast),
]
