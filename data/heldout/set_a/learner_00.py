import ropelab
from numba import cuda, float32, int64

# 00.1: one thread per float, index from cuda.grid(1).
@cuda.jit(fastmath=True)
def copy_grid(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


# 00.1: one thread per float, index spelled out from blockIdx, blockDim and threadIdx.
@cuda.jit(fastmath=True)
def copy_explicit(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    out[i] = x[i]


# 00.2: guard with if i < n.
@cuda.jit(fastmath=True)
def copy_guarded_if(x, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i]


# 00.2: early return for threads past the end.
@cuda.jit(fastmath=True)
def copy_guarded_return(x, out, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = x[i]


# 00.2: grid-stride loop over the floats (cuda.gridsize(1) as the stride).
@cuda.jit(fastmath=True)
def copy_guarded_stride(x, out, n):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        out[i] = x[i]


# 00.3: one thread per pair, guard then rotate.
@cuda.jit(fastmath=True)
def rotate_pairs_basic(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


# 00.3: grid-stride loop over pairs, the element index as p + p.
@cuda.jit(fastmath=True)
def rotate_pairs_stride(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    stride = cuda.gridsize(1)
    while p < n_pairs:
        e = p + p
        x0 = x[e]
        x1 = x[e + 1]
        c = cos_t[p]
        s = sin_t[p]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c
        p += stride


# 00.4 (launched): 64 threads per block, the grid rounded up.
def launch_rotate_pairs_64(x, out, cos_t, sin_t, n_pairs):
    threads = 64
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_basic[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# 00.4: 256 threads per block, launching the grid-stride kernel.
def launch_rotate_pairs_256(x, out, cos_t, sin_t, n_pairs):
    threads = 256
    blocks = -(-n_pairs // threads)
    rotate_pairs_stride[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# 00.4: block = n_pairs rounded up to a warp, capped at 1024; then as many blocks as needed.
def launch_rotate_pairs_fit(x, out, cos_t, sin_t, n_pairs):
    threads = min(1024, 32 * ((n_pairs + 31) // 32))
    blocks = (n_pairs + threads - 1) // threads
    rotate_pairs_basic[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# 00.5: one thread per float, an if/else on even and odd i.
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


# 00.5: one thread per float, pair and parity from shifts and masks, branch-free select.
@cuda.jit(fastmath=True)
def rotate_elements_bits(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        p = i >> 1
        odd = i & 1
        first = i - odd
        x0 = x[first]
        x1 = x[first + 1]
        c = cos_t[p]
        s = sin_t[p]
        # even: x0*c - x1*s ; odd: x0*s + x1*c
        a = c if odd == 0 else s
        b = -s if odd == 0 else c
        out[i] = x0 * a + x1 * b


ENTRIES = [
    ("00.1", "copy_grid", copy_grid),
    ("00.1", "copy_explicit_index", copy_explicit),
    ("00.2", "copy_guard_if", copy_guarded_if),
    ("00.2", "copy_guard_return", copy_guarded_return),
    ("00.2", "copy_guard_stride", copy_guarded_stride),
    ("00.3", "rotate_pairs_basic", rotate_pairs_basic),
    ("00.3", "rotate_pairs_stride", rotate_pairs_stride),
    ("00.4", "launch_pairs_64", launch_rotate_pairs_64),
    ("00.4", "launch_pairs_256_stride", launch_rotate_pairs_256),
    ("00.4", "launch_pairs_fit_1024", launch_rotate_pairs_fit),
    ("00.5", "elements_branch", rotate_elements_branch),
    ("00.5", "elements_bits_select", rotate_elements_bits),
]
