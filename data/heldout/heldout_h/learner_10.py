"""Notebook 10: serving (slot scatter, FP8 e4m3 codes, the K/V write, the ragged launch)."""
import ropelab  # noqa: F401

import math

import numba
import numpy as np
from numba import cuda, float32, int32, int64, uint32

from ropelab.grader.steps.nb10 import float_bits

FULL_MASK = 0xFFFFFFFF


# ---------------------------------------------------------------- 10.1
@cuda.jit
def scatter_rows_div(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        t = i // row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * row + (i - t * row)] = k[i]


@cuda.jit
def scatter_rows_mod(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = heads * head_dim
    if i >= tokens * row:
        return
    slot = slot_mapping[i // row]
    if slot < 0:  # padding: nothing to write
        return
    out[slot * row + i % row] = k[i]


# ---------------------------------------------------------------- 10.2
@cuda.jit
def e4m3_codes_bits(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        v = x[i] * inv_scale
        b = float_bits(v)
        a = b & uint32(0x7FFFFFFF)
        sign = (b >> uint32(24)) & uint32(0x80)
        if a > uint32(0x7F800000):  # NaN
            code = uint32(0x7F)
        elif a >= uint32(0x43E00000):  # 448 and up (inf too): saturate
            code = uint32(0x7E)
        elif a < uint32(0x3C800000):  # below 2**-6: multiples of 2**-9
            code = float_bits(abs(v) + float32(16384.0)) - float_bits(float32(16384.0))
        else:
            code = (a - uint32(120 << 23) + uint32(0x7FFFF)
                    + ((a >> uint32(20)) & uint32(1))) >> uint32(20)
        out[i] = float32(code | sign)


@cuda.jit
def e4m3_codes_search(x, out, inv_scale, n):
    # decode-and-search: binary search of the 127 magnitudes, then round to nearest even code
    i = cuda.grid(1)
    if i >= n:
        return
    v = x[i] * inv_scale
    sign = int32((float_bits(v) >> uint32(31)) & uint32(1)) * 128
    if v != v:
        out[i] = float32(127 + sign)
        return
    mag = abs(v)
    if mag >= float32(448.0):
        out[i] = float32(126 + sign)
        return
    lo = 0                        # val(lo) <= mag
    lo_val = float32(0.0)
    hi = 126                      # val(hi) > mag
    hi_val = float32(448.0)
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        # the magnitude of code mid, built exactly in float32
        if mid < 8:
            mid_val = float32(mid) * float32(0.001953125)  # mid * 2**-9
        else:
            e = (mid >> 3) - 7
            p = float32(1.0)
            while e > 0:
                p *= float32(2.0)
                e -= 1
            while e < 0:
                p *= float32(0.5)
                e += 1
            mid_val = p * (float32(1.0) + float32(mid & 7) * float32(0.125))
        if mid_val <= mag:
            lo = mid
            lo_val = mid_val
        else:
            hi = mid
            hi_val = mid_val
    below = mag - lo_val
    above = hi_val - mag
    if below < above:
        code = lo
    elif above < below:
        code = hi
    else:
        code = lo if (lo & 1) == 0 else hi
    out[i] = float32(code + sign)


# ---------------------------------------------------------------- 10.3
@cuda.jit(fastmath=True)
def write_kv_plain(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    token = cuda.grid(1) // 32
    lane = cuda.threadIdx.x % 32
    if token >= tokens:
        return
    slot = slot_mapping[token]
    if slot < 0:
        return
    src = token * 256 + 2 * lane
    k0 = qkv[src + 128]
    k1 = qkv[src + 129]
    ss = k0 * k0 + k1 * k1
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
    scale = float32(1.0) / math.sqrt(ss / float32(64.0) + float32(1e-6))
    n0 = k0 * scale * k_weight[2 * lane]
    n1 = k1 * scale * k_weight[2 * lane + 1]
    angle = float32(positions[token]) * inv_freq[lane]
    c = math.cos(angle)
    s = math.sin(angle)
    dst = slot * 64 + 2 * lane
    out[dst] = n0 * c - n1 * s
    out[dst + 1] = n0 * s + n1 * c
    vdst = (num_slots + slot) * 64 + 2 * lane
    out[vdst] = qkv[src + 192]
    out[vdst + 1] = qkv[src + 193]


@cuda.jit(fastmath=True)
def write_kv_v_first(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    tid = cuda.threadIdx.x
    token = cuda.blockIdx.x * 4 + (tid >> 5)
    lane = tid & 31
    if token < tokens:
        slot = slot_mapping[token]
        if slot >= 0:
            row = token * 256
            two_l = lane << 1
            # V first: a plain copy into the V half of the cache
            v_out = (num_slots + slot) * 64 + two_l
            v0 = qkv[row + 192 + two_l]
            v1 = qkv[row + 193 + two_l]
            out[v_out] = v0
            out[v_out + 1] = v1
            k0 = qkv[row + 128 + two_l]
            k1 = qkv[row + 129 + two_l]
            acc = k0 * k0 + k1 * k1
            off = 16
            while off > 0:
                acc += cuda.shfl_down_sync(FULL_MASK, acc, off)
                off >>= 1
            acc = cuda.shfl_sync(FULL_MASK, acc, 0)
            r = math.sqrt(acc * float32(0.015625) + float32(1e-6))
            a = k_weight[two_l] * k0 / r
            b = k_weight[two_l + 1] * k1 / r
            theta = inv_freq[lane] * float32(positions[token])
            s = math.sin(theta)
            c = math.cos(theta)
            k_out = slot * 64 + two_l
            out[k_out + 1] = a * s + b * c
            out[k_out] = a * c - b * s


# ---------------------------------------------------------------- 10.4
def launch_kv_write_concat(qkv, k_weight, slot_mapping, inv_freq, out, query_lens,
                           context_lens, num_slots):
    tokens = sum(query_lens)
    positions = np.concatenate([np.arange(c, c + q) for q, c in zip(query_lens, context_lens)])
    d_positions = cuda.to_device(positions.astype(np.int32))
    blocks = (tokens + 3) // 4
    write_kv_plain[blocks, 128](qkv, k_weight, d_positions, slot_mapping, inv_freq, out,
                                numba.int64(tokens), numba.int64(num_slots))


def launch_kv_write_loop(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                         num_slots):
    tokens = 0
    for q in query_lens:
        tokens += q
    positions = np.empty(tokens, dtype=np.int32)
    start = 0
    for q, ctx in zip(query_lens, context_lens):
        for j in range(q):
            positions[start + j] = ctx + j
        start += q
    d_pos = cuda.to_device(positions)
    write_kv_v_first[math.ceil(tokens / 4), 128](qkv, k_weight, d_pos, slot_mapping, inv_freq,
                                                 out, int64(tokens), int64(num_slots))


ENTRIES = [
    ("10.1", "div_and_remainder", scatter_rows_div),
    ("10.1", "modulo_early_returns", scatter_rows_mod),
    ("10.2", "bit_rounding", e4m3_codes_bits),
    ("10.2", "decode_binary_search", e4m3_codes_search),
    ("10.3", "xor_butterfly", write_kv_plain),
    ("10.3", "v_copy_first_down_bcast", write_kv_v_first),
    ("10.4", "numpy_concat", launch_kv_write_concat),
    ("10.4", "python_loops", launch_kv_write_loop),
]
