"""Device helpers shared by the kernels.

``inline="always"`` is not a speed hint here: numba can only compile a kernel that calls a
device function without a CUDA driver (for the PTX census) when the helper is inlined.
"""

from numba import cuda


@cuda.jit(device=True, inline="always")
def rotate(x0, x1, c, s):
    """(x0, x1) rotated by the angle whose cosine and sine are (c, s)."""
    return x0 * c - x1 * s, x0 * s + x1 * c
