import ropelab
from numba import cuda, float32
import math
import numpy as np

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL_MASK = 0xFFFFFFFF


# the forward turn (+theta) where the backward needs R(theta)^T.
@cuda.jit(fastmath=True)
def inverse_turns_forward(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        e = row * 64 + 2 * lane
        g0 = dy[e]
        g1 = dy[e + 1]
        theta = float32(positions[row]) * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        out[e] = g0 * c - g1 * s
        out[e + 1] = g0 * s + g1 * c


# float64 creeping in (08): int32 position times float32 frequency, no float32(...).
@cuda.jit(fastmath=True)
def inverse_f64_int_times_float(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        e = row * 64 + 2 * lane
        g0 = dy[e]
        g1 = dy[e + 1]
        theta = positions[row] * inv_freq[lane]
        c = math.cos(theta)
        s = math.sin(theta)
        out[e] = g0 * c + g1 * s
        out[e + 1] = g1 * c - g0 * s


# float64 creeping in (08): mean = s / 64.0 with a bare float literal.
@cuda.jit(fastmath=True)
def norm_backward_f64_literal(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        e = row * 64 + 2 * lane
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        s = d0 * n0 + d1 * n1
        for m in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL_MASK, s, m)
        mean = s / 64.0
        out[e] = (d0 - n0 * mean) / r[row]
        out[e + 1] = (d1 - n1 * mean) / r[row]


# multiplied by r instead of dividing.
@cuda.jit(fastmath=True)
def norm_backward_times_r(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    if row < rows:
        e = row * 64 + 2 * lane
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        s = d0 * n0 + d1 * n1
        for m in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL_MASK, s, m)
        mean = s / float32(64.0)
        out[e] = (d0 - n0 * mean) * r[row]
        out[e + 1] = (d1 - n1 * mean) * r[row]


# missing barrier between storing the per-thread sums and reading the other groups' slots.
@cuda.jit(fastmath=True)
def dw_no_barrier(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


# an extra barrier that only thread 0 reaches, after the correct one.
@cuda.jit(fastmath=True)
def dw_extra_barrier_thread0(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t == 0:
        cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


# a reduction that forgets a stage: the first group adds three of the four groups' slots.
@cuda.jit(fastmath=True)
def dw_three_groups(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t]


# CORRECT but unusual: shared atomics: zero 64 slots, barrier, atomic.add, barrier, write.
@cuda.jit(fastmath=True)
def dw_shared_atomics(dz, n, out, rows):
    part = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    col = t % 64
    if t < 64:
        part[t] = float32(0.0)
    cuda.syncthreads()
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += 4 * cuda.gridDim.x
    cuda.atomic.add(part, col, acc)
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t]


# a correct 08.3 kernel for the launch probes.
@cuda.jit(fastmath=True)
def _dw_ok(dz, n, out, rows):
    part = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    col = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + col] * n[row * 64 + col]
        row += 4 * cuda.gridDim.x
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


# stage one with one block per row (rows blocks, more than the ceil(rows / 4) the step allows).
def launch_dw_block_per_row(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = rows
    partials = cuda.device_array(blocks * 64, np.float32)
    _dw_ok[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, REDUCE_THREADS](partials, out)


# stage two replaced by atomics straight into out, which was never zeroed.
@cuda.jit(fastmath=True)
def _atomic_into_dw(partials, out):
    c = cuda.grid(1)
    if c < partials.shape[0]:
        cuda.atomic.add(out, c % 64, partials[c])


def launch_dw_atomic_unzeroed(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 1024)
    partials = cuda.device_array(blocks * 64, np.float32)
    _dw_ok[blocks, 256](dz, n, partials, rows)
    _atomic_into_dw[blocks, 64](partials, out)


PROBES = [
    ("08.1", "forward_turn_not_inverse", inverse_turns_forward, "fail",
     "turned by +theta: the backward needs R(theta)^T (the turn by -theta)"),
    ("08.1", "f64_int32_times_float32_08", inverse_f64_int_times_float, "fail",
     "positions[row] (int32) * float32: float64 arithmetic (course rule; 08 has no census)"),
    ("08.2", "f64_bare_literal_08", norm_backward_f64_literal, "fail",
     "s / 64.0 bare float literal: float64 arithmetic (course rule; 08 has no census)"),
    ("08.2", "times_r_not_divide", norm_backward_times_r, "fail",
     "multiplied by r where the backward divides by r"),
    ("08.3", "shared_race_no_barrier_dw", dw_no_barrier, "fail",
     "no syncthreads between part[t] = acc and the first group's reads of the other slots"),
    ("08.3", "extra_barrier_thread0", dw_extra_barrier_thread0, "fail",
     "a second syncthreads() only thread 0 reaches (a barrier in divergent code: hang/UB on a GPU)"),
    ("08.3", "reduction_forgets_a_group", dw_three_groups, "fail",
     "the first group adds part[c] + part[64+c] + part[128+c]: the fourth group is lost"),
    ("08.3", "shared_atomic_reduction", dw_shared_atomics, "pass",
     "correct: atomics on shared slots between two barriers are not a race"),
    ("08.4", "launch_block_per_row", launch_dw_block_per_row, "fail",
     "stage one with rows blocks: more than ceil(rows / 4), most blocks wholly idle"),
    ("08.4", "atomic_stage_two_unzeroed", launch_dw_atomic_unzeroed, "fail",
     "atomics into out without zeroing it first (out is uninitialised)"),
]
