"""The CUDA C++ sources of the baselines, kept as ``.cu`` files in this package (package data,
read with :mod:`importlib.resources`, so an installed wheel has them too)."""

from __future__ import annotations

from importlib import resources


def read(name: str) -> str:
    """The text of one ``.cu`` file of this package."""
    return resources.files(__package__).joinpath(name).read_text()


CUDA_SOURCE = read("rope_kernels.cu")  # the seed-style plain RoPE kernels and an empty kernel
FUSED_TWIN_SOURCE = read("fused_twin.cu")  # the fused kernel's twin, see ropelab.measure.baselines.twin

# numba variant -> its CUDA C++ twin in these sources (same algorithm; the bench times both)
TWINS = {"flat": "cuda_flat", "pack4": "cuda_float4", "fused_qknorm_rope": "cuda_fused"}
