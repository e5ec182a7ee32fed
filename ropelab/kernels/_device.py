"""Device helpers shared by the kernels: rotation, a warp's sum, index division by shifts, warp
constants.

``inline="always"`` is not a speed hint here: numba can only compile a kernel that calls a
device function without a CUDA driver (the PTX census runs without one) when the helper is
inlined.
"""

from numba import cuda, uint64

from ..cuda_limits import FULL_MASK, WARP  # noqa: F401  (the kernels import them from here)

# Sentinel shift: "the divisor is not a power of two, divide".
NO_SHIFT = 64


# ex: begin rotate
@cuda.jit(device=True, inline="always")
def rotate(x0, x1, c, s):
    """(x0, x1) rotated by the angle whose cosine and sine are (c, s)."""
    return x0 * c - x1 * s, x0 * s + x1 * c
# ex: end rotate


@cuda.jit(device=True, inline="always")
def warp_sum(v):
    """The sum of ``v`` over the 32 lanes of a warp, in every lane: a butterfly of five
    ``shfl_xor_sync`` steps (16, 8, 4, 2, 1); every lane of the warp must call it."""
    v += cuda.shfl_xor_sync(FULL_MASK, v, 16)
    v += cuda.shfl_xor_sync(FULL_MASK, v, 8)
    v += cuda.shfl_xor_sync(FULL_MASK, v, 4)
    v += cuda.shfl_xor_sync(FULL_MASK, v, 2)
    v += cuda.shfl_xor_sync(FULL_MASK, v, 1)
    return v


def shift_for(d: int) -> int:
    """``log2(d)`` when ``d`` is a power of two, else :data:`NO_SHIFT` (host side, for :func:`quotient`)."""
    d = int(d)
    return d.bit_length() - 1 if d > 0 and d & (d - 1) == 0 else NO_SHIFT


# ex: begin quotient
@cuda.jit(device=True, inline="always")
def quotient(n, d, shift):
    """``n // d`` for unsigned ``n``, ``d``, with ``shift = shift_for(d)``.

    Every operand is uint64 on purpose (see ``flat.py``): a signed ``//`` in Numba is a floor
    division with sign fix-ups.  Head sizes and head counts are nearly always powers of two;
    the host then passes ``log2(d)`` and the thread pays one shift instead of a division (tens
    of instructions even on the 32-bit path).  The branch is uniform across the grid, so it
    costs no divergence; other divisors take the division.
    """
    if shift < uint64(NO_SHIFT):
        return n >> shift
    return n // d
# ex: end quotient
