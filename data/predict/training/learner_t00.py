"""Training kernels for notebook 00's steps, written as a learner would write them.

Each kernel computes what its step asks (the GPU run checks every output on the timing case
before timing it); the variants differ in what the time model must see: index arithmetic,
access patterns (coalesced, two floats per thread, a transposed walk), load order, loops, and
for the launch step the block size and a grid-stride loop.
"""

import math  # noqa: F401

from numba import cuda, float32, int32, uint64

# --- 00.1: copy, one thread per float, n / 32 blocks of 32 -------------------------------


@cuda.jit(fastmath=True)
def copy_int32_index(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # int32 arithmetic
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_unsigned(x, out):
    i = uint64(cuda.grid(1))
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_checked(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_pairs_half_idle(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:  # even threads copy two floats, odd ones rest
        a = x[i]
        b = x[i + 1]
        out[i] = a
        out[i + 1] = b


@cuda.jit(fastmath=True)
def copy_reversed(x, out):
    j = x.size - 1 - cuda.grid(1)
    out[j] = x[j]


@cuda.jit(fastmath=True)
def copy_transposed(x, out):
    # a bijection that sends the lanes of a warp n / 32 floats apart: every access its own
    # sector
    i = cuda.grid(1)
    rows = x.size // 32
    j = (i % 32) * rows + i // 32
    out[j] = x[j]


@cuda.jit(fastmath=True)
def copy_grid_stride(x, out):
    i = cuda.grid(1)
    while i < x.size:
        out[i] = x[i]
        i += cuda.gridsize(1)


# --- 00.2: the guard ---------------------------------------------------------------------


@cuda.jit(fastmath=True)
def guarded_size(x, out, n):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


@cuda.jit(fastmath=True)
def guarded_early_return(x, out, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = x[i]


@cuda.jit(fastmath=True)
def guarded_int32(x, out, n):
    i = cuda.threadIdx.x + cuda.blockIdx.x * 32
    if i < n:
        out[i] = x[i]


@cuda.jit(fastmath=True)
def guarded_two_per_thread(x, out, n):
    i = cuda.grid(1)
    j = 2 * i
    if j < n:  # the first half of the grid does the work
        out[j] = x[j]
        if j + 1 < n:
            out[j + 1] = x[j + 1]


@cuda.jit(fastmath=True)
def guarded_stride_loop(x, out, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = x[i]
        i += step


# --- 00.3: one thread per pair, cos and sin given ----------------------------------------


@cuda.jit(fastmath=True)
def pairs_unsigned(x, out, cos_t, sin_t, n_pairs):
    p = uint64(cuda.grid(1))
    if p < n_pairs:
        e = p + p
        a = x[e]
        b = x[e + uint64(1)]
        c = cos_t[p]
        s = sin_t[p]
        out[e] = a * c - b * s
        out[e + uint64(1)] = a * s + b * c


@cuda.jit(fastmath=True)
def pairs_store_between(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        a = x[2 * p]
        out[2 * p] = a * c - x[2 * p + 1] * s
        # x may be out: this load must wait for the store above
        out[2 * p + 1] = a * s + x[2 * p + 1] * c


@cuda.jit(fastmath=True)
def pairs_grid_stride(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    while p < n_pairs:
        a = x[2 * p]
        b = x[2 * p + 1]
        out[2 * p] = a * cos_t[p] - b * sin_t[p]
        out[2 * p + 1] = a * sin_t[p] + b * cos_t[p]
        p += cuda.gridsize(1)


@cuda.jit(fastmath=True)
def pairs_int32(x, out, cos_t, sin_t, n_pairs):
    p = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if p < n_pairs:
        k = p * 2
        a = x[k]
        b = x[k + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[k] = a * c - b * s
        out[k + 1] = b * c + a * s


@cuda.jit(fastmath=True)
def pairs_from_angle(x, out, cos_t, sin_t, n_pairs):
    # the angle recovered from the tables, then sin and cos computed again (wasteful)
    p = cuda.grid(1)
    if p < n_pairs:
        angle = math.atan2(sin_t[p], cos_t[p])
        c = math.cos(angle)
        s = math.sin(angle)
        a = x[2 * p]
        b = x[2 * p + 1]
        out[2 * p] = a * c - b * s
        out[2 * p + 1] = a * s + b * c


# --- 00.4: the launch --------------------------------------------------------------------


@cuda.jit(fastmath=True)
def rotate_pairs_kernel(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        a = x[2 * p]
        b = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[2 * p] = a * c - b * s
        out[2 * p + 1] = a * s + b * c


@cuda.jit(fastmath=True)
def rotate_pairs_strided(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    while p < n_pairs:
        a = x[2 * p]
        b = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[2 * p] = a * c - b * s
        out[2 * p + 1] = a * s + b * c
        p += cuda.gridsize(1)


def _launch_with(threads):
    def launch(x, out, cos_t, sin_t, n_pairs):
        blocks = (n_pairs + threads - 1) // threads
        rotate_pairs_kernel[blocks, threads](x, out, cos_t, sin_t, n_pairs)
    launch.__name__ = f"launch_rotate_pairs_{threads}"
    return launch


def launch_grid_stride_132x8(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = min(132 * 8, (n_pairs + threads - 1) // threads)
    rotate_pairs_strided[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_grid_stride_132x32(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = min(132 * 32, (n_pairs + threads - 1) // threads)
    rotate_pairs_strided[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_grid_stride_132(x, out, cos_t, sin_t, n_pairs):
    threads = 1024
    blocks = min(132, (n_pairs + threads - 1) // threads)
    rotate_pairs_strided[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# --- 00.5: one thread per float ----------------------------------------------------------


@cuda.jit(fastmath=True)
def elements_xor_partner(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        p = i // 2
        c = cos_t[p]
        s = sin_t[p]
        mine = x[i]
        other = x[i ^ 1]  # the other float of the pair
        if i & 1 == 0:
            out[i] = mine * c - other * s
        else:
            out[i] = other * s + mine * c


@cuda.jit(fastmath=True)
def elements_branchless(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        p = i >> 1
        odd = i & 1
        first = x[i - odd]
        second = x[i - odd + 1]
        c = cos_t[p]
        s = sin_t[p]
        o = float32(odd)
        keep = float32(1.0) - o
        # first float: f c - g s; second: f s + g c; picked by arithmetic, not a branch
        out[i] = first * (c * keep + s * o) + second * (c * o - s * keep)


@cuda.jit(fastmath=True)
def elements_unsigned(x, out, cos_t, sin_t, n):
    i = uint64(cuda.grid(1))
    if i < uint64(n):
        p = i // uint64(2)
        e = p + p
        a = x[e]
        b = x[e + uint64(1)]
        if i == e:
            out[i] = a * cos_t[p] - b * sin_t[p]
        else:
            out[i] = a * sin_t[p] + b * cos_t[p]


@cuda.jit(fastmath=True)
def elements_int32(x, out, cos_t, sin_t, n):
    i = int32(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x)
    if i < n:
        p = i // int32(2)
        a = x[2 * p]
        b = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[i] = a * c - b * s if i % 2 == 0 else a * s + b * c


ENTRIES = [
    ("00.1", "int32 index", copy_int32_index),
    ("00.1", "unsigned index", copy_unsigned),
    ("00.1", "size check", copy_checked),
    ("00.1", "two floats per even thread", copy_pairs_half_idle),
    ("00.1", "reversed", copy_reversed),
    ("00.1", "transposed walk", copy_transposed),
    ("00.1", "grid-stride loop", copy_grid_stride),
    ("00.2", "guard on x.size", guarded_size),
    ("00.2", "early return", guarded_early_return),
    ("00.2", "int32 index", guarded_int32),
    ("00.2", "two floats per thread", guarded_two_per_thread),
    ("00.2", "grid-stride loop", guarded_stride_loop),
    ("00.3", "unsigned index", pairs_unsigned),
    ("00.3", "load after store", pairs_store_between),
    ("00.3", "grid-stride loop", pairs_grid_stride),
    ("00.3", "int32 index", pairs_int32),
    ("00.3", "atan2 then sin/cos", pairs_from_angle),
    *[("00.4", f"block {t}", _launch_with(t)) for t in (32, 64, 96, 128, 256, 512, 1024)],
    ("00.4", "grid-stride 132x8 blocks of 256", launch_grid_stride_132x8),
    ("00.4", "grid-stride 132x32 blocks of 64", launch_grid_stride_132x32),
    ("00.4", "grid-stride 132 blocks of 1024", launch_grid_stride_132),
    ("00.5", "xor partner", elements_xor_partner),
    ("00.5", "branchless", elements_branchless),
    ("00.5", "unsigned", elements_unsigned),
    ("00.5", "int32", elements_int32),
]
