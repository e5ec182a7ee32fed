"""Notebook 00 (rope in one notebook), steps 00.1 .. 00.5."""
from numba import cuda


# ---------------------------------------------------------------- 00.1
@cuda.jit(fastmath=True)
def copy(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_explicit(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# ---------------------------------------------------------------- 00.2
@cuda.jit(fastmath=True)
def copy_guarded(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_guarded_stride(x, out, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    for j in range(i, n, step):
        out[j] = x[j]


# ---------------------------------------------------------------- 00.3
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
def rotate_pairs_early_exit(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p >= n_pairs:
        return
    c = cos_t[p]
    s = sin_t[p]
    e = p + p
    x0 = x[e]
    x1 = x[e + 1]
    out[e] = x0 * c - x1 * s
    out[e + 1] = x1 * c + x0 * s


# ---------------------------------------------------------------- 00.4
def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_early_exit[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_fit(x, out, cos_t, sin_t, n_pairs):
    # as few warps as cover the pairs, up to 1024 threads per block
    warps = (n_pairs + 31) // 32
    threads = min(1024, 32 * warps)
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# ---------------------------------------------------------------- 00.5
@cuda.jit(fastmath=True)
def rotate_elements(x, out, cos_t, sin_t, n):
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
def rotate_elements_shift(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i >= n:
        return
    p = i >> 1
    first = p << 1
    x0 = x[first]
    x1 = x[first + 1]
    c = cos_t[p]
    s = sin_t[p]
    if i == first:
        out[i] = x0 * c - x1 * s
    else:
        out[i] = x0 * s + x1 * c


ENTRIES = [
    ("00.1", "grid1", copy),
    ("00.1", "explicit_index", copy_explicit),
    ("00.2", "if_guard", copy_guarded),
    ("00.2", "grid_stride_range", copy_guarded_stride),
    ("00.3", "if_guard", rotate_pairs),
    ("00.3", "early_exit_sincos_first", rotate_pairs_early_exit),
    ("00.4", "blocks_256", launch_rotate_pairs),
    ("00.4", "blocks_64", launch_rotate_pairs_64),
    ("00.4", "fit_warps_1024", launch_rotate_pairs_fit),
    ("00.5", "div_mod_branch", rotate_elements),
    ("00.5", "shift_load_both", rotate_elements_shift),
]
