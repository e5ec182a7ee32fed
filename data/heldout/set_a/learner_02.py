import ropelab
from numba import cuda, float32, int64, uint64
import math

# 02.1: block = token, thread = pair, guard pair < n_pairs.
@cuda.jit(fastmath=True)
def rope_rows_basic(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    if pair < n_pairs:
        e = 2 * (token * n_pairs + pair)
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


# 02.1: block = token, a block-stride while loop over the row's pairs (any block size).
@cuda.jit(fastmath=True)
def rope_rows_loop(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    row = 2 * token * n_pairs
    pos = float32(positions[token])
    pair = cuda.threadIdx.x
    while pair < n_pairs:
        angle = pos * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        e = row + pair + pair
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c
        pair += cuda.blockDim.x


# 02.2: while loop, pair += blockDim.x, frequency 1 / base ** (2 pair / hidden) in float32.
@cuda.jit(fastmath=True)
def rope_block2d_while(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    pair = uint64(cuda.threadIdx.x)
    step = uint64(cuda.blockDim.x)
    hidden = n_pairs + n_pairs
    row = token * hidden
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(hidden)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) * inv_hidden)
        angle = pos * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = row + pair + pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        pair += step


# 02.2: signed int64 loop counter, negative exponent -pair / n_pairs.
@cuda.jit(fastmath=True)
def rope_block2d_signed(x, out, positions, n_pairs, base):
    token = int64(cuda.blockIdx.x)
    n = int64(n_pairs)
    pos = float32(positions[token])
    pair = int64(cuda.threadIdx.x)
    while pair < n:
        f = math.pow(base, -float32(pair) / float32(n))
        angle = pos * f
        e = 2 * (token * n + pair)
        x0 = x[e]
        x1 = x[e + 1]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c
        pair += int64(cuda.blockDim.x)


# 02.2: each thread takes a contiguous chunk of pairs: ceil(n_pairs / blockDim) pairs, no division
# (the chunk length found by a counting loop), ascending exponent by one multiply per pair.
@cuda.jit(fastmath=True)
def rope_block2d_chunk(x, out, positions, n_pairs, base):
    token = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    threads = uint64(cuda.blockDim.x)
    chunk = uint64(0)
    covered = uint64(0)
    while covered < n_pairs:  # chunk = ceil(n_pairs / threads) without a division
        covered += threads
        chunk += uint64(1)
    pair = t * chunk
    end = pair + chunk
    if end > n_pairs:
        end = n_pairs
    hidden = n_pairs + n_pairs
    row = token * hidden
    pos = float32(positions[token])
    inv_hidden = float32(1.0) / float32(hidden)
    while pair < end:
        f = math.pow(base, -float32(pair + pair) * inv_hidden)
        angle = pos * f
        e = row + pair + pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        pair += uint64(1)


# 02.3 (launched): one block per token, n_pairs rounded up to a warp, capped at 1024.
def launch_block2d_cap1024(x, out, positions, n_pairs, base):
    threads = min(1024, 32 * ((n_pairs + 31) // 32))
    rope_block2d_while[positions.size, threads](x, out, positions, uint64(n_pairs),
                                                float32(base))


# 02.3: one block per token, rounded up to 64 threads and capped at 512, signed-counter kernel.
def launch_block2d_cap512(x, out, positions, n_pairs, base):
    threads = min(512, 64 * (-(-n_pairs // 64)))
    rope_block2d_signed[positions.size, threads](x, out, positions, uint64(n_pairs),
                                                float32(base))


ENTRIES = [
    ("02.1", "rows_one_pair_per_thread", rope_rows_basic),
    ("02.1", "rows_block_stride", rope_rows_loop),
    ("02.2", "block2d_while", rope_block2d_while),
    ("02.2", "block2d_signed_counter", rope_block2d_signed),
    ("02.2", "block2d_chunked", rope_block2d_chunk),
    ("02.3", "launch_block2d_1024", launch_block2d_cap1024),
    ("02.3", "launch_block2d_512_signed", launch_block2d_cap512),
]
