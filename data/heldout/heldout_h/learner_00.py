"""Notebook 00: copy, guard, rotate pairs, launch, rotate elements."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, int64


# ---------------------------------------------------------------- 00.1
@cuda.jit(fastmath=True)
def copy_grid(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_manual(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# ---------------------------------------------------------------- 00.2
@cuda.jit(fastmath=True)
def copy_guarded_if(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_guarded_return(x, out, n):
    i = cuda.threadIdx.x + cuda.blockDim.x * cuda.blockIdx.x
    if i >= n:
        return
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_guarded_stride(x, out, n):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    for k in range(i, n, stride):
        out[k] = x[k]


# ---------------------------------------------------------------- 00.3
@cuda.jit(fastmath=True)
def rotate_pairs_plain(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rotate_pairs_return(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    c = cos_t[p]
    s = sin_t[p]
    i = p + p
    a = x[i]
    b = x[i + 1]
    out[i + 1] = a * s + b * c
    out[i] = a * c - b * s


# ---------------------------------------------------------------- 00.4
def launch_rotate_pairs_256(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_plain[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = math.ceil(n_pairs / threads)
    rotate_pairs_return[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_warps(x, out, cos_t, sin_t, n_pairs):
    # as many whole warps as needed, up to 1024 threads a block
    warps = (n_pairs + 31) // 32
    threads = min(32 * warps, 1024)
    blocks = -(-n_pairs // threads)
    rotate_pairs_plain[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


# ---------------------------------------------------------------- 00.5
@cuda.jit(fastmath=True)
def rotate_elements_branch(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        p = i // 2
        c = cos_t[p]
        s = sin_t[p]
        if i % 2 == 0:
            out[i] = x[i] * c - x[i + 1] * s
        else:
            out[i] = x[i - 1] * s + x[i] * c


@cuda.jit(fastmath=True)
def rotate_elements_bits(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i >= n:
        return
    p = i >> 1
    odd = i & 1
    first = x[i - odd]
    second = x[i - odd + 1]
    c = cos_t[p]
    s = sin_t[p]
    if odd:
        out[i] = first * s + second * c
    else:
        out[i] = first * c - second * s


@cuda.jit(fastmath=True)
def rotate_elements_sign(x, out, cos_t, sin_t, n):
    # out[i] = x[i] * c + sign * x[partner] * s, sign -1 for an even i, +1 for an odd one
    i = cuda.grid(1)
    if i < n:
        p = i >> 1
        partner = i ^ 1
        sign = float32(1.0) if (i & 1) else float32(-1.0)
        out[i] = x[i] * cos_t[p] + sign * x[partner] * sin_t[p]


ENTRIES = [
    ("00.1", "grid1", copy_grid),
    ("00.1", "manual_index", copy_manual),
    ("00.2", "if_guard", copy_guarded_if),
    ("00.2", "early_return", copy_guarded_return),
    ("00.2", "grid_stride_range", copy_guarded_stride),
    ("00.3", "plain_guard", rotate_pairs_plain),
    ("00.3", "early_return_reordered", rotate_pairs_return),
    ("00.4", "blocks_256", launch_rotate_pairs_256),
    ("00.4", "blocks_64_ceil", launch_rotate_pairs_64),
    ("00.4", "whole_warps_fit", launch_rotate_pairs_warps),
    ("00.5", "div_mod_branch", rotate_elements_branch),
    ("00.5", "shift_and_bits", rotate_elements_bits),
    ("00.5", "xor_partner_sign", rotate_elements_sign),
]
