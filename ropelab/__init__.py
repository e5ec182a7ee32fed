"""ropelab: learn GPU kernel engineering on one operator, RoPE, written with Numba CUDA.

``import ropelab`` first picks the target (a CUDA GPU, or the Numba CUDA simulator when there is
none) before ``numba.cuda`` is imported; see :mod:`ropelab.target`.
"""

from .target import SIMULATED, TARGET, TargetError, describe, format_description  # noqa: I001  (must run first)

from . import kernels, reference, scaling, warp
from .api import check_errors, rope
from .errors import RopeDeviceError, RopeInputError
from .fused import fused_qknorm_rope
from .problem import RopeProblem

__all__ = [
    "SIMULATED",
    "TARGET",
    "RopeDeviceError",
    "RopeInputError",
    "RopeProblem",
    "TargetError",
    "check_errors",
    "describe",
    "format_description",
    "fused_qknorm_rope",
    "kernels",
    "reference",
    "rope",
    "scaling",
]
__version__ = "0.1.0"

warp.install()  # warp shuffles for the simulator (a no-op on a GPU); idempotent
