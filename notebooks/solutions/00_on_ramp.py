"""The on-ramp's puzzles: a solution for each, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step_id]`` (it must pass) and every
kernel of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment next
to it).  The puzzles (ropelab.grader.steps.onramp): ramp.1 map, ramp.2 zip, ramp.3 guard,
ramp.4 several blocks, ramp.5 the launch, ramp.6 a 2-D grid, ramp.7 the angle table, ramp.8
the interleaved pair swap, ramp.9 the half-split swap through shared memory, ramp.10 a block
reduction, ramp.11 a warp shuffle, ramp.12 a dot product, ramp.13 a tiled Q K^T, ramp.14 a
prefix sum.
"""

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part in a shuffle

# --- ramp.1: map ---------------------------------------------------------------------------


@cuda.jit
def square(x, out):
    i = cuda.threadIdx.x  # one block: the thread's number in it is the float's index
    out[i] = x[i] * x[i]


@cuda.jit
def square_doubled(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i] + x[i]  # twice the float, not its square


@cuda.jit
def square_in_place(x, out):
    i = cuda.threadIdx.x
    x[i] = x[i] * x[i]  # the input overwritten, out never written


@cuda.jit
def square_next(x, out):
    i = cuda.threadIdx.x
    out[i] = x[i + 1] * x[i + 1]  # the last thread reads past the end of x


# --- ramp.2: zip ---------------------------------------------------------------------------


