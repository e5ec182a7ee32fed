import ropelab
from numba import cuda, float32, uint64
import math

# thread 0 of each block rotates the whole row; the other threads do nothing.
@cuda.jit(fastmath=True)
def rows_thread0_whole_row(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    if cuda.threadIdx.x == 0:
        pos = float32(positions[token])
        for pair in range(n_pairs):
            e = 2 * (token * n_pairs + pair)
            angle = pos * inv_freq[pair]
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[e]
            x1 = x[e + 1]
            out[e] = x0 * c - x1 * s
            out[e + 1] = x0 * s + x1 * c


# a block-stride for-range loop: no division written, but range() with a run-time step.
@cuda.jit(fastmath=True)
def rows_range_loop(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    row = 2 * token * n_pairs
    pos = float32(positions[token])
    for pair in range(cuda.threadIdx.x, n_pairs, cuda.blockDim.x):
        angle = pos * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        e = row + pair + pair
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


# float64 creeping in: float32(2.0) * pair where pair is the int32 threadIdx-based counter.
@cuda.jit(fastmath=True)
def block2d_f32_times_threadidx(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    n = int(n_pairs)
    hidden = float32(n + n)
    pos = float32(positions[token])
    while pair < n:
        exponent = float32(2.0) * pair / hidden
        angle = pos / math.pow(base, exponent)
        c = math.cos(angle)
        s = math.sin(angle)
        e = 2 * (token * n + pair)
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c
        pair += cuda.blockDim.x


# signed int32 threadIdx mixed with uint64 n_pairs in the index arithmetic.
@cuda.jit(fastmath=True)
def block2d_int32_plus_uint64(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = cuda.threadIdx.x
    hidden = n_pairs + n_pairs
    pos = float32(positions[token])
    while pair < n_pairs:
        angle = pos / math.pow(base, float32(pair + pair) / float32(hidden))
        c = math.cos(angle)
        s = math.sin(angle)
        e = token * hidden + pair + pair
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c
        pair += cuda.blockDim.x


# a correct 02.2 kernel for the launch probe.
@cuda.jit(fastmath=True)
def _block2d_ok(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    hidden = n_pairs + n_pairs
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(hidden)
    while pair < n_pairs:
        angle = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(angle)
        s = math.sin(angle)
        e = token * hidden + pair + pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)


# no cap: block = n_pairs rounded up to a warp, 1312 threads for the 1300-pair row.
def launch_block2d_uncapped(x, out, positions, n_pairs, base):
    threads = 32 * ((n_pairs + 31) // 32)
    _block2d_ok[positions.size, threads](x, out, positions, uint64(n_pairs), float32(base))


PROBES = [
    ("02.1", "rows_thread0_does_row", rows_thread0_whole_row, "fail",
     "thread `pair` must rotate pair `pair`; here thread 0 writes the whole row (contract broken, values right)"),
    ("02.1", "rows_range_loop_division", rows_range_loop, "fail",
     "no division written, but range() with a run-time step compiles a trip-count division (div in PTX)"),
    ("02.2", "f64_float32_times_threadidx", block2d_f32_times_threadidx, "fail",
     "float32(2.0) * pair with pair an int32 (threadIdx) counter is float64"),
    ("02.2", "int32_threadidx_plus_uint64", block2d_int32_plus_uint64, "fail",
     "int32 threadIdx + uint64 index: Numba types the sum float64 (index no longer an integer)"),
    ("02.3", "launch_block_over_1024", launch_block2d_uncapped, "fail",
     "no cap at 1024: a block of 1312 threads for rows of 1300 pairs"),
]
