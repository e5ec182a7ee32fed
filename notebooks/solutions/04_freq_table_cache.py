"""Notebook 04's steps: solutions, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` runs ``SOLUTIONS[step_id]`` (it must pass) and every
function of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment
next to it).
"""

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, uint64


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


SOLUTIONS = {
    "04.1": my_rope_cache,
}

WRONG = {
    "04.1": [
        (row_number_as_position, "instead of the token's position"),
        (cache_transposed, "out of bounds"),
        (caches_swapped, "cos and sin are swapped"),
    ],
}
