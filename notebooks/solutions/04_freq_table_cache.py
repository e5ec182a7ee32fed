"""The ladder of notebook 04 (tables instead of pow): a solution for every step, and wrong
attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step]`` (it must pass) and every
kernel of ``WRONG[step]`` (each must be rejected with a verdict containing the fragment next to
it).  The steps climb: read a host frequency table; stage that table in shared memory once per
block; read cos and sin from a cache instead of computing them; the whole freq_table variant
(heads, both pair layouts, a partial rotation) with its launch.
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, uint64

TABLE_CAPACITY = 128  # the starter's shared table: pairs a row may have in the step-2 kernel


# --- step 1: read a host frequency table ---------------------------------------------------

@cuda.jit(fastmath=True)
def rope_table_read(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        # float32(...) first: int32 times float32 would be computed in float64
        angle = float32(positions[token]) * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def pow_kept(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        # right values, but the table is ignored and the pow is back
        f = math.pow(float32(10000.0), float32(-2.0) * float32(pair) / float32(n_pairs + n_pairs))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def int_times_float(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = positions[token] * inv_freq[pair]  # int32 * float32: a float64 product
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def row_number_as_position_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = float32(token) * inv_freq[pair]  # the row, not the token's position
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def table_unguarded(x, out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))  # every thread of the last block runs the body
    token = i // n_pairs
    pair = i - token * n_pairs
    e = i + i
    angle = float32(positions[token]) * inv_freq[pair]
    c = math.cos(angle)
    s = math.sin(angle)
    x0 = x[e]
    x1 = x[e + uint64(1)]
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x0 * s + x1 * c


# --- step 2: the table staged in shared memory, once per block ----------------------------

@cuda.jit(fastmath=True)
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)  # one copy per block
    k = uint64(cuda.threadIdx.x)
    while k < n_pairs:  # the block's threads share the copy, blockDim entries at a time
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)
    cuda.syncthreads()  # every entry is in place before any thread reads one
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def no_barrier(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    k = uint64(cuda.threadIdx.x)
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)
    # no cuda.syncthreads(): a thread may read table[pair] before its owner wrote it
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def one_entry_per_thread(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    k = uint64(cuda.threadIdx.x)
    if k < n_pairs:  # one entry each: a row with more pairs than threads keeps a hole
        table[k] = inv_freq[k]
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def staged_past_the_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    k = uint64(cuda.threadIdx.x)
    while k <= n_pairs:  # one entry too many: inv_freq has n_pairs entries
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def barrier_inside_the_guard(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    idx = cuda.grid(1)
    if idx < total_pairs:  # threads past the last pair skip the copy and the barrier
        k = uint64(cuda.threadIdx.x)
        while k < n_pairs:
            table[k] = inv_freq[k]
            k += uint64(cuda.blockDim.x)
        cuda.syncthreads()  # not every thread of the last block comes here
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = float32(positions[token]) * table[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# --- step 3: the cos/sin cache lookup (the exercise this notebook had before the ladder) ----

@cuda.jit(fastmath=True)
def my_rope_cache(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        pos = uint64(positions[token])  # the cache's row: positions are never negative here
        c = cos_cache[pos, pair]
        s = sin_cache[pos, pair]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def row_number_as_position(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        c = cos_cache[token, pair]  # the row number, not the token's position
        s = sin_cache[token, pair]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def cache_transposed(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        pos = uint64(positions[token])
        c = cos_cache[pair, pos]  # indices the wrong way round
        s = sin_cache[pair, pos]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def caches_swapped(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        pos = uint64(positions[token])
        c = sin_cache[pos, pair]
        s = cos_cache[pos, pair]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# --- step 4: the freq_table variant (heads, both layouts, partial rotation) and its launch --

@cuda.jit(fastmath=True)
def rope_freq_table_heads(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                          step, partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim  # token * heads + head
        j = i - head_row * half_dim  # this thread's slot of the head
        first = head_row * (half_dim + half_dim)  # the head's first float
        if j < n_pairs:  # a rotated pair: (2j, 2j+1) or (j, j + n_pairs)
            a = first + j * step
            b = a + partner
            angle = float32(positions[head_row // heads]) * inv_freq[j]
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
        else:  # past the rotated dims: two floats copied unchanged
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


@cuda.jit(fastmath=True)
def no_pass_through(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots, step,
                    partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = head_row * (half_dim + half_dim)
        if j < n_pairs:  # the slots past the rotated pairs do nothing
            a = first + j * step
            b = a + partner
            angle = float32(positions[head_row // heads]) * inv_freq[j]
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def position_of_the_head_row(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                             step, partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = head_row * (half_dim + half_dim)
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            angle = float32(positions[head_row]) * inv_freq[j]  # a head's row is not a token
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


@cuda.jit(fastmath=True)
def layout_ignored(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots, step,
                   partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = head_row * (half_dim + half_dim)
        if j < n_pairs:
            a = first + j + j  # always interleaved: step and partner unused
            b = a + uint64(1)
            angle = float32(positions[head_row // heads]) * inv_freq[j]
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]


def launch_freq_table(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    """One thread per slot (head_dim / 2 slots per head), 128 threads a block."""
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    threads = 128
    blocks = (total_slots + threads - 1) // threads
    step, partner = (2, 1) if interleave else (1, n_pairs)
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total_slots, uint64(step), uint64(partner))


def launch_pairs_only(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * n_pairs  # only the rotated slots: the copies are lost
    threads = 128
    blocks = (total_slots + threads - 1) // threads
    step, partner = (2, 1) if interleave else (1, n_pairs)
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total_slots, uint64(step), uint64(partner))


def launch_partner_of_the_head(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    threads = 128
    blocks = (total_slots + threads - 1) // threads
    step, partner = (2, 1) if interleave else (1, half_dim)  # half the head, not of the rotated dims
    rope_freq_table_heads[blocks, threads](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total_slots, uint64(step), uint64(partner))


def launch_one_block(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    step, partner = (2, 1) if interleave else (1, n_pairs)
    # every slot in one block: fine for small shapes, illegal past 1024 threads
    rope_freq_table_heads[1, total_slots](
        x, out, positions, inv_freq, uint64(heads), uint64(half_dim), uint64(n_pairs),
        total_slots, uint64(step), uint64(partner))


def launch_heads_as_int(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    half_dim = head_dim // 2
    n_pairs = inv_freq.size
    total_slots = tokens * heads * half_dim
    threads = 128
    blocks = (total_slots + threads - 1) // threads
    step, partner = (2, 1) if interleave else (1, n_pairs)
    rope_freq_table_heads[blocks, threads](  # heads as given: an int64, a signed division
        x, out, positions, inv_freq, heads, uint64(half_dim), uint64(n_pairs), total_slots,
        uint64(step), uint64(partner))


SOLUTIONS = {
    "04.1": rope_table_read,
    "04.2": rope_shared_table,
    "04.3": my_rope_cache,
    "04.4": rope_freq_table_heads,
    "04.5": launch_freq_table,
}

WRONG = {
    "04.1": [(pow_kept, "pow"), (int_times_float, "float64 instructions"),
             (row_number_as_position_table, "instead of the token's position"),
             (table_unguarded, "out of bounds")],
    "04.2": [(no_barrier, "race"), (one_entry_per_thread, "pair 64 [case 5x130]"),
             (staged_past_the_table, "out of bounds"),
             (barrier_inside_the_guard, "returned without reaching it")],
    "04.3": [(row_number_as_position, "instead of the token's position"),
             (cache_transposed, "out of bounds"), (caches_swapped, "cos and sin are swapped")],
    "04.4": [(no_pass_through, "never written"), (position_of_the_head_row, "positions[head_row // heads]"),
             (layout_ignored, "other layout")],
    "04.5": [(launch_pairs_only, "never written"), (launch_partner_of_the_head, "head 0, float 0 [case 3x2x10"),
             (launch_one_block, "1024"),
             (launch_heads_as_int,
              "(heads) is int64 (a Python int), but the contract wants uint64")],
}
