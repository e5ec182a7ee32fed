"""ropelab: learn GPU kernel engineering on one operator, RoPE, written with Numba CUDA.

``import ropelab`` first picks the target (a CUDA GPU, or the Numba CUDA simulator when there is
none) before ``numba.cuda`` is imported; see :mod:`ropelab.target`.
"""

from .target import (SIMULATED, TARGET, RopelabWarning, SimulatorWarning, TargetError,  # noqa: I001
                     announce, describe, format_description)  # (must run first)

from . import fp8, kernels, reference, scaling, sim, tables
from .errors import RopeDeviceError, RopeInputError
from .ops.call import check_errors
from .ops.fused import fused_qknorm_rope
from .ops.fused_backward import fused_qknorm_rope_backward
from .ops.fused_kv import fused_qknorm_rope_kv
from .ops.qk import rope_qk
from .ops.rope import rope
from .ops.streams import RawStream
from .problem import RopeProblem

__all__ = [
    "SIMULATED",
    "TARGET",
    "RawStream",
    "RopeDeviceError",
    "RopeInputError",
    "RopeProblem",
    "RopelabWarning",
    "SimulatorWarning",
    "TargetError",
    "check_errors",
    "describe",
    "fp8",
    "format_description",
    "fused_qknorm_rope",
    "fused_qknorm_rope_backward",
    "fused_qknorm_rope_kv",
    "kernels",
    "reference",
    "rope",
    "rope_qk",
    "scaling",
    "sim",
    "tables",
]
__version__ = "0.1.0"

sim.install()  # warp shuffles and a once-rounded fma for the simulator (a no-op on a GPU)
announce(sim.ARITHMETIC)  # a short SimulatorWarning on the simulator, unless target.quiet()
