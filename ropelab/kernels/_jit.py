"""One compiled dispatcher per (kernel function, fastmath) pair, created on first use.

Kernel modules define plain Python functions and never decorate them with an eager signature:
importing a kernel module must not need a CUDA driver (the PTX census imports them in a
driver-less child process) and must work under the simulator.
"""

from functools import cache

from numba import cuda


@cache
def jitted(fn, fastmath: bool = True):
    return cuda.jit(fastmath=fastmath)(fn)


def blocks_for(work_items: int, threads: int) -> int:
    """Enough blocks of ``threads`` threads to cover ``work_items`` (ceil division)."""
    return (work_items + threads - 1) // threads
