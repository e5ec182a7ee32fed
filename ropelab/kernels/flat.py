"""Variant 1, ``flat``: a 1-D grid, one thread per pair, div/mod to find (token, pair).

The seed's ``rope_f32_kernel``, translated to Numba with two changes: each token reads its
rotation position from ``positions`` instead of using its row number, and the thread index is
checked against the number of pairs (the seed has no guard, so its last block reads and writes
past the end whenever ``tokens * hidden / 2`` is not a multiple of 256).
"""

import math

import numpy as np
from numba import cuda, float32, uint64

from .plan import ROPE_ARRAYS, Plan, Variant, blocks_for
from ._device import rotate

NAME = "flat"
SUMMARY = "1-D grid, one thread per pair; token and pair from idx // n_pairs and idx % n_pairs"
FEATURES = frozenset()  # [tokens, hidden] (one head), interleaved, full rotary
THREADS = 256


# ex: begin rope_flat
def rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)  # int64: the global thread number
    if idx < total_pairs:
        # Unsigned on purpose.  On a signed int64 Numba keeps Python's semantics: floor division
        # and a remainder with sign fix-ups (two divisions), and a wrap-around add on every
        # array index in case it is negative.  Unsigned gives C's semantics: one division (the
        # compiler takes a 32-bit div.u32 path when both operands fit), remainder by
        # multiply-subtract, plain indexing.
        # ex: begin flat_index
        i = uint64(idx)
        token = i // n_pairs  # the division every thread pays: tens of instructions
        pair = i - token * n_pairs  # idx % n_pairs without a second division
        # ex: end flat_index
        e = i + i  # first element of the pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        # float32() on every operand: a bare literal or int/int division would run in float64.
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        out[e], out[e + uint64(1)] = rotate(x0, x1, math.cos(angle), math.sin(angle))
# ex: end rope_flat


KERNEL = rope_flat


def launch_config(problem, threads_per_block=None):
    """(blocks, threads): one thread per pair, 256 threads per block unless told otherwise."""
    threads = threads_per_block or THREADS
    total = problem.tokens * problem.n_pairs
    return blocks_for(total, threads), threads


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    blocks, threads = launch_config(problem, threads)
    # uint64 n_pairs keeps the index math unsigned; the total stays int64 because it is
    # compared with the signed cuda.grid(1).
    return Plan(rope_flat, fastmath, blocks, threads, ROPE_ARRAYS,
                scalars=(np.uint64(problem.n_pairs), np.int64(problem.tokens * problem.n_pairs),
                         np.float32(problem.base)))


VARIANT = Variant(NAME, SUMMARY, FEATURES, plan, KERNEL)
