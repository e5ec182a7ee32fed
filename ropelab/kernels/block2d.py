"""Variant 2, ``block2d``: one block per token, one thread per pair; no division at all.

The seed's ``rope_f32_v2_kernel``: ``blockIdx.x`` is the token and ``threadIdx.x`` the pair, so
the coordinates come for free.  The seed launches ``hidden / 2`` threads per block and fails for
``hidden > 2048`` (CUDA allows at most 1024 threads per block).  Here the kernel strides: a
thread handles pairs ``tid, tid + blockDim, ...``.  With ``hidden <= 2048`` every thread runs
the loop once, exactly like the seed; wider rows still work.  Asking for more than 1024 threads
per block raises :class:`~ropelab.problem.RopeInputError` before launch.
"""

import math

from numba import cuda, float32, uint64

from ..problem import WARP, MAX_THREADS_PER_BLOCK
from .rotate import rotate
from ._jit import jitted

NAME = "block2d"
SUMMARY = "one block per token, threadIdx.x = pair (stride loop past 1024 threads); no div/mod"
FEATURES = frozenset()


def rope_block2d(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    # Unsigned index math (see flat.py): no negative-index wrap-around on every access.
    row = uint64(token) * (n_pairs + n_pairs)  # first element of this token's row
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        out[i], out[i + uint64(1)] = rotate(x[i], x[i + uint64(1)], math.cos(angle), math.sin(angle))
        pair += uint64(cuda.blockDim.x)


KERNEL = rope_block2d
PTX_SIGNATURE = "void(float32[::1], float32[::1], int32[::1], uint64, float32)"


def launch_config(problem, threads_per_block=None):
    if threads_per_block is None:
        # One thread per pair as in the seed, rounded up to whole warps, capped at the limit.
        threads = min(-(-problem.n_pairs // WARP) * WARP, MAX_THREADS_PER_BLOCK)
    else:
        threads = threads_per_block
    return problem.tokens, threads


def launch(problem, x, out, positions, *, fastmath=True, threads_per_block=None, stream=0):
    blocks, threads = launch_config(problem, threads_per_block)
    jitted(rope_block2d, fastmath)[blocks, threads, stream](
        x, out, positions, uint64(problem.n_pairs), float32(problem.base)
    )
