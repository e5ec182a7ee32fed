import ropelab  # noqa: F401  (must come before numba.cuda)

from numba import cuda, float32, int64


# ---- 00.1 copy ----
@cuda.jit
def copy(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def copy_manual(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# ---- 00.2 copy_guarded ----
@cuda.jit
def copy_guarded(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit
def copy_guarded_ret(x, out, n):
    i = cuda.threadIdx.x + cuda.blockDim.x * cuda.blockIdx.x
    if i >= n:
        return
    out[i] = x[i]


# ---- 00.3 rotate_pairs ----
@cuda.jit
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
def rotate_pairs_fma(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    e = p + p
    c = cos_t[p]
    s = sin_t[p]
    x0 = x[e]
    x1 = x[e + 1]
    out[e] = cuda.fma(x0, c, -(x1 * s))
    out[e + 1] = cuda.fma(x0, s, x1 * c)


@cuda.jit
def rotate_pairs_gridstride(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    step = cuda.gridsize(1)
    while p < n_pairs:
        a = x[2 * p]
        out[2 * p] = a * cos_t[p] - x[2 * p + 1] * sin_t[p]
        out[2 * p + 1] = a * sin_t[p] + x[2 * p + 1] * cos_t[p]
        p += step


# ---- 00.4 launch ----
def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    threads = 128
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_512(x, out, cos_t, sin_t, n_pairs):
    threads = 512
    if n_pairs < threads:
        threads = max(32, ((n_pairs + 31) // 32) * 32)
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_fma[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = min((n_pairs + threads - 1) // threads, 8)
    rotate_pairs_gridstride[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


# ---- 00.5 rotate_elements ----
@cuda.jit
def rotate_elements(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i >= n:
        return
    p = i >> 1
    c = cos_t[p]
    s = sin_t[p]
    if (i & 1) == 0:
        out[i] = x[i] * c - x[i + 1] * s
    else:
        out[i] = x[i - 1] * s + x[i] * c


@cuda.jit
def rotate_elements_div(x, out, cos_t, sin_t, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        p = i // 2
        first = 2 * p
        a = x[first]
        b = x[first + 1]
        c = cos_t[p]
        s = sin_t[p]
        if i == first:
            out[i] = a * c - b * s
        else:
            out[i] = a * s + b * c


ENTRIES = [
    ("00.1", "grid1", copy),
    ("00.1", "manual_index_local", copy_manual),
    ("00.2", "grid1_if_guard", copy_guarded),
    ("00.2", "manual_early_return", copy_guarded_ret),
    ("00.3", "grid1_guard_loads_first", rotate_pairs),
    ("00.3", "manual_fma_early_return", rotate_pairs_fma),
    ("00.3", "grid_stride_interleaved", rotate_pairs_gridstride),
    ("00.4", "block128", launch_rotate_pairs),
    ("00.4", "block512_fma", launch_rotate_pairs_512),
    ("00.4", "block64_gridstride_8blocks", launch_rotate_pairs_stride),
    ("00.5", "shift_and_branch", rotate_elements),
    ("00.5", "div2_both_loads", rotate_elements_div),
]
