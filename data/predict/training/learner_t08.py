"""Training kernels for notebook 08's steps (the backward pass: inverse rotation, the norm's
backward, the weight gradient's partial rows, both stages launched).

Variants: lanes on neighbouring floats, every load first, the partial sums by shared atomics or
a shared-memory tree, two accumulators, and for the launch step grids of 128 to 4096 blocks and
a one-stage launch with global atomics.
"""

import math

import numpy as np
from numba import cuda, float32

from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

FULL = 0xFFFFFFFF

# --- 08.1: the inverse rotation --------------------------------------------------------------


@cuda.jit(fastmath=True)
def inverse_tables_first(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        g0 = dy[row * 64 + lane * 2]
        g1 = dy[row * 64 + lane * 2 + 1]
        out[row * 64 + lane * 2] = g0 * c + g1 * s
        out[row * 64 + lane * 2 + 1] = g1 * c - g0 * s


@cuda.jit(fastmath=True)
def inverse_thread_per_float(dy, out, positions, inv_freq, rows):
    # each lane handles one float of each half of the head: lanes read neighbouring floats
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        pos = float32(positions[row])
        for half in range(2):
            k = half * 32 + lane  # float k of the head: pair k // 2
            angle = pos * inv_freq[k // 2]
            c, s = math.cos(angle), math.sin(angle)
            partner = k ^ 1
            g = dy[row * 64 + k]
            h = dy[row * 64 + partner]
            if k % 2 == 0:
                out[row * 64 + k] = g * c + h * s
            else:
                out[row * 64 + k] = g * c - h * s


@cuda.jit(fastmath=True)
def inverse_grid_stride_rows(dy, out, positions, inv_freq, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    while row < rows:
        angle = float32(positions[row]) * inv_freq[lane]
        g0 = dy[row * 64 + lane * 2]
        g1 = dy[row * 64 + lane * 2 + 1]
        c, s = math.cos(angle), math.sin(angle)
        out[row * 64 + lane * 2] = g0 * c + g1 * s
        out[row * 64 + lane * 2 + 1] = g1 * c - g0 * s
        row += cuda.gridDim.x * 4


# --- 08.2: the norm's backward ------------------------------------------------------------------


@cuda.jit(fastmath=True)
def norm_back_r_first(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        inv_r = float32(1.0) / r[row]
        first = row * 64 + lane * 2
        d0, d1 = dn[first], dn[first + 1]
        n0, n1 = n[first], n[first + 1]
        s = d0 * n0 + d1 * n1
        for k in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL, s, k)
        mean = s * float32(1.0 / 64.0)
        out[first] = (d0 - n0 * mean) * inv_r
        out[first + 1] = (d1 - n1 * mean) * inv_r


@cuda.jit(fastmath=True)
def norm_back_shared_tree(dn, n, r, out, rows):
    buf = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    row = cuda.blockIdx.x * 4 + t // 32
    d0 = d1 = n0 = n1 = float32(0.0)
    if row < rows:
        first = row * 64 + lane * 2
        d0, d1 = dn[first], dn[first + 1]
        n0, n1 = n[first], n[first + 1]
    buf[t] = d0 * n0 + d1 * n1
    cuda.syncthreads()
    step = 16
    while step > 0:
        if lane < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if row < rows:
        mean = buf[t - lane] / float32(64.0)
        inv_r = float32(1.0) / r[row]
        out[row * 64 + lane * 2] = (d0 - n0 * mean) * inv_r
        out[row * 64 + lane * 2 + 1] = (d1 - n1 * mean) * inv_r


@cuda.jit(fastmath=True)
def norm_back_lanes_apart(dn, n, r, out, rows):
    lane = cuda.threadIdx.x % 32
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.x // 32
    if row < rows:
        base = row * 64
        d0, d1 = dn[base + lane], dn[base + lane + 32]
        n0, n1 = n[base + lane], n[base + lane + 32]
        s = d0 * n0 + d1 * n1
        for k in (16, 8, 4, 2, 1):
            s += cuda.shfl_xor_sync(FULL, s, k)
        mean = s / float32(64.0)
        inv_r = float32(1.0) / r[row]
        out[base + lane] = (d0 - n0 * mean) * inv_r
        out[base + lane + 32] = (d1 - n1 * mean) * inv_r


# --- 08.3: partial rows of dw ---------------------------------------------------------------


@cuda.jit(fastmath=True)
def partials_shared_atomic(dz, n, out, rows):
    part = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    if t < 64:
        part[t] = float32(0.0)
    cuda.syncthreads()
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    cuda.atomic.add(part, column, acc)
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t]


@cuda.jit(fastmath=True)
def partials_two_accumulators(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    stride = 4 * cuda.gridDim.x
    acc0 = float32(0.0)
    acc1 = float32(0.0)
    while row + stride < rows:  # two rows per pass: twice the loads in flight
        acc0 += dz[row * 64 + column] * n[row * 64 + column]
        acc1 += dz[(row + stride) * 64 + column] * n[(row + stride) * 64 + column]
        row += 2 * stride
    if row < rows:
        acc0 += dz[row * 64 + column] * n[row * 64 + column]
    part = cuda.shared.array(256, float32)
    part[t] = acc0 + acc1
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def partials_tree(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    part = cuda.shared.array(256, float32)
    part[t] = acc
    cuda.syncthreads()
    if t < 128:
        part[t] += part[t + 128]
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64]


# --- 08.4: both stages ----------------------------------------------------------------------


@cuda.jit(fastmath=True)
def partials_kernel(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    part = cuda.shared.array(256, float32)
    part[t] = acc
    cuda.syncthreads()
    if t < 64:
        out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]


@cuda.jit(fastmath=True)
def sum_partials_one_block(partials, out):
    # 64 threads, each walks one column of every partial row
    c = cuda.threadIdx.x
    if c < 64:
        acc = float32(0.0)
        r = 0
        while r < partials.size // 64:
            acc += partials[r * 64 + c]
            r += 1
        out[c] = acc


@cuda.jit(fastmath=True)
def zero64(out):
    if cuda.threadIdx.x < 64:
        out[cuda.threadIdx.x] = float32(0.0)


@cuda.jit(fastmath=True)
def partials_atomic_global(dz, n, out, rows):
    t = cuda.threadIdx.x
    column = t % 64
    row = cuda.blockIdx.x * 4 + t // 64
    acc = float32(0.0)
    while row < rows:
        acc += dz[row * 64 + column] * n[row * 64 + column]
        row += 4 * cuda.gridDim.x
    cuda.atomic.add(out, column, acc)


def _dw_launch(cap, reduce_with_ropelab=True):
    def launch(dz, n, out, tokens, heads):
        rows = tokens * heads
        blocks = min((rows + 3) // 4, cap)
        partials = cuda.device_array(blocks * 64, np.float32)
        partials_kernel[blocks, 256](dz, n, partials, rows)
        if reduce_with_ropelab:
            reduce_partials_kernel[2, REDUCE_THREADS](partials, out)
        else:
            sum_partials_one_block[1, 64](partials, out)
    launch.__name__ = f"launch_dw_{cap}" + ("" if reduce_with_ropelab else "_one_block")
    return launch


def _dw_atomic(cap):
    def launch(dz, n, out, tokens, heads):
        rows = tokens * heads
        zero64[1, 64](out)
        partials_atomic_global[min((rows + 3) // 4, cap), 256](dz, n, out, rows)
    launch.__name__ = f"launch_dw_atomic_{cap}"
    return launch


ENTRIES = [
    ("08.1", "tables first", inverse_tables_first),
    ("08.1", "one float per lane per half", inverse_thread_per_float),
    ("08.1", "grid-stride over rows", inverse_grid_stride_rows),
    ("08.2", "r read first", norm_back_r_first),
    ("08.2", "shared-memory tree", norm_back_shared_tree),
    ("08.2", "lanes on neighbouring floats", norm_back_lanes_apart),
    ("08.3", "shared atomics", partials_shared_atomic),
    ("08.3", "two accumulators", partials_two_accumulators),
    ("08.3", "two-step tree", partials_tree),
    *[("08.4", f"at most {c} blocks", _dw_launch(c)) for c in (128, 256, 512, 2048, 4096)],
    ("08.4", "1024 blocks, one-block reduction", _dw_launch(1024, reduce_with_ropelab=False)),
    ("08.4", "global atomics, 512 blocks", _dw_atomic(512)),
    ("08.4", "global atomics, 2048 blocks", _dw_atomic(2048)),
]
