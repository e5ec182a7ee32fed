"""Variant 1, ``flat``: a 1-D grid, one thread per pair, div/mod to find (token, pair).

The seed's ``rope_f32_kernel``, translated to Numba with two changes: each token reads its
rotation position from ``positions`` instead of using its row number, and the thread index is
checked against the number of pairs (the seed has no guard, so its last block reads and writes
past the end whenever ``tokens * hidden / 2`` is not a multiple of 256).
"""

import math

from numba import cuda, float32

from ._jit import blocks_for, jitted
from .rotate import rotate

NAME = "flat"
SUMMARY = "1-D grid, one thread per pair; token and pair from idx // n_pairs and idx % n_pairs"
FEATURES = frozenset()  # [tokens, hidden] (one head), interleaved, full rotary
THREADS = 256


def rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)  # int64: the global thread number
    if idx < total_pairs:
        token = idx // n_pairs  # integer division: ~20+ instructions on a GPU
        pair = idx % n_pairs  # and a remainder, paid by every thread
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        # float32() on every operand: a bare literal or int/int division would run in float64.
        exponent = float32(2 * pair) / float32(2 * n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        out[2 * idx], out[2 * idx + 1] = rotate(x0, x1, math.cos(angle), math.sin(angle))


KERNEL = rope_flat
# Argument types as the launcher passes them; the PTX census compiles exactly this.
PTX_SIGNATURE = "void(float32[::1], float32[::1], int32[::1], int64, int64, float32)"


def launch_config(problem, threads_per_block=None):
    threads = threads_per_block or THREADS
    total = problem.tokens * problem.n_pairs
    return blocks_for(total, threads), threads


def launch(problem, x, out, positions, *, fastmath=True, threads_per_block=None, stream=0):
    blocks, threads = launch_config(problem, threads_per_block)
    kernel = jitted(rope_flat, fastmath)
    kernel[blocks, threads, stream](
        x, out, positions, problem.n_pairs, problem.tokens * problem.n_pairs,
        float32(problem.base),
    )
