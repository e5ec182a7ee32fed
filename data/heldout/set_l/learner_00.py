import ropelab  # noqa: F401
import math

from numba import cuda, float32


# ---------------- 00.1 copy ----------------
@cuda.jit(fastmath=True)
def copy_grid(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def copy_manual(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# ---------------- 00.2 copy_guarded ----------------
@cuda.jit(fastmath=True)
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


# ---------------- 00.3 rotate_pairs ----------------
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


@cuda.jit
def rotate_pairs_return_interleaved(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    a = p + p
    out[a] = x[a] * cos_t[p] - x[a + 1] * sin_t[p]
    out[a + 1] = x[a] * sin_t[p] + x[a + 1] * cos_t[p]


@cuda.jit(fastmath=True)
def rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    step = cuda.gridsize(1)
    while p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        a = x[2 * p]
        b = x[2 * p + 1]
        out[2 * p] = a * c - b * s
        out[2 * p + 1] = b * c + a * s
        p += step


# ---------------- 00.4 launch_rotate_pairs ----------------
def launch_rotate_pairs_256(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = math.ceil(n_pairs / threads)
    rotate_pairs_return_interleaved[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_fit(x, out, cos_t, sin_t, n_pairs):
    # smallest whole-warp block up to 1024 for small inputs, 1024 past that
    threads = min(1024, 32 * ((n_pairs + 31) // 32))
    blocks = -(-n_pairs // threads)
    rotate_pairs_stride[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# ---------------- 00.5 rotate_elements ----------------
@cuda.jit(fastmath=True)
def rotate_elements_branch(x, out, cos_t, sin_t, n):
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


@cuda.jit(fastmath=True)
def rotate_elements_xor_sign(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        p = i >> 1
        partner = x[i ^ 1]
        sign = float32(1.0)
        if (i & 1) == 0:
            sign = float32(-1.0)
        out[i] = x[i] * cos_t[p] + sign * partner * sin_t[p]


@cuda.jit
def rotate_elements_pairload(x, out, cos_t, sin_t, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        first = i - (i & 1)
        x0 = x[first]
        x1 = x[first + 1]
        p = first >> 1
        c = cos_t[p]
        s = sin_t[p]
        if i == first:
            out[i] = x0 * c - x1 * s
        else:
            out[i] = x0 * s + x1 * c



@cuda.jit(fastmath=True)
def copy_guarded_stride(x, out, n):
    i = cuda.grid(1)
    while i < n:
        out[i] = x[i]
        i += cuda.gridsize(1)

ENTRIES = [
    ("00.1", "grid1", copy_grid),
    ("00.1", "manual_nofastmath", copy_manual),
    ("00.2", "grid1_if", copy_guarded_if),
    ("00.2", "manual_return", copy_guarded_return),
    ("00.3", "grid1_loads_first", rotate_pairs),
    ("00.3", "manual_return_inline", rotate_pairs_return_interleaved),
    ("00.3", "rotate_grid_stride", rotate_pairs_stride),
    ("00.4", "b256", launch_rotate_pairs_256),
    ("00.4", "b64_mathceil", launch_rotate_pairs_64),
    ("00.4", "fit_warps_cap1024", launch_rotate_pairs_fit),
    ("00.5", "div_mod_branch", rotate_elements_branch),
    ("00.5", "xor_partner_sign", rotate_elements_xor_sign),
    ("00.5", "pair_load_both", rotate_elements_pairload),
    ("00.2", "copy_grid_stride", copy_guarded_stride),
]
