"""Notebook 00 (RoPE in one notebook), steps 00.1 .. 00.5."""
import ropelab  # noqa: F401  (before numba.cuda)

from numba import cuda, float32


# ---------------------------------------------------------------- 00.1 copy
@cuda.jit(fastmath=True)
def copy_grid(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_explicit(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# ---------------------------------------------------------------- 00.2 copy_guarded
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
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_guarded_stride(x, out, n):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        out[i] = x[i]
        i += stride


# ---------------------------------------------------------------- 00.3 rotate_pairs
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
    e = p + p
    a = x[e]
    b = x[e + 1]
    out[e + 1] = a * s + b * c
    out[e] = a * c - b * s


@cuda.jit(fastmath=True)
def rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    step = cuda.gridsize(1)
    while p < n_pairs:
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * cos_t[p] - x1 * sin_t[p]
        out[2 * p + 1] = x0 * sin_t[p] + x1 * cos_t[p]
        p += step


# ---------------------------------------------------------------- 00.4 launch_rotate_pairs
def launch_rotate_pairs_256(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_plain[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = -(-n_pairs // threads)
    rotate_pairs_return[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_fit(x, out, cos_t, sin_t, n_pairs):
    # one block when it fits (rounded to whole warps), else blocks of 1024
    warps = (n_pairs + 31) // 32
    threads = min(32 * warps, 1024)
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_stride[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# ---------------------------------------------------------------- 00.5 rotate_elements
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
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    p = i >> 1
    first = i & ~1
    x0 = x[first]
    x1 = x[first + 1]
    c = cos_t[p]
    s = sin_t[p]
    if (i & 1) == 0:
        out[i] = x0 * c - x1 * s
    else:
        out[i] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rotate_elements_sign(x, out, cos_t, sin_t, n):
    # out[i] = x[i] * c + sign * x[partner] * s, sign -1 for the even float
    i = cuda.grid(1)
    if i < n:
        odd = i & 1
        partner = i ^ 1
        p = i >> 1
        sign = float32(-1.0)
        if odd == 1:
            sign = float32(1.0)
        out[i] = x[i] * cos_t[p] + sign * x[partner] * sin_t[p]



# ---------------------------------------------------------------- extra approaches
@cuda.jit(fastmath=True)
def copy_stride(x, out):
    i = cuda.grid(1)
    while i < x.size:
        out[i] = x[i]
        i += cuda.gridsize(1)

ENTRIES = [
    ("00.1", "grid1", copy_grid),
    ("00.1", "explicit_index", copy_explicit),
    ("00.2", "if_guard", copy_guarded_if),
    ("00.2", "early_return", copy_guarded_return),
    ("00.2", "grid_stride", copy_guarded_stride),
    ("00.3", "loads_first_if", rotate_pairs_plain),
    ("00.3", "early_return_reordered", rotate_pairs_return),
    ("00.3", "grid_stride", rotate_pairs_stride),
    ("00.4", "block256", launch_rotate_pairs_256),
    ("00.4", "block64_negdiv", launch_rotate_pairs_64),
    ("00.4", "block_fit_warps", launch_rotate_pairs_fit),
    ("00.5", "divmod_branch", rotate_elements_branch),
    ("00.5", "bitops_loads_first", rotate_elements_bits),
    ("00.5", "xor_partner_sign", rotate_elements_sign),
    ("00.1", "grid_stride_size", copy_stride),
]
