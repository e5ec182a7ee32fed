import ropelab
import math
from numba import cuda, float32, int64


# 00.1 copy
@cuda.jit
def copy_grid(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def copy_manual(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# 00.2 copy_guarded
@cuda.jit
def copy_guarded_if(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit
def copy_guarded_return(x, out, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    out[i] = x[i]


@cuda.jit
def copy_guarded_stride(x, out, n):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = x[i]
        i += stride


# 00.3 rotate_pairs
@cuda.jit
def rotate_pairs_a(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        a = x[2 * p]
        b = x[2 * p + 1]
        out[2 * p] = a * c - b * s
        out[2 * p + 1] = a * s + b * c


@cuda.jit
def rotate_pairs_b(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    e = p * 2
    a = x[e]
    b = x[e + 1]
    c = cos_t[p]
    s = sin_t[p]
    out[e] = cuda.fma(a, c, -b * s)
    out[e + 1] = cuda.fma(a, s, b * c)


@cuda.jit
def rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for p in range(start, n_pairs, step):
        a = x[2 * p]
        b = x[2 * p + 1]
        out[2 * p] = a * cos_t[p] - b * sin_t[p]
        out[2 * p + 1] = a * sin_t[p] + b * cos_t[p]


# 00.4 launch
def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_a[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_256(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = max(1, math.ceil(n_pairs / threads))
    rotate_pairs_b[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_fit(x, out, cos_t, sin_t, n_pairs):
    # small inputs get a smaller block so no block sits idle
    threads = min(512, ((n_pairs + 31) // 32) * 32)
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_a[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# 00.5 rotate_elements
@cuda.jit
def rotate_elements_a(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i >= n:
        return
    p = i // 2
    c = cos_t[p]
    s = sin_t[p]
    if i % 2 == 0:
        out[i] = x[i] * c - x[i + 1] * s
    else:
        out[i] = x[i - 1] * s + x[i] * c


@cuda.jit
def rotate_elements_b(x, out, cos_t, sin_t, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        p = i >> 1
        first = p << 1
        a = x[first]
        b = x[first + 1]
        c = cos_t[p]
        s = sin_t[p]
        if i == first:
            out[i] = a * c - b * s
        else:
            out[i] = a * s + b * c


ENTRIES = [
    ("00.1", "grid1", copy_grid),
    ("00.1", "manual_index", copy_manual),
    ("00.2", "grid1_if_guard", copy_guarded_if),
    ("00.2", "manual_early_return", copy_guarded_return),
    ("00.2", "grid_stride_while", copy_guarded_stride),
    ("00.3", "grid1_loads_first", rotate_pairs_a),
    ("00.3", "manual_fma_early_return", rotate_pairs_b),
    ("00.3", "grid_stride", rotate_pairs_stride),
    ("00.4", "block64", launch_rotate_pairs_64),
    ("00.4", "block256", launch_rotate_pairs_256),
    ("00.4", "block_fit_to_n", launch_rotate_pairs_fit),
    ("00.5", "grid1_branch_divmod", rotate_elements_a),
    ("00.5", "manual_shift_both_loads", rotate_elements_b),
]
