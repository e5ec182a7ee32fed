import ropelab  # noqa: F401
import math
import numpy as np
from numba import cuda, float32
from ropelab.grader.steps.nb08 import reduce_partials_kernel

FULL = 0xFFFFFFFF


@cuda.jit
def inverse_rotate_head(dy, out, positions, inv_freq, rows):
    g = cuda.grid(1)
    row = g // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        e = row * 64 + 2 * lane
        a = dy[e]
        b = dy[e + 1]
        angle = float32(positions[row]) * inv_freq[lane]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = a * c + b * s
        out[e + 1] = b * c - a * s


@cuda.jit
def rms_norm_backward_head(dn, n, r, out, rows):
    g = cuda.grid(1)
    row = g // 32
    lane = cuda.threadIdx.x % 32
    if row < rows:
        e = row * 64 + 2 * lane
        d0 = dn[e]
        d1 = dn[e + 1]
        n0 = n[e]
        n1 = n[e + 1]
        acc = d0 * n0 + d1 * n1
        m = 16
        while m > 0:
            acc += cuda.shfl_xor_sync(FULL, acc, m)
            m //= 2
        mean = acc / float32(64.0)
        inv_r = float32(1.0) / r[row]
        out[e] = (d0 - n0 * mean) * inv_r
        out[e + 1] = (d1 - n1 * mean) * inv_r


@cuda.jit
def dw_partials(dz, n, out, rows):
    buf = cuda.shared.array((4, 64), float32)
    t = cuda.threadIdx.x
    grp = t // 64
    c = t % 64
    acc = float32(0.0)
    row = cuda.blockIdx.x * 4 + grp
    step = cuda.gridDim.x * 4
    while row < rows:
        acc += dz[row * 64 + c] * n[row * 64 + c]
        row += step
    buf[grp, c] = acc
    cuda.syncthreads()
    if grp == 0:
        out[cuda.blockIdx.x * 64 + c] = buf[0, c] + buf[1, c] + buf[2, c] + buf[3, c]


def launch_dw(dz, n, out, tokens, heads):
    rows = tokens * heads
    blocks = min((rows + 3) // 4, 64)
    partials = cuda.device_array(blocks * 64, dtype=np.float32)
    dw_partials[blocks, 256](dz, n, partials, rows)
    reduce_partials_kernel[2, 256](partials, out)


ENTRIES = [
    ("08.1", "warp_per_head", inverse_rotate_head),
    ("08.2", "shfl_mean", rms_norm_backward_head),
    ("08.3", "stride_rows_shared", dw_partials),
    ("08.4", "capped_64_blocks", launch_dw),
]
