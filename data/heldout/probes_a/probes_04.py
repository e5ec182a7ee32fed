import ropelab
from numba import cuda, float32, uint64
import math

TABLE_CAPACITY = 128


# the barrier inside the guard: threads past the last pair copy their entries but never reach it.
@cuda.jit(fastmath=True)
def shared_barrier_in_guard(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    k = uint64(cuda.threadIdx.x)
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)
    idx = cuda.grid(1)
    if idx < total_pairs:
        cuda.syncthreads()
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


# different barriers in the two arms of an if/else (copying threads and the others).
@cuda.jit(fastmath=True)
def shared_barriers_both_arms(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    t = uint64(cuda.threadIdx.x)
    if t < n_pairs:
        k = t
        while k < n_pairs:
            table[k] = inv_freq[k]
            k += uint64(cuda.blockDim.x)
        cuda.syncthreads()
    else:
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


# missing barrier: the copy, then straight to reading entries other threads copied.
@cuda.jit(fastmath=True)
def shared_no_barrier(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(TABLE_CAPACITY, float32)
    k = uint64(cuda.threadIdx.x)
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)
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


# the table step written with math.pow still in it (frequency computed, table unused).
@cuda.jit(fastmath=True)
def table_read_still_pow(x, out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(float32(10000.0), -float32(pair) / float32(n_pairs))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# cache row chosen by the token's row number, not its position.
@cuda.jit(fastmath=True)
def cache_by_token_row(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        c = cos_cache[token, pair]
        s = sin_cache[token, pair]
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# wrong pair indexing: the partner float is always a + 1 (ignores `partner`).
@cuda.jit(fastmath=True)
def heads_partner_always_one(x, out, positions, inv_freq, heads, half_dim, n_pairs,
                             total_slots, step, partner):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = i // half_dim
        j = i - head_row * half_dim
        first = uint64(2) * head_row * half_dim
        token = head_row // heads
        if j < n_pairs:
            a = first + j * step
            b = a + uint64(1)
            angle = float32(positions[token]) * inv_freq[j]
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


PROBES = [
    ("04.1", "table_step_still_pow", table_read_still_pow, "fail",
     "the frequency still computed with math.pow; the table is ignored (rule: no pow)"),
    ("04.2", "barrier_in_guard", shared_barrier_in_guard, "fail",
     "syncthreads inside `if idx < total_pairs`: threads of the last block past the end never reach it"),
    ("04.2", "barriers_in_both_arms", shared_barriers_both_arms, "fail",
     "two different syncthreads() in the arms of an if/else: a barrier in divergent code"),
    ("04.2", "shared_race_no_barrier", shared_no_barrier, "fail",
     "no syncthreads between the copy and the reads of entries other threads copied"),
    ("04.3", "cache_row_by_token", cache_by_token_row, "fail",
     "cache row = token number instead of positions[token]"),
    ("04.4", "partner_ignored", heads_partner_always_one, "fail",
     "second float always a + 1: wrong pairs in the half-split layout"),
]
