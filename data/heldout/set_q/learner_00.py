"""Notebook 00 steps."""
from numba import cuda, float32, int64


# ---------------- 00.1 copy
@cuda.jit(fastmath=True)
def copy_a(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit("void(float32[::1], float32[::1])")
def copy_b(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    v = x[i]
    out[i] = v


# ---------------- 00.2 copy_guarded
@cuda.jit(fastmath=True)
def copy_guarded_a(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


@cuda.jit
def copy_guarded_b(x, out, n):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= n:
        return
    out[i] = x[i]


# ---------------- 00.3 rotate_pairs
@cuda.jit(fastmath=True)
def rotate_pairs_a(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


@cuda.jit("void(float32[::1], float32[::1], float32[::1], float32[::1], int64)")
def rotate_pairs_b(x, out, cos_t, sin_t, n_pairs):
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if p >= n_pairs:
        return
    c = cos_t[p]
    s = sin_t[p]
    e = p << 1
    a = x[e]
    b = x[e + 1]
    out[e + 1] = b * c + a * s
    out[e] = a * c - b * s


@cuda.jit
def rotate_pairs_c(x, out, cos_t, sin_t, n_pairs):
    # grid-stride loop over the pairs
    p = cuda.grid(1)
    while p < n_pairs:
        a = x[2 * p]
        b = x[2 * p + 1]
        out[2 * p] = cuda.fma(a, cos_t[p], -b * sin_t[p])
        out[2 * p + 1] = cuda.fma(a, sin_t[p], b * cos_t[p])
        p += cuda.gridsize(1)


# ---------------- 00.4 launch_rotate_pairs
def launch_rotate_pairs_a(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_a[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rotate_pairs_b(x, out, cos_t, sin_t, n_pairs):
    # blocks of 64 threads, the grid as an explicit tuple
    tpb = 64
    nblocks = -(-int(n_pairs) // tpb)
    rotate_pairs_b[(nblocks,), (tpb,)](x, out, cos_t, sin_t, int64(n_pairs))


def launch_rotate_pairs_c(x, out, cos_t, sin_t, n_pairs):
    # one block as small as whole warps allow when it fits, else 1024 wide; grid-stride kernel
    warps = (n_pairs + 31) // 32
    threads = min(1024, 32 * warps)
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_c[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# ---------------- 00.5 rotate_elements
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
        first = p << 1
        a = x[first]
        b = x[first + 1]
        c = cos_t[p]
        s = sin_t[p]
        if (i & 1) == 1:
            out[i] = a * s + b * c
        else:
            out[i] = a * c - b * s


# ---------------- third entries
@cuda.jit
def copy_c(x, out):
    i = cuda.grid(1)
    while i < x.size:
        out[i] = x[i]
        i += cuda.gridsize(1)


@cuda.jit(fastmath=True)
def copy_guarded_c(x, out, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[i] = x[i]


@cuda.jit(fastmath=True)
def rotate_elements_c(x, out, cos_t, sin_t, n):
    # branch-free: own float times cos plus signed partner times sin
    i = cuda.grid(1)
    if i < n:
        p = i >> 1
        odd = i & 1
        sign = float32(2 * odd - 1)
        out[i] = x[i] * cos_t[p] + sign * x[i ^ 1] * sin_t[p]


ENTRIES = [
    ("00.1", "grid1-fastmath", copy_a),
    ("00.1", "explicit-index-eager-sig", copy_b),
    ("00.1", "grid-stride-while", copy_c),
    ("00.2", "grid1-if", copy_guarded_a),
    ("00.2", "early-return-nofastmath", copy_guarded_b),
    ("00.2", "range-grid-stride", copy_guarded_c),
    ("00.3", "grid1-loads-first", rotate_pairs_a),
    ("00.3", "eager-sig-shift-index-odd-first", rotate_pairs_b),
    ("00.3", "grid-stride-fma", rotate_pairs_c),
    ("00.4", "256-ceil", launch_rotate_pairs_a),
    ("00.4", "64-tuple-grid", launch_rotate_pairs_b),
    ("00.4", "warp-rounded-cap1024-gridstride", launch_rotate_pairs_c),
    ("00.5", "divmod-branch", rotate_elements_a),
    ("00.5", "shift-load-both", rotate_elements_b),
    ("00.5", "branch-free-xor-sign", rotate_elements_c),
]
