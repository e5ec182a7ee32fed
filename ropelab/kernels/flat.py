"""Variant 1, ``flat``: a 1-D grid, one thread per pair, div/mod to find (token, pair).

The seed's ``rope_f32_kernel``, translated to Numba with two changes: each token reads its
rotation position from ``positions`` instead of using its row number, and the thread index is
checked against the number of pairs (the seed has no guard, so its last block reads and writes
past the end whenever ``tokens * hidden / 2`` is not a multiple of 256).
"""

import math

from numba import cuda, float32, uint64

from ._jit import blocks_for, jitted
from .rotate import rotate

NAME = "flat"
SUMMARY = "1-D grid, one thread per pair; token and pair from idx // n_pairs and idx % n_pairs"
FEATURES = frozenset()  # [tokens, hidden] (one head), interleaved, full rotary
THREADS = 256


def rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)  # int64: the global thread number
    if idx < total_pairs:
        # Unsigned on purpose.  On a signed int64 Numba keeps Python's semantics: floor division
        # and a remainder with sign fix-ups (two divisions), and a wrap-around add on every
        # array index in case it is negative.  Unsigned gives C's semantics: one division (the
        # compiler takes a 32-bit div.u32 path when both operands fit), remainder by
        # multiply-subtract, plain indexing.
        i = uint64(idx)
        token = i // n_pairs  # the division every thread pays: tens of instructions
        pair = i - token * n_pairs  # idx % n_pairs without a second division
        e = i + i  # first element of the pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        # float32() on every operand: a bare literal or int/int division would run in float64.
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        out[e], out[e + uint64(1)] = rotate(x0, x1, math.cos(angle), math.sin(angle))


KERNEL = rope_flat
# Argument types as the launcher passes them; the PTX census compiles exactly this.
PTX_SIGNATURE = "void(float32[::1], float32[::1], int32[::1], uint64, int64, float32)"


def launch_config(problem, threads_per_block=None):
    threads = threads_per_block or THREADS
    total = problem.tokens * problem.n_pairs
    return blocks_for(total, threads), threads


def launch(problem, x, out, positions, *, fastmath=True, threads_per_block=None, stream=0):
    blocks, threads = launch_config(problem, threads_per_block)
    kernel = jitted(rope_flat, fastmath)
    kernel[blocks, threads, stream](
        x, out, positions, uint64(problem.n_pairs), problem.tokens * problem.n_pairs,
        float32(problem.base),
    )
