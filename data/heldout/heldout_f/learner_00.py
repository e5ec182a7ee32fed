"""Set F, notebook 00 (00_rope_in_one_notebook.ipynb): steps 00.1 .. 00.5."""
import ropelab  # noqa: F401

from numba import cuda, float32, int64


# ---- 00.1: copy ---------------------------------------------------------------------------
@cuda.jit(fastmath=True)
def copy_grid(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_manual(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# ---- 00.2: copy_guarded -------------------------------------------------------------------
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


# ---- 00.3: rotate_pairs -------------------------------------------------------------------
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
    i = p + p
    c = cos_t[p]
    s = sin_t[p]
    a = x[i]
    b = x[i + 1]
    out[i + 1] = b * c + a * s
    out[i] = a * c - b * s


@cuda.jit(fastmath=True)
def rotate_pairs_gridstride(x, out, cos_t, sin_t, n_pairs):
    # also correct under any grid: each thread walks the pairs a grid apart
    for p in range(cuda.grid(1), n_pairs, cuda.gridsize(1)):
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


# ---- 00.4: launch_rotate_pairs ------------------------------------------------------------
def launch_rotate_pairs_256(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_plain[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = -(-n_pairs // threads)
    rotate_pairs_return[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    # whole warps as needed, at most 1024; few blocks, the grid-stride loop does the rest
    threads = min(1024, 32 * ((n_pairs + 31) // 32))
    blocks = min(-(-n_pairs // threads), 8)
    rotate_pairs_gridstride[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


# ---- 00.5: rotate_elements ----------------------------------------------------------------
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
def rotate_elements_xor(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i >= n:
        return
    p = i >> 1
    other = x[i ^ 1]
    mine = x[i]
    s = sin_t[p]
    if i & 1:
        out[i] = mine * cos_t[p] + other * s
    else:
        out[i] = mine * cos_t[p] - other * s


@cuda.jit(fastmath=True)
def rotate_elements_signed(x, out, cos_t, sin_t, n):
    # out[i] = x[i] c + sign * x[partner] s with sign -1 for the first float of a pair
    i = cuda.grid(1)
    if i < n:
        first = i - (i & 1)
        p = first // 2
        odd = i - first
        sign = float32(2 * odd - 1)
        partner = first + 1 - odd
        out[i] = x[i] * cos_t[p] + sign * x[partner] * sin_t[p]


ENTRIES = [
    ("00.1", "grid", copy_grid),
    ("00.1", "manual_index", copy_manual),
    ("00.2", "if_guard", copy_guarded_if),
    ("00.2", "early_return", copy_guarded_return),
    ("00.3", "plain", rotate_pairs_plain),
    ("00.3", "return_store_swapped", rotate_pairs_return),
    ("00.3", "gridstride", rotate_pairs_gridstride),
    ("00.4", "threads_256", launch_rotate_pairs_256),
    ("00.4", "threads_64", launch_rotate_pairs_64),
    ("00.4", "gridstride_capped", launch_rotate_pairs_stride),
    ("00.5", "even_odd", rotate_elements_branch),
    ("00.5", "xor_partner", rotate_elements_xor),
    ("00.5", "signed_formula", rotate_elements_signed),
]
