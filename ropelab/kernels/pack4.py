"""Variant 3, ``pack4``: two adjacent pairs (four floats) per thread.

The seed's ``rope_f32x4_pack_kernel`` loads one ``float4`` per thread and needs ``hidden`` to be
a multiple of 4.  Here each thread owns pairs ``2q`` and ``2q + 1`` of one token's row; when a
row has an odd number of pairs its last thread rotates one pair only (the tail path), so any
even ``hidden`` works.  The two pairs have different frequencies, so a thread still computes two
``pow`` and two sin/cos: packing saves index math and load instructions, not transcendentals.
"""

import math

from numba import cuda, float32

from ._jit import blocks_for, jitted
from .rotate import rotate

NAME = "pack4"
SUMMARY = "1-D grid, two adjacent pairs (4 floats) per thread, tail path for odd pair counts"
FEATURES = frozenset()
THREADS = 256


def rope_pack4(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        token = idx // quads_per_row
        pair = 2 * (idx % quads_per_row)  # first of this thread's two pairs
        i = token * 2 * n_pairs + 2 * pair
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(2 * n_pairs)
        angle = pos / math.pow(base, float32(2 * pair) * inv_hidden)
        out[i], out[i + 1] = rotate(x[i], x[i + 1], math.cos(angle), math.sin(angle))
        if pair + 1 < n_pairs:  # false only for the last thread of a row with odd n_pairs
            angle = pos / math.pow(base, float32(2 * pair + 2) * inv_hidden)
            out[i + 2], out[i + 3] = rotate(x[i + 2], x[i + 3], math.cos(angle), math.sin(angle))


KERNEL = rope_pack4
PTX_SIGNATURE = "void(float32[::1], float32[::1], int32[::1], int64, int64, int64, float32)"


def launch_config(problem, threads_per_block=None):
    threads = threads_per_block or THREADS
    quads_per_row = (problem.n_pairs + 1) // 2
    return blocks_for(problem.tokens * quads_per_row, threads), threads


def launch(problem, x, out, positions, *, fastmath=True, threads_per_block=None, stream=0):
    blocks, threads = launch_config(problem, threads_per_block)
    quads_per_row = (problem.n_pairs + 1) // 2
    jitted(rope_pack4, fastmath)[blocks, threads, stream](
        x, out, positions, problem.n_pairs, quads_per_row, problem.tokens * quads_per_row,
        float32(problem.base),
    )
