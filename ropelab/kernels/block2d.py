"""Variant 2, ``block2d``: one block per token, one thread per pair; no division at all.

The seed's ``rope_f32_v2_kernel``: ``blockIdx.x`` is the token and ``threadIdx.x`` the pair, so
the coordinates come for free.  The seed launches ``hidden / 2`` threads per block and fails for
``hidden > 2048`` (CUDA allows at most 1024 threads per block).  Here the kernel strides: a
thread handles pairs ``tid, tid + blockDim, ...``.  With ``hidden <= 2048`` every thread runs
the loop once, exactly like the seed; wider rows still work.  Asking for more than 1024 threads
per block raises :class:`~ropelab.problem.RopeInputError` before launch.
"""

import math

import numpy as np
from numba import cuda, float32, uint64

from ..problem import MAX_THREADS_PER_BLOCK
from ._device import WARP, rotate
from .plan import ROPE_ARRAYS, Plan, Variant

NAME = "block2d"
SUMMARY = "one block per token, threadIdx.x = pair (stride loop past 1024 threads); no div/mod"
FEATURES = frozenset()


# ex: begin rope_block2d
def rope_block2d(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    # Unsigned index math (see flat.py): no negative-index wrap-around on every access.
    row = uint64(token) * (n_pairs + n_pairs)  # first element of this token's row
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    # ex: begin block2d_stride_loop
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        out[i], out[i + uint64(1)] = rotate(x[i], x[i + uint64(1)], math.cos(angle), math.sin(angle))
        pair += uint64(cuda.blockDim.x)
    # ex: end block2d_stride_loop
# ex: end rope_block2d


KERNEL = rope_block2d


def launch_config(problem, threads_per_block=None):
    """(blocks, threads): one block per token; one thread per pair up to CUDA's 1024 limit."""
    if threads_per_block is None:
        # One thread per pair as in the seed, rounded up to whole warps, capped at the limit.
        threads = min(-(-problem.n_pairs // WARP) * WARP, MAX_THREADS_PER_BLOCK)
    else:
        threads = threads_per_block
    return problem.tokens, threads


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    blocks, threads = launch_config(problem, threads)
    return Plan(rope_block2d, fastmath, blocks, threads, ROPE_ARRAYS,
                scalars=(np.uint64(problem.n_pairs), np.float32(problem.base)))


VARIANT = Variant(NAME, SUMMARY, FEATURES, plan, KERNEL)
