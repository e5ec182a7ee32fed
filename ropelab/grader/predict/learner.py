"""A step's launches, as the GPU timing makes them, seen from a machine without a GPU.

``verdict.time()`` on a GPU launches a kernel step's kernel with the timing case's grid and
block, and calls a launch step's function, which launches whatever it likes.  To predict
that time without a GPU this module finds the same launches:

- a kernel step: one launch, the case's grid and block, its arguments as the timer passes
  them (device arrays of the case's inputs, ``out`` of the expected size, NumPy scalars);
- a launch step: the learner's function is called on the simulator with the case's inputs
  as device arrays and its scalars as plain Python numbers (what the timer passes), while
  every ``kernel[grid, block]`` is *recorded and not run* (the timing case is far too large
  for the simulator): each launch's kernel, configuration and arguments.

For each launch: the kernel's signature from its arguments' types (an int from the host is an
int64, as numba types it), the bytes of its array arguments, and its counts
(:mod:`.compiled`).  :func:`step_features` returns one feature dict per launch
(:func:`.features.launch_features`), what :func:`.model.predict` takes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from .features import dims, launch_features


class NotPredictable(RuntimeError):
    """The launches cannot be found or described (a ``forall``, a closure kernel ...)."""


@dataclass
class Launch:
    kernel: object  # the @cuda.jit object (simulator or GPU)
    grid: tuple
    block: tuple
    shared: int = 0
    args: list = field(default_factory=list)
    warm: float = 0.0  # share of its array bytes an earlier launch of the step was given


@dataclass(frozen=True)
class ArrayInfo:
    """What the prediction needs of an array argument (type, shape, strides), without its
    data: a recorded launch keeps no copy of the timing case's arrays."""

    dtype: np.dtype
    shape: tuple
    strides: tuple
    contiguous: bool

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.itemsize

    def is_c_contiguous(self) -> bool:
        return self.contiguous


def light(value):
    """An :class:`ArrayInfo` for an array argument (host, simulator or GPU), else the value."""
    arr = _array(value)
    if arr is not None:
        return ArrayInfo(arr.dtype, tuple(arr.shape), tuple(arr.strides),
                         bool(arr.flags.c_contiguous))
    if hasattr(value, "dtype") and hasattr(value, "shape") and not isinstance(value, np.generic):
        dtype = np.dtype(value.dtype)
        shape = tuple(int(n) for n in value.shape)
        strides = tuple(getattr(value, "strides", ()) or ())
        contiguous = bool(getattr(value, "is_c_contiguous", lambda: True)())
        return ArrayInfo(dtype, shape, strides, contiguous)
    return value


def _host_scalar(value):
    # What a launch function gets for a scalar of the contract: a plain Python number (see
    # ropelab.grader.trial.host_scalar, whose rule this mirrors for the timer's arguments).
    return value.item() if isinstance(value, np.generic) else value


def kernel_step_launch(step, case, fn) -> Launch:
    args = []
    for name in step.arguments:
        if name == "out":
            args.append(np.empty(case.expected.size, dtype=np.float32))
        else:
            args.append(case.inputs[name])
    return Launch(fn, dims(case.grid), dims(case.block), 0, [light(a) for a in args])


