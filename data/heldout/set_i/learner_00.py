import ropelab  # noqa: F401
from numba import cuda


@cuda.jit
def copy(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    out[i] = x[i]


@cuda.jit
def copy_v2(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def copy_guarded(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit
def copy_guarded_v2(x, out, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    out[i] = x[i]


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
def rotate_pairs_v2(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    e = p + p
    c = cos_t[p]
    s = sin_t[p]
    a = x[e]
    b = x[e + 1]
    out[e + 1] = a * s + b * c
    out[e] = a * c - b * s


def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    threads = 128
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_v2(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    if n_pairs < threads:
        threads = max(32, ((n_pairs + 31) // 32) * 32)
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_v2[blocks, threads](x, out, cos_t, sin_t, n_pairs)


@cuda.jit
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


@cuda.jit
def rotate_elements_v2(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i >= n:
        return
    p = i >> 1
    partner = x[i ^ 1]
    c = cos_t[p]
    s = sin_t[p]
    if (i & 1) == 0:
        s = -s
    out[i] = x[i] * c + partner * s


ENTRIES = [
    ("00.1", "manual_index", copy),
    ("00.1", "grid1", copy_v2),
    ("00.2", "if_guard", copy_guarded),
    ("00.2", "early_return", copy_guarded_v2),
    ("00.3", "plain", rotate_pairs),
    ("00.3", "early_return", rotate_pairs_v2),
    ("00.4", "128_threads", launch_rotate_pairs),
    ("00.4", "adaptive_threads", launch_rotate_pairs_v2),
    ("00.5", "branch", rotate_elements),
    ("00.5", "xor_partner", rotate_elements_v2),
]
