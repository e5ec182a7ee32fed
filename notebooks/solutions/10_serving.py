"""The ladder of notebook 10 (serving): a solution for every step, and wrong attempts the grader
must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step]`` (it must pass) and every
function of ``WRONG[step]`` (each must be rejected with a verdict containing the fragment next
to it).  The steps: the slot scatter; FP8 e4m3 rounding, bit for bit; the fused kernel's K/V
write into a paged cache; the launch of that write for a ragged batch.  The wrong attempts of
steps 2 and 3 share device functions with the solutions, so that each differs from the right
kernel in the one place its mistake is.
"""

import math

import numpy as np

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, uint32

from ropelab.grader.steps.nb10 import float_bits

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part


# --- step 1: the slot scatter ---------------------------------------------------------------


@cuda.jit
def scatter_rows(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim  # a cache row: every head of one slot
    if i < tokens * row:
        t = i // row
        slot = slot_mapping[t]
        if slot >= 0:  # negative: a padding token, nothing to write
            out[slot * row + i - t * row] = k[i]


@cuda.jit
def padding_not_skipped(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        t = i // row
        out[slot_mapping[t] * row + i - t * row] = k[i]  # slot -1 wraps to the last row


@cuda.jit
def row_of_the_token(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    if i < tokens * heads * head_dim and slot_mapping[i // (heads * head_dim)] >= 0:
        out[i] = k[i]  # the slot mapping read, but not used for the row


@cuda.jit
def row_of_one_head(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        t = i // row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * head_dim + i - t * row] = k[i]  # a row is heads * head_dim floats


@cuda.jit
def scatter_unguarded(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    slot = slot_mapping[i // row]  # the grid's last block runs past the tokens
    if slot >= 0:
        out[slot * row + i % row] = k[i]


# --- step 2: FP8 e4m3 rounding --------------------------------------------------------------


@cuda.jit(device=True, inline="always")
def e4m3_normal(a, ties_even, rounds):
    """The normal range's code of |v|'s bits ``a``: exponent rebiased in place (127 -> 7), the
    20 dropped mantissa bits rounded to nearest, ties to the even kept bit."""
    bias = uint32(0x7FFFF) + ((a >> uint32(20)) & uint32(1)) if ties_even else uint32(0x80000)
    return (a - uint32(120 << 23) + (bias if rounds else uint32(0))) >> uint32(20)


@cuda.jit(device=True, inline="always")
def e4m3_of(v, ties_even, rounds, saturates, subnormals, nan_sign):
    b = float_bits(v)
    sign = (b >> uint32(24)) & uint32(0x80)
    a = b & uint32(0x7FFFFFFF)
    if a > uint32(0x7F800000):  # NaN: S.1111.111
        return uint32(0x7F) | (sign if nan_sign else uint32(0))
    if saturates and a >= uint32(0x43E00000):  # 448, past it, infinity: S.1111.110
        code = uint32(0x7E)
    elif a >= uint32(0x3C800000):  # 2**-6 and up: normal
        code = e4m3_normal(a, ties_even, rounds)
    elif subnormals:  # the float32 sum rounds |v| to a multiple of 2**-9, nearest even
        code = float_bits(abs(v) + float32(16384.0)) - uint32(0x46800000)
    else:
        code = uint32(0)
    return code | sign


@cuda.jit
def e4m3_codes(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(e4m3_of(x[i] * inv_scale, True, True, True, True, True))


@cuda.jit
def e4m3_truncated(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(e4m3_of(x[i] * inv_scale, True, False, True, True, True))


@cuda.jit
def e4m3_ties_up(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(e4m3_of(x[i] * inv_scale, False, True, True, True, True))


@cuda.jit
def e4m3_unsaturated(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(e4m3_of(x[i] * inv_scale, True, True, False, True, True))


@cuda.jit
def e4m3_no_subnormals(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(e4m3_of(x[i] * inv_scale, True, True, True, False, True))


@cuda.jit
def e4m3_nan_unsigned(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = float32(e4m3_of(x[i] * inv_scale, True, True, True, True, False))


# --- step 3: the K/V write ------------------------------------------------------------------


@cuda.jit(device=True, inline="always")
def k_pair(qkv, k_weight, angle, token, lane, at, divisor, rotates):
    """Lane ``lane``'s pair of the head at float ``at`` of the token's row (K: 128, after the
    two Q heads): normalized over the warp, weighted and turned by ``angle``."""
    first = token * 256 + at + 2 * lane
    k0 = qkv[first]
    k1 = qkv[first + 1]
    ss = k0 * k0 + k1 * k1
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 16)  # after five steps every lane holds the sum
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 8)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 4)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 2)
    ss += cuda.shfl_xor_sync(FULL_MASK, ss, 1)
    scale = float32(1.0) / math.sqrt(ss / divisor + float32(1e-6))
    n0 = k0 * scale * k_weight[2 * lane]
    n1 = k1 * scale * k_weight[2 * lane + 1]
    if not rotates:
        return n0, n1
    c = math.cos(angle)
    s = math.sin(angle)
    return n0 * c - n1 * s, n0 * s + n1 * c


@cuda.jit(device=True, inline="always")
def store_kv(qkv, out, token, slot, lane, num_slots, y0, y1):
    """K's pair into the slot's K row, V's pair copied into its V row (the cache's second
    half)."""
    out[slot * 64 + 2 * lane] = y0
    out[slot * 64 + 2 * lane + 1] = y1
    v_at = (num_slots + slot) * 64 + 2 * lane
    out[v_at] = qkv[token * 256 + 192 + 2 * lane]
    out[v_at + 1] = qkv[token * 256 + 193 + 2 * lane]


@cuda.jit(fastmath=True)
def write_kv(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    lane = cuda.threadIdx.x % 32
    token = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if token < tokens and slot_mapping[token] >= 0:  # warp-uniform: the shuffles stay whole
        angle = float32(positions[token]) * inv_freq[lane]
        y0, y1 = k_pair(qkv, k_weight, angle, token, lane, 128, float32(64.0), True)
        store_kv(qkv, out, token, slot_mapping[token], lane, num_slots, y0, y1)


@cuda.jit(fastmath=True)
def kv_not_rotated(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    lane = cuda.threadIdx.x % 32
    token = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if token < tokens and slot_mapping[token] >= 0:
        y0, y1 = k_pair(qkv, k_weight, float32(0.0), token, lane, 128, float32(64.0), False)
        store_kv(qkv, out, token, slot_mapping[token], lane, num_slots, y0, y1)


@cuda.jit(fastmath=True)
def kv_padding_written(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                       num_slots):
    lane = cuda.threadIdx.x % 32
    token = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if token < tokens:  # no test of the slot: -1 indexes before the cache
        angle = float32(positions[token]) * inv_freq[lane]
        y0, y1 = k_pair(qkv, k_weight, angle, token, lane, 128, float32(64.0), True)
        store_kv(qkv, out, token, slot_mapping[token], lane, num_slots, y0, y1)


@cuda.jit(fastmath=True)
def kv_v_normalized(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    lane = cuda.threadIdx.x % 32
    token = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if token < tokens and slot_mapping[token] >= 0:
        slot = slot_mapping[token]
        angle = float32(positions[token]) * inv_freq[lane]
        y0, y1 = k_pair(qkv, k_weight, angle, token, lane, 128, float32(64.0), True)
        out[slot * 64 + 2 * lane] = y0
        out[slot * 64 + 2 * lane + 1] = y1
        v0, v1 = k_pair(qkv, k_weight, angle, token, lane, 192, float32(64.0), True)  # V as K
        out[(num_slots + slot) * 64 + 2 * lane] = v0
        out[(num_slots + slot) * 64 + 2 * lane + 1] = v1


@cuda.jit(fastmath=True)
def kv_mean_over_lanes(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                       num_slots):
    lane = cuda.threadIdx.x % 32
    token = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if token < tokens and slot_mapping[token] >= 0:
        angle = float32(positions[token]) * inv_freq[lane]
        # the sum divided by the 32 lanes, not the 64 floats of the head
        y0, y1 = k_pair(qkv, k_weight, angle, token, lane, 128, float32(32.0), True)
        store_kv(qkv, out, token, slot_mapping[token], lane, num_slots, y0, y1)


@cuda.jit(fastmath=True)
def kv_angle_in_float64(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens,
                        num_slots):
    lane = cuda.threadIdx.x % 32
    token = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if token < tokens and slot_mapping[token] >= 0:
        angle = positions[token] * inv_freq[lane]  # int32 * float32: a float64 in Numba
        y0, y1 = k_pair(qkv, k_weight, angle, token, lane, 128, float32(64.0), True)
        store_kv(qkv, out, token, slot_mapping[token], lane, num_slots, y0, y1)


# --- step 4: the launch for a ragged batch --------------------------------------------------


def launch_kv_write(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                    num_slots):
    """Positions from the requests' lengths, then one warp per token of the batch."""
    tokens = sum(query_lens)
    starts = np.cumsum((0,) + tuple(query_lens[:-1]))  # the on-ramp's prefix sum: first rows
    within = np.arange(tokens) - np.repeat(starts, query_lens)  # place in its own request
    positions = (np.repeat(context_lens, query_lens) + within).astype(np.int32)
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, cuda.to_device(positions), slot_mapping,
                                     inv_freq, out, tokens, num_slots)


def launch_rows_as_positions(qkv, k_weight, slot_mapping, inv_freq, out, query_lens,
                             context_lens, num_slots):
    tokens = sum(query_lens)
    positions = np.arange(tokens, dtype=np.int32)  # the batch's row, not the request's place
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, cuda.to_device(positions), slot_mapping,
                                     inv_freq, out, tokens, num_slots)


def launch_without_context(qkv, k_weight, slot_mapping, inv_freq, out, query_lens,
                           context_lens, num_slots):
    tokens = sum(query_lens)
    positions = np.concatenate([np.arange(q) for q in query_lens]).astype(np.int32)
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, cuda.to_device(positions), slot_mapping,
                                     inv_freq, out, tokens, num_slots)


def launch_int64_positions(qkv, k_weight, slot_mapping, inv_freq, out, query_lens,
                           context_lens, num_slots):
    tokens = sum(query_lens)
    positions = np.concatenate([np.arange(c, c + q) for q, c in zip(query_lens, context_lens)])
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, cuda.to_device(positions), slot_mapping,
                                     inv_freq, out, tokens, num_slots)  # int64: NumPy's default


def launch_per_request(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                       num_slots):
    tokens = sum(query_lens)
    positions = np.concatenate([np.arange(c, c + q) for q, c in zip(query_lens, context_lens)])
    blocks = (len(query_lens) + 3) // 4  # a warp per request, not per token
    write_kv[blocks, 128](qkv, k_weight, cuda.to_device(positions.astype(np.int32)),
                          slot_mapping, inv_freq, out, tokens, num_slots)


SOLUTIONS = {
    "10.1": scatter_rows,
    "10.2": e4m3_codes,
    "10.3": write_kv,
    "10.4": launch_kv_write,
}

WRONG = {
    "10.1": [(padding_not_skipped, "a padding token's slot"),
             (row_of_the_token, "row `token` of the cache"),
             (row_of_one_head, "slot * heads * head_dim, not slot * head_dim"),
             (scatter_unguarded, "out of bounds")],
    "10.2": [(e4m3_truncated, "truncated"), (e4m3_ties_up, "a tie went up"),
             (e4m3_unsaturated, "saturates every such value"),
             (e4m3_no_subnormals, "subnormal range"), (e4m3_nan_unsigned, "0x7F with the sign")],
    "10.3": [(kv_not_rotated, "not rotated"), (kv_padding_written, "a padding token's slot"),
             (kv_v_normalized, "V was normalized"), (kv_mean_over_lanes, "the 32 lanes"),
             (kv_angle_in_float64, "float64")],
    "10.4": [(launch_rows_as_positions, "the token's row in the batch"),
             (launch_without_context, "restarted at 0"),
             (launch_int64_positions, "int64"),
             (launch_per_request, "ceil(tokens / 4)")],
}
