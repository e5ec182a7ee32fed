"""Notebook 00: copy, guard, rotate pairs, launch, one thread per float."""
import ropelab  # noqa: F401

import math

from numba import cuda, float32, int64


# ---------------- 00.1 copy
@cuda.jit(fastmath=True)
def copy_grid(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_explicit(x, out):
    out[cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x] = \
        x[cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x]


# ---------------- 00.2 guarded copy
@cuda.jit(fastmath=True)
def copy_guarded_if(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_guarded_return(x, out, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    v = x[i]
    out[i] = v


@cuda.jit(fastmath=True)
def copy_guarded_stride(x, out, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = x[i]
        i += step


# ---------------- 00.3 rotate pairs
@cuda.jit(fastmath=True)
def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
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
    i = p + p
    a = x[i]
    b = x[i + 1]
    out[i] = a * cos_t[p] - b * sin_t[p]
    out[i + 1] = b * cos_t[p] + a * sin_t[p]


@cuda.jit(fastmath=True)
def rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    while p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p + 1] = x0 * s + x1 * c
        out[2 * p] = x0 * c - x1 * s
        p += cuda.gridsize(1)


# ---------------- 00.4 launch
def launch_rotate_pairs_256(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = math.ceil(n_pairs / threads)
    rotate_pairs_return[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_fit(x, out, cos_t, sin_t, n_pairs):
    warps = (n_pairs + 31) // 32
    threads = min(1024, 32 * warps)
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_stride[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# ---------------- 00.5 one thread per float
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
def rotate_elements_swap(x, out, cos_t, sin_t, n):
    # out = x * cos + swap(x) * sin, swap(a, b) = (-b, a)
    i = cuda.grid(1)
    if i < n:
        p = i // 2
        partner = i ^ 1
        sw = x[partner]
        if (i & 1) == 0:
            sw = -sw
        out[i] = x[i] * cos_t[p] + sw * sin_t[p]


ENTRIES = [
    ("00.1", "grid1", copy_grid),
    ("00.1", "explicit_index", copy_explicit),
    ("00.2", "if_guard", copy_guarded_if),
    ("00.2", "early_return", copy_guarded_return),
    ("00.2", "grid_stride", copy_guarded_stride),
    ("00.3", "plain", rotate_pairs),
    ("00.3", "early_return_reload", rotate_pairs_return),
    ("00.3", "grid_stride", rotate_pairs_stride),
    ("00.4", "blocks256", launch_rotate_pairs_256),
    ("00.4", "ceil64_int64", launch_rotate_pairs_64),
    ("00.4", "fit_warps", launch_rotate_pairs_fit),
    ("00.5", "parity_branch", rotate_elements_branch),
    ("00.5", "bit_ops", rotate_elements_bits),
    ("00.5", "swap_formula", rotate_elements_swap),
]
