"""What every NVIDIA GPU ropelab targets allows, written once: the warp, the block and the grid.

Kernels, launch plans, the simulator's shims, the grader and the predictor all read these; none
of them restates a number.
"""

WARP = 32  # threads per warp on every NVIDIA GPU so far
FULL_MASK = 0xFFFFFFFF  # every lane of a warp takes part in a shuffle
# CUDA's per-block thread limit on every GPU since compute capability 2.0.
MAX_THREADS_PER_BLOCK = 1024
# CUDA's grid limits (every GPU since compute capability 3.0): a plan past them is refused on
# the host with a clear error instead of failing inside the driver.
MAX_GRID = (2**31 - 1, 65535, 65535)