@contextlib.contextmanager
def recorded_launches():
    """Inside the block every simulated ``kernel[grid, block, ...](*args)`` is recorded in the
    list it yields and returns without running a thread."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    found: list = []
    seen: set = set()  # the arrays earlier launches were given (by identity)
    getitem, forall = FakeCUDAKernel.__getitem__, getattr(FakeCUDAKernel, "forall", None)

    def configured(self, configuration):
        if not isinstance(configuration, tuple) or len(configuration) < 2:
            raise NotPredictable(f"a launch is kernel[grid, block]; got {configuration!r}")
        grid, block = configuration[:2]
        shared = int(configuration[3]) if len(configuration) >= 4 else 0

        def launch(*args):
            # An array an earlier launch of the step wrote or read (stage one's partial sums
            # read by stage two) is in the L2 when this launch reads it: the cold-L2 timer
            # empties the L2 before the step, not between its launches.
            arrays = [(id(_array(a)), light(a).nbytes) for a in args if _array(a) is not None]
            total = sum(n for _, n in arrays)
            warm = sum(n for k, n in arrays if k in seen) / total if total else 0.0
            seen.update(k for k, _ in arrays)
            found.append(Launch(self, dims(grid), dims(block), shared, [light(a) for a in args],
                                warm))
        return launch

    def no_forall(self, *args, **kwargs):
        raise NotPredictable("kernel.forall(...) launches are not predicted: write "
                             "kernel[grid, block](...)")

    FakeCUDAKernel.__getitem__ = configured
    FakeCUDAKernel.forall = no_forall
    try:
        yield found
    finally:
        FakeCUDAKernel.__getitem__ = getitem
        if forall is not None:
            FakeCUDAKernel.forall = forall


def launch_step_launches(step, case, fn) -> list[Launch]:
    """The launches ``fn`` makes on the timing case (simulator only)."""
    from numba import cuda

    from ...target import SIMULATED

    if not SIMULATED:
        raise NotPredictable("finding a launch function's launches needs the simulator")
    args = []
    for name in step.arguments:
        value = (np.empty(case.expected.size, dtype=np.float32) if name == "out"
                 else case.inputs[name])
        args.append(cuda.to_device(value) if isinstance(value, np.ndarray)
                    else _host_scalar(value))
    with recorded_launches() as found:
        fn(*args)
    if not found:
        raise NotPredictable(f"{getattr(fn, '__name__', fn)} launched no kernel")
    return found


def step_launches(step, case, fn) -> list[Launch]:
    if step.kind == "launch":
        return launch_step_launches(step, case, fn)
    return [kernel_step_launch(step, case, fn)]


# --------------------------------------------------------------------------------------------
# Describing one launch
# --------------------------------------------------------------------------------------------

def _array(value):
    """The NumPy view of an array argument (host, simulator device array), or None."""
    if isinstance(value, np.ndarray):
        return value
    inner = getattr(value, "_ary", None)  # the simulator's device array
    if isinstance(inner, np.ndarray):
        return inner
    return None


def type_text(value) -> str:
    """The numba type of one kernel argument, as signature text: ``float32[::1]``,
    ``float32[:, ::1]``, ``uint64``; a Python int is ``int64``, a float ``float64``."""
    if isinstance(value, (bool, np.bool_)):
        return "boolean"
    if isinstance(value, np.generic):
        return np.dtype(value.dtype).name
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    info = light(value)
    if not isinstance(info, ArrayInfo):
        raise NotPredictable(f"cannot type a kernel argument of type {type(value).__name__}")
    dtype, ndim, contiguous = info.dtype, len(info.shape), info.contiguous
    if ndim == 0:
        raise NotPredictable("a 0-d array argument is not predicted")
    axes = [":"] * ndim
    if contiguous:
        axes[-1] = "::1"
    return f"{dtype.name}[{', '.join(axes)}]"


def signature(args) -> str:
    return f"void({', '.join(type_text(a) for a in args)})"


def array_bytes(args) -> int:
    """Bytes of the array arguments: what a cold L2 must at least move for this launch."""
    return sum(info.nbytes for info in map(light, args) if isinstance(info, ArrayInfo))


def fastmath_of(kernel) -> bool:
    """The kernel's own fast-math setting (the simulator keeps it too)."""
    options = getattr(kernel, "targetoptions", None)
    if isinstance(options, dict):
        return bool(options.get("fastmath", False))
    return bool(getattr(kernel, "_fastmath", False))


def job_of(kernel) -> dict:
    """How the compiler process rebuilds ``kernel``: one of ropelab's by import (a kernel built
    at import time may be a closure, and the child builds the GPU form of it), any other from
    its source, as the grader's census ships it."""
    import sys

    from .. import kernel_census

    fn = kernel_census.python_function(kernel)
    module = getattr(fn, "__module__", "") or ""
    if module.split(".")[0] == "ropelab" and fn is not None:
        # The name it is importable by: in its own module, or (a kernel a factory built, such
        # as notebook 08's reduction) in the ropelab module that made it.
        homes = [module] + sorted(m for m in sys.modules if m.split(".")[0] == "ropelab"
                                  and m != module)
        for home in homes:
            for name, value in list(getattr(sys.modules.get(home), "__dict__", {}).items()):
                try:
                    if kernel_census.python_function(value) is fn:
                        return kernel_census.ship_reference(home, name)
                except Exception:  # noqa: BLE001  (an attribute that refuses inspection)
                    continue
    try:
        return kernel_census.ship_kernel(kernel)
    except kernel_census.CensusError as exc:
        raise NotPredictable(str(exc)) from None


def describe(launches: list[Launch]) -> list[tuple]:
    """``(job, signature, fastmath)`` of each launch: what :func:`.compiled.compiled` takes."""
    return [(job_of(x.kernel), signature(x.args), fastmath_of(x.kernel)) for x in launches]


def counts_of(launch: Launch, built: dict) -> dict:
    """The PTX counts of one launch's kernel (:func:`.ptx.analyze` with its argument values)
    and its registers, from its compiled row (:func:`.compiled.compiled`)."""
    from .ptx import analyze, parameter_values

    if built.get("error"):
        raise NotPredictable(f"the kernel does not compile for the H200: {built['error']}")
    return {**analyze(built["ptx"], parameter_values(launch.args)), "regs": built.get("regs", 0)}


def features_of(launches: list[Launch], built: list[dict]) -> list[dict]:
    """One feature dict per launch, from its compiled row."""
    return [launch_features(counts_of(x, b), x.grid, x.block, max(array_bytes(x.args), 1),
                            x.shared, warm=x.warm) for x, b in zip(launches, built)]


def step_features(step, fn, case=None, progress=None) -> list[dict]:
    """The feature dicts of the launches ``fn`` makes on ``step``'s timing case."""
    from . import compiled

    case = case or step.timing_case()
    launches = step_launches(step, case, fn)
    return features_of(launches, compiled.compiled(describe(launches), progress=progress))
