"""Notebook 02's ladder: a solution for every step, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step_id]`` (it must pass) and every
function of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment
next to it).  The steps: 02.1 one block per token, one thread per pair; 02.2 block2d's stride
loop; 02.3 the launch of block2d for any shape, rows wider than 1024 pairs included.
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, uint64


# --- 02.1: blockIdx.x is the token, threadIdx.x the pair ----------------------


@cuda.jit(fastmath=True)
def rope_rows(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x  # one block per token: no division
    pair = cuda.threadIdx.x  # one thread per pair of the row
    if pair < n_pairs:  # the block is a whole number of warps, the row rarely is
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        i = 2 * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rows_flat_index(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.grid(1)  # a global index: in block 1 it starts at blockDim.x, not 0
    if pair < n_pairs:
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        i = 2 * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rows_unguarded(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = cuda.threadIdx.x
    angle = float32(positions[token]) * inv_freq[pair]
    c = math.cos(angle)
    s = math.sin(angle)
    i = 2 * (token * n_pairs + pair)
    x0 = x[i]
    x1 = x[i + 1]
    out[i] = x0 * c - x1 * s
    out[i + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rows_by_division(x, out, positions, inv_freq, n_pairs):
    idx = cuda.grid(1)  # the flat kernel's index math, inside a per-token launch
    token = idx // cuda.blockDim.x
    pair = idx - token * cuda.blockDim.x
    if pair < n_pairs:
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        i = 2 * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c


# --- 02.2: the stride loop --------------------------------------------------------------------


@cuda.jit(fastmath=True)
def my_rope_block2d(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:  # pairs tid, tid + blockDim, ...: any row width, any block size
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)




@cuda.jit(fastmath=True)
def if_instead_of_loop(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    if pair < n_pairs:  # the seed's kernel: one pair per thread, so pairs past blockDim are lost
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def loop_one_too_far(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair <= n_pairs:  # <=: one pair past the row
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)


@cuda.jit(fastmath=True)
def float64_literal(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = 2.0 / float32(n_pairs + n_pairs)  # a bare 2.0 is a float64
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)


@cuda.jit(fastmath=True)
def thread_index_signed(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = cuda.threadIdx.x  # an int32 next to the uint64 n_pairs: Numba meets them in float64
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + uint64(pair) + uint64(pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += cuda.blockDim.x


@cuda.jit(fastmath=True)
def stride_loop_as_range(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    # no // or % written, but range() divides by its run-time step to count the loop's trips
    for pair in range(uint64(cuda.threadIdx.x), n_pairs, uint64(cuda.blockDim.x)):
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c

# --- 02.3: the launch, rows wider than 1024 pairs included -------------------------------------


def launch_block2d(x, out, positions, n_pairs, base):
    tokens = positions.size
    warps = (int(n_pairs) + 31) // 32
    threads = min(32 * warps, 1024)  # one thread per pair up to the limit; the loop does the rest
    my_rope_block2d[tokens, threads](x, out, positions, uint64(n_pairs), float32(base))


def launch_thread_per_pair(x, out, positions, n_pairs, base):
    threads = (int(n_pairs) + 31) // 32 * 32  # 1,312 threads for a row of 1,300 pairs
    my_rope_block2d[positions.size, threads](x, out, positions, uint64(n_pairs), float32(base))


def launch_block_per_pair(x, out, positions, n_pairs, base):
    # a block per pair, not per token
    my_rope_block2d[int(n_pairs), 32](x, out, positions, uint64(n_pairs), float32(base))


def launch_one_block(x, out, positions, n_pairs, base):
    threads = min((int(n_pairs) + 31) // 32 * 32, 1024)
    # one block: only the first token's row
    my_rope_block2d[1, threads](x, out, positions, uint64(n_pairs), float32(base))


def launch_one_warp_a_row(x, out, positions, n_pairs, base):
    # 32 threads whatever the row: right values (the loop strides), not the step's block
    my_rope_block2d[positions.size, 32](x, out, positions, uint64(n_pairs), float32(base))


SOLUTIONS = {
    "02.1": rope_rows,
    "02.2": my_rope_block2d,
    "02.3": launch_block2d,
}

WRONG = {
    "02.1": [
        (rows_flat_index, "never written"),
        (rows_unguarded, "out of bounds"),
        (rows_by_division, "integer div/rem"),
    ],
    "02.2": [
        (if_instead_of_loop, "never written"),
        (loop_one_too_far, "out of bounds"),
        (float64_literal, "float64 instructions"),
        (thread_index_signed, "pair (int32, cuda.threadIdx.x) < n_pairs (uint64)"),
        (stride_loop_as_range, "although your code writes no // or %: they come from `range("),
    ],
    "02.3": [
        (launch_thread_per_pair, "the limit is 1024"),
        (launch_block_per_pair, "out of bounds for positions"),
        (launch_one_block, "one block per token"),
        (launch_one_warp_a_row, "rounded up to whole warps, capped at 1024"),
    ],
}
