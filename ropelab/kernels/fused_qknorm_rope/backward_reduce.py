"""The second stage of the fused backward's two-stage weight gradient: the fixed-order sum of
the main kernel's per-block partial rows (:mod:`.backward`), one launch that gives the same bits
on every run.  Its plan is made beside the main kernel's in :mod:`.backward_host`."""

from __future__ import annotations

from functools import cache

from numba import cuda, float32, uint32

from .._device import WARP
from ..words16 import ELEMENT_CODECS

REDUCE_PHASES = 32  # the reduce kernel's rows per column: at most a block of 32 x 32 threads


def make_reduce(phases: int = 32, storage: str = "float32"):
    """The second stage for blocks of ``phases`` x 32 threads (``phases`` <= :data:`REDUCE_PHASES`),
    writing ``dw`` in ``storage``: float32, or the weights' 16-bit dtype (each float32 sum
    rounded once to nearest even, bfloat16 as uint16 bits), so that a caller who needs the
    gradients in the weights' dtype (autograd) gets them without a cast launch per weight.

    The height is a compile-time constant, so both loops unroll: read from ``blockDim`` at run
    time it cost the two-stage backward about 4 us on the H200 (75.9 -> 79.8 us, flux_1024
    GPT-J, data/bench_backward/ 15:52 vs 17:54).  The launcher builds the 32-row kernel, or one
    row per partial row when there are fewer (the same order, so the same bits, without idle
    thread rows: on the simulator each one is a Python thread).
    """
    return _make_reduce(phases, storage)  # one kernel object per build, however it is asked for


@cache
def _make_reduce(phases: int, storage: str):
    if not 1 <= phases <= REDUCE_PHASES:
        raise ValueError(f"phases must be 1 .. {REDUCE_PHASES}, got {phases}")
    PHASES = phases
    store = ELEMENT_CODECS[storage][1]  # float32 passes through

    # ex: begin backward_reduce
    def reduce_partials(partial, dw):
        """Second stage: ``dw[c] = sum over blocks b of partial[b * len(dw) + c]``, in a fixed
        order.

        A block of PHASES x 32 threads takes 32 neighbouring columns (coalesced reads); thread
        row ``t`` sums rows ``t, t + PHASES, ...`` and thread row 0 adds the PHASES results in
        order.  Nothing depends on timing, so every run gives the same bits.  The float32 sum
        is stored as ``dw``'s build takes it (``store``: as it is, or rounded to 16 bits).
        """
        width = uint32(dw.shape[0])
        rows = uint32(partial.shape[0]) // width
        lane = uint32(cuda.threadIdx.x) & uint32(WARP - 1)
        phase = uint32(cuda.threadIdx.x) >> uint32(5)
        col = uint32(cuda.blockIdx.x) * uint32(WARP) + lane
        phase_sums = cuda.shared.array((PHASES, WARP), float32)
        total = float32(0.0)
        if col < width:
            b = phase
            while b < rows:
                total += partial[b * width + col]
                b += uint32(PHASES)
        phase_sums[phase, lane] = total
        cuda.syncthreads()
        if phase == uint32(0) and col < width:
            total = float32(0.0)
            for t in range(PHASES):
                total += phase_sums[t, lane]
            dw[col] = store(total)
    # ex: end backward_reduce

    return reduce_partials


reduce_partials = make_reduce(REDUCE_PHASES)  # the launcher's kernel at every real size