@cuda.jit
def weigh(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[i]


@cuda.jit
def weigh_first(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] * weight[0]  # one weight for every float


@cuda.jit
def weigh_added(x, weight, out):
    i = cuda.threadIdx.x
    out[i] = x[i] + weight[i]


@cuda.jit
def weigh_into_weight(x, weight, out):
    i = cuda.threadIdx.x
    weight[i] = x[i] * weight[i]  # the result stored over an input


# --- ramp.3: guard -------------------------------------------------------------------------


@cuda.jit
def scale_guarded(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n:  # 32 threads, n floats: the threads past the end do nothing
        out[i] = x[i] * scale


@cuda.jit
def scale_unguarded(x, out, scale, n):
    i = cuda.threadIdx.x
    out[i] = x[i] * scale


@cuda.jit
def scale_guard_inclusive(x, out, scale, n):
    i = cuda.threadIdx.x
    if i <= n:  # thread n has no float
        out[i] = x[i] * scale


@cuda.jit
def scale_guard_short(x, out, scale, n):
    i = cuda.threadIdx.x
    if i < n - 1:  # the last float is left out
        out[i] = x[i] * scale


# --- ramp.4: several blocks ----------------------------------------------------------------


@cuda.jit
def scale_blocks(x, out, scale, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # cuda.grid(1)
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_thread_only(x, out, scale, n):
    i = cuda.threadIdx.x  # every block redoes floats 0 .. 7
    if i < n:
        out[i] = x[i] * scale


@cuda.jit
def scale_blocks_unguarded(x, out, scale, n):
    i = cuda.grid(1)
    out[i] = x[i] * scale  # the last block has threads past the end


@cuda.jit
def scale_blocks_added(x, out, scale, n):
    i = cuda.blockIdx.x + cuda.threadIdx.x  # block numbers added, not multiplied by the block size
    if i < n:
        out[i] = x[i] * scale


# --- ramp.5: the launch --------------------------------------------------------------------


def launch_scale(x, out, scale, n):
    threads = 256  # eight warps; any multiple of 32 up to 1024
    blocks = (n + threads - 1) // threads  # rounded up: the last block may be partial
    scale_blocks[blocks, threads](x, out, scale, n)


def launch_scale_rounded_down(x, out, scale, n):
    threads = 256
    scale_blocks[max(n // threads, 1), threads](x, out, scale, n)  # the partial block is lost


def launch_scale_partial_warps(x, out, scale, n):
    threads = 100  # legal, but a block of 100 runs four warps, the last with 4 threads
    scale_blocks[(n + threads - 1) // threads, threads](x, out, scale, n)


def launch_scale_too_wide(x, out, scale, n):
    threads = 2048  # more than a block may hold
    scale_blocks[(n + threads - 1) // threads, threads](x, out, scale, n)


# --- ramp.6: a 2-D grid --------------------------------------------------------------------


@cuda.jit
def weigh_rows(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)  # x: the column, y: the token
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_token_weight(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[t]


@cuda.jit
def weigh_rows_half_guard(x, weight, out, tokens, hidden):
    h, t = cuda.grid(2)
    if h < hidden:  # rows past the last token are not stopped
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


@cuda.jit
def weigh_rows_swapped(x, weight, out, tokens, hidden):
    t, h = cuda.grid(2)  # x is the column, not the token
    if t < tokens and h < hidden:
        out[t * hidden + h] = x[t * hidden + h] * weight[h]


# --- ramp.7: the angle table ---------------------------------------------------------------


@cuda.jit
def angle_table(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if t < tokens and j < pairs:
        out[t * pairs + j] = float32(positions[t]) * inv_freq[j]  # float32: no float64 product


@cuda.jit
def angle_table_row_number(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if t < tokens and j < pairs:
        out[t * pairs + j] = float32(t) * inv_freq[j]  # the row, not the token's position


@cuda.jit
def angle_table_swapped(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    if t < tokens and j < pairs:
        out[t * pairs + j] = float32(positions[j]) * inv_freq[t]


@cuda.jit
def angle_table_unguarded(positions, inv_freq, out, tokens, pairs):
    j, t = cuda.grid(2)
    out[t * pairs + j] = float32(positions[t]) * inv_freq[j]


# --- ramp.8: the interleaved pair swap (GPT-J) --------------------------------------------


@cuda.jit
def swap_pairs(x, out):
    i = cuda.grid(1)  # one thread per float; rows are whole blocks, so no guard
    if i % 2 == 0:
        out[i] = -x[i + 1]  # a pair's first float
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_other_sign(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = x[i + 1]
    else:
        out[i] = -x[i - 1]


@cuda.jit
def swap_pairs_unsigned(x, out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = x[i + 1]
    else:
        out[i] = x[i - 1]


@cuda.jit
def swap_pairs_half_split(x, out):
    j = cuda.threadIdx.x
    h = cuda.blockDim.x // 2
    base = cuda.blockIdx.x * cuda.blockDim.x
    if j < h:
        out[base + j] = -x[base + j + h]
    else:
        out[base + j] = x[base + j - h]


# --- ramp.9: the half-split swap through shared memory (NeoX) -----------------------------


@cuda.jit
def rotate_half(x, out):
    row = cuda.shared.array(64, float32)  # one per block: this token's row
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    h = n // 2
    start = cuda.blockIdx.x * n
    row[j] = x[start + j]
    cuda.syncthreads()  # every float of the row is stored before any is read
    if j < h:
        out[start + j] = -row[j + h]
    else:
        out[start + j] = row[j - h]


@cuda.jit
def rotate_half_no_barrier(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    h = n // 2
    start = cuda.blockIdx.x * n
    row[j] = x[start + j]
    if j < h:  # the partner may not have stored its float yet
        out[start + j] = -row[j + h]
    else:
        out[start + j] = row[j - h]


@cuda.jit
def rotate_half_interleaved(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    start = cuda.blockIdx.x * cuda.blockDim.x
    row[j] = x[start + j]
    cuda.syncthreads()
    if j % 2 == 0:  # GPT-J's pairs, not NeoX's
        out[start + j] = -row[j + 1]
    else:
        out[start + j] = row[j - 1]


@cuda.jit
def rotate_half_sign_second(x, out):
    row = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    n = cuda.blockDim.x
    h = n // 2
    start = cuda.blockIdx.x * n
    row[j] = x[start + j]
    cuda.syncthreads()
    if j < h:
        out[start + j] = row[j + h]
    else:
        out[start + j] = -row[j - h]


# --- ramp.10: a block reduction ------------------------------------------------------------


@cuda.jit
def row_sum_squares(x, out):
    squares = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * cuda.blockDim.x + j]
    squares[j] = v * v
    cuda.syncthreads()  # all squares stored before thread 0 reads them
    if j == 0:
        total = float32(0)
        for k in range(cuda.blockDim.x):
            total += squares[k]
        out[cuda.blockIdx.x] = total


@cuda.jit
def row_sum_squares_no_barrier(x, out):
    squares = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * cuda.blockDim.x + j]
    squares[j] = v * v
    if j == 0:  # the other threads' squares may not be there yet
        total = float32(0)
        for k in range(cuda.blockDim.x):
            total += squares[k]
        out[cuda.blockIdx.x] = total


@cuda.jit
def row_sum_unsquared(x, out):
    values = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    values[j] = x[cuda.blockIdx.x * cuda.blockDim.x + j]  # the float, not its square
    cuda.syncthreads()
    if j == 0:
        total = float32(0)
        for k in range(cuda.blockDim.x):
            total += values[k]
        out[cuda.blockIdx.x] = total


@cuda.jit
def row_sum_squares_tree_stops_early(x, out):
    squares = cuda.shared.array(64, float32)
    j = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * cuda.blockDim.x + j]
    squares[j] = v * v
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 1:  # one halving short: squares[1] is never added to squares[0]
        if j < stride:
            squares[j] += squares[j + stride]
        cuda.syncthreads()
        stride //= 2
    if j == 0:
        out[cuda.blockIdx.x] = squares[0]


# --- ramp.11: a warp shuffle ---------------------------------------------------------------


@cuda.jit
def warp_sum(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:  # the butterfly: after the five steps every lane holds the warp's sum
        v += cuda.shfl_xor_sync(FULL_MASK, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_down(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 0:
        v += cuda.shfl_down_sync(FULL_MASK, v, m)  # the sum gathers in lane 0 only
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_four_steps(x, out):
    i = cuda.grid(1)
    v = x[i]
    m = 16
    while m > 1:  # stops before m = 1
        v += cuda.shfl_xor_sync(FULL_MASK, v, m)
        m //= 2
    out[i] = v


@cuda.jit
def warp_sum_no_shuffle(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


# --- ramp.12: a dot product ----------------------------------------------------------------


@cuda.jit
def dot_rows(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_short(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d - 1):  # the last product is left out
            total += q[t * d + i] * k[t * d + i]
        out[t] = total


@cuda.jit
def dot_rows_by_columns(q, k, out, tokens, d):
    t = cuda.grid(1)
    if t < tokens:
        total = float32(0)
        for i in range(d):
            total += q[i * tokens + t] * k[i * tokens + t]  # column order
        out[t] = total


@cuda.jit
def dot_rows_unguarded(q, k, out, tokens, d):
    t = cuda.grid(1)
    total = float32(0)
    for i in range(d):
        total += q[t * d + i] * k[t * d + i]
    out[t] = total


# --- ramp.13: a tiled Q K^T ----------------------------------------------------------------
# One shared array holds both tiles: tiles[0] the block's 8 queries, tiles[1] its 8 keys.


@cuda.jit
def qk_scores(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * 8  # this block's first query
    n0 = cuda.blockIdx.x * 8  # and first key
    tiles[0, ty, tx] = q[(m0 + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(n0 + ty) * 8 + tx]
    cuda.syncthreads()  # both tiles whole before any thread reads them
    total = float32(0)
    for i in range(8):
        total += tiles[0, ty, i] * tiles[1, tx, i]
    out[(m0 + ty) * tokens + n0 + tx] = total


@cuda.jit
def qk_scores_no_barrier(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * 8
    n0 = cuda.blockIdx.x * 8
    tiles[0, ty, tx] = q[(m0 + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(n0 + ty) * 8 + tx]
    total = float32(0)
    for i in range(8):  # other threads' floats may not be stored yet
        total += tiles[0, ty, i] * tiles[1, tx, i]
    out[(m0 + ty) * tokens + n0 + tx] = total


@cuda.jit
def qk_scores_transposed(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    m0 = cuda.blockIdx.y * 8
    n0 = cuda.blockIdx.x * 8
    tiles[0, ty, tx] = q[(m0 + ty) * 8 + tx]
    tiles[1, ty, tx] = k[(n0 + ty) * 8 + tx]
    cuda.syncthreads()
    total = float32(0)
    for i in range(8):
        total += tiles[0, ty, i] * tiles[1, tx, i]
    out[(n0 + tx) * tokens + m0 + ty] = total  # query m's score stored in key m's row


@cuda.jit
def qk_scores_first_tile(q, k, out, tokens):
    tiles = cuda.shared.array((2, 8, 8), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tiles[0, ty, tx] = q[ty * 8 + tx]  # every block loads the first 8 queries and keys
    tiles[1, ty, tx] = k[ty * 8 + tx]
    cuda.syncthreads()
    total = float32(0)
    for i in range(8):
        total += tiles[0, ty, i] * tiles[1, tx, i]
    out[(cuda.blockIdx.y * 8 + ty) * tokens + cuda.blockIdx.x * 8 + tx] = total


# --- ramp.14: a prefix sum -----------------------------------------------------------------


@cuda.jit
def seq_offsets(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:  # n + 1 offsets: out[n] is the total
        total = 0
        for j in range(i):  # the sequences before sequence i
            total += lengths[j]
        out[i] = total


@cuda.jit
def seq_offsets_inclusive(lengths, out, n):
    i = cuda.threadIdx.x
    if i <= n:
        total = 0
        for j in range(i + 1):  # sequence i counted too: thread n reads lengths[n]
            total += lengths[j]
        out[i] = total


@cuda.jit
def seq_offsets_no_total(lengths, out, n):
    i = cuda.threadIdx.x
    if i < n:  # out[n], the total, is never written
        total = 0
        for j in range(i):
            total += lengths[j]
        out[i] = total


@cuda.jit
def seq_offsets_unguarded(lengths, out, n):
    i = cuda.threadIdx.x
    total = 0
    for j in range(min(i, n)):
        total += lengths[j]
    out[i] = total  # 32 threads, n + 1 offsets


SOLUTIONS = {
    "ramp.1": square,
    "ramp.2": weigh,
    "ramp.3": scale_guarded,
    "ramp.4": scale_blocks,
    "ramp.5": launch_scale,
    "ramp.6": weigh_rows,
    "ramp.7": angle_table,
    "ramp.8": swap_pairs,
    "ramp.9": rotate_half,
    "ramp.10": row_sum_squares,
    "ramp.11": warp_sum,
    "ramp.12": dot_rows,
    "ramp.13": qk_scores,
    "ramp.14": seq_offsets,
}

WRONG = {
    "ramp.1": [
        (square_doubled, "doubles the float"),
        (square_in_place, "wrote into its input x"),
        (square_next, "out of bounds"),
    ],
    "ramp.2": [
        (weigh_first, "weight[0]"),
        (weigh_added, "added instead of multiplied"),
        (weigh_into_weight, "wrote into its input weight"),
    ],
    "ramp.3": [
        (scale_unguarded, "guard with if i < n"),
        (scale_guard_inclusive, "out of bounds"),
        (scale_guard_short, "never written"),
    ],
    "ramp.4": [
        (scale_blocks_thread_only, "float 8 (block 1, thread 0)"),
        (scale_blocks_unguarded, "out of bounds"),
        (scale_blocks_added, "float 10 (block 1, thread 2)"),
    ],
    "ramp.5": [
        (launch_scale_rounded_down, "never written"),
        (launch_scale_too_wide, "illegal launch"),
        (launch_scale_partial_warps, "not a multiple of 32"),
    ],
    "ramp.6": [
        (weigh_rows_token_weight, "weight read with the token t"),
        (weigh_rows_half_guard, "guard both"),
        (weigh_rows_swapped, "token 0, float 4"),
    ],
    "ramp.7": [
        (angle_table_row_number, "the row number t was used as the position"),
        (angle_table_swapped, "index it with t, the row"),
        (angle_table_unguarded, "out of bounds"),
    ],
    "ramp.8": [
        (swap_pairs_other_sign, "the minus sign is on the wrong float"),
        (swap_pairs_unsigned, "without the minus sign"),
        (swap_pairs_half_split, "half-split (NeoX) swap"),
    ],
    "ramp.9": [
        (rotate_half_no_barrier, "race"),
        (rotate_half_interleaved, "interleaved (GPT-J) swap"),
        (rotate_half_sign_second, "the minus sign belongs to the first half"),
    ],
    "ramp.10": [
        (row_sum_squares_no_barrier, "race"),
        (row_sum_unsquared, "not of their squares"),
        (row_sum_squares_tree_stops_early, "adds every float of the row"),
    ],
    "ramp.11": [
        (warp_sum_down, "only lane 0 holds the whole sum"),
        (warp_sum_four_steps, "one butterfly step is missing"),
        (warp_sum_no_shuffle, "no shuffle added the others'"),
    ],
    "ramp.12": [
        (dot_rows_short, "one term short"),
        (dot_rows_by_columns, "walks down the columns"),
        (dot_rows_unguarded, "guard with if t < tokens"),
    ],
    "ramp.13": [
        (qk_scores_no_barrier, "race"),
        (qk_scores_transposed, "transposed"),
        (qk_scores_first_tile, "query 0, key 8"),
    ],
    "ramp.14": [
        (seq_offsets_inclusive, "never j = i"),
        (seq_offsets_no_total, "never written"),
        (seq_offsets_unguarded, "out of bounds"),
    ],
}
