"""ropelab: learn GPU kernel engineering on one operator, RoPE, written with Numba CUDA.

``import ropelab`` first picks the target (a CUDA GPU, or the Numba CUDA simulator when there is
none) before ``numba.cuda`` is imported; see :mod:`ropelab.target`.
"""

from .target import SIMULATED, TARGET, TargetError, describe, format_description  # noqa: I001  (must run first)

from . import kernels, reference
from .api import rope
from .problem import RopeInputError, RopeProblem

__all__ = [
    "SIMULATED",
    "TARGET",
    "RopeInputError",
    "RopeProblem",
    "TargetError",
    "describe",
    "format_description",
    "kernels",
    "reference",
    "rope",
]
__version__ = "0.1.0"
