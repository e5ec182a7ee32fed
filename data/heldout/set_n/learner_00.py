import math
from numba import cuda, float32, int64


@cuda.jit
def copy_a(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit
def copy_b(x, out):
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    v = x[i]
    out[i] = v


@cuda.jit
def copy_guarded_a(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit
def copy_guarded_b(x, out, n):
    i = cuda.blockDim.x * cuda.blockIdx.x + cuda.threadIdx.x
    if i >= n:
        return
    out[i] = x[i]


@cuda.jit
def copy_guarded_c(x, out, n):
    i = cuda.grid(1)
    while i < n:
        out[i] = x[i]
        i += cuda.gridsize(1)


@cuda.jit(fastmath=True)
def rotate_pairs_a(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        a = x[2 * p]
        b = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[2 * p] = a * c - b * s
        out[2 * p + 1] = a * s + b * c


@cuda.jit
def rotate_pairs_b(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    e = p * 2
    c = cos_t[p]
    s = sin_t[p]
    out[e] = c * x[e] - s * x[e + 1]
    out[e + 1] = s * x[e] + c * x[e + 1]


@cuda.jit
def rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    for q in range(p, n_pairs, stride):
        a = x[2 * q]
        b = x[2 * q + 1]
        out[2 * q] = a * cos_t[q] - b * sin_t[q]
        out[2 * q + 1] = b * cos_t[q] + a * sin_t[q]


def launch_rotate_pairs_a(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_a[blocks, threads](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_b(x, out, cos_t, sin_t, n_pairs):
    threads = 128
    blocks = max(1, math.ceil(n_pairs / threads))
    rotate_pairs_b[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_c(x, out, cos_t, sin_t, n_pairs):
    # one block sized to the warps needed when it fits, else 1024-thread blocks
    warps = -(-n_pairs // 32)
    threads = min(1024, warps * 32)
    blocks = -(-n_pairs // threads)
    rotate_pairs_stride[blocks, threads](x, out, cos_t, sin_t, n_pairs)


@cuda.jit(fastmath=True)
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
        partner = i ^ 1
        odd = i & 1
        mine = x[i]
        other = x[partner]
        if odd:
            out[i] = mine * cos_t[p] + other * sin_t[p]
        else:
            out[i] = mine * cos_t[p] - other * sin_t[p]


@cuda.jit
def rotate_elements_c(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        p = i // 2
        a = x[2 * p]
        b = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        if i == 2 * p:
            v = a * c - b * s
        else:
            v = a * s + b * c
        out[i] = v


ENTRIES = [
    ("00.1", "grid(1)", copy_a),
    ("00.1", "blockIdx*32 literal", copy_b),
    ("00.2", "if guard", copy_guarded_a),
    ("00.2", "early return", copy_guarded_b),
    ("00.2", "grid-stride while", copy_guarded_c),
    ("00.3", "fastmath loads first", rotate_pairs_a),
    ("00.3", "early return, c/s first", rotate_pairs_b),
    ("00.3", "grid-stride range loop", rotate_pairs_stride),
    ("00.4", "256 threads, int64 n", launch_rotate_pairs_a),
    ("00.4", "128 threads math.ceil", launch_rotate_pairs_b),
    ("00.4", "fitted warps cap 1024, stride kernel", launch_rotate_pairs_c),
    ("00.5", "div/mod parity branch", rotate_elements_a),
    ("00.5", "shift/xor partner", rotate_elements_b),
    ("00.5", "load whole pair, choose output", rotate_elements_c),
]
