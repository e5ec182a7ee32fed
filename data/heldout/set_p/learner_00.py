import math
from numba import cuda, float32


@cuda.jit
def copy_a(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    out[i] = x[i]


@cuda.jit
def copy_b(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i] = v


@cuda.jit
def copy_guarded_a(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit
def copy_guarded_b(x, out, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    out[i] = x[i]


@cuda.jit
def rotate_pairs_a(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


@cuda.jit
def rotate_pairs_b(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    e = p * 2
    c = cos_t[p]
    s = sin_t[p]
    a = x[e]
    b = x[e + 1]
    out[e + 1] = cuda.fma(a, s, b * c)
    out[e] = cuda.fma(a, c, -(b * s))


def launch_rotate_pairs_a(x, out, cos_t, sin_t, n_pairs):
    tpb = 256
    blocks = (n_pairs + tpb - 1) // tpb
    rotate_pairs_a[blocks, tpb](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_b(x, out, cos_t, sin_t, n_pairs):
    tpb = 64
    blocks = math.ceil(n_pairs / tpb)
    rotate_pairs_b[blocks, tpb](x, out, cos_t, sin_t, n_pairs)


@cuda.jit
def rotate_elements_a(x, out, cos_t, sin_t, n):
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
def rotate_elements_b(x, out, cos_t, sin_t, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i >= n:
        return
    p = i >> 1
    mine = x[i]
    other = x[i ^ 1]
    c = cos_t[p]
    s = sin_t[p]
    if i & 1:
        out[i] = mine * c + other * s
    else:
        out[i] = mine * c - other * s


ENTRIES = [
    ("00.1", "manual-index", copy_a),
    ("00.1", "grid1", copy_b),
    ("00.2", "if-guard", copy_guarded_a),
    ("00.2", "early-return", copy_guarded_b),
    ("00.3", "plain", rotate_pairs_a),
    ("00.3", "fma-return", rotate_pairs_b),
    ("00.4", "tpb256", launch_rotate_pairs_a),
    ("00.4", "tpb64-ceil", launch_rotate_pairs_b),
    ("00.5", "div-mod-branch", rotate_elements_a),
    ("00.5", "xor-partner", rotate_elements_b),
]
