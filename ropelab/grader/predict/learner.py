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
import warnings
from dataclasses import dataclass, field

import numpy as np

from ...cuda_limits import WARP
from .features import HOST_COUNTS, dims, launch_features


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
    host: dict = field(default_factory=dict)  # the step's host transfers (the first launch's)
    values: list | None = None  # the arguments themselves, for block_lines (then dropped)


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
    return Launch(fn, dims(case.grid), dims(case.block), 0, [light(a) for a in args],
                  values=args)


def _nbytes(value) -> int:
    arr = _array(value)
    if arr is None:
        try:
            arr = np.asarray(value)
        except Exception:  # noqa: BLE001  (not array-like: no bytes to count)
            return 0
    return int(arr.nbytes)


@contextlib.contextmanager
def counted_transfers(counts: dict):
    """Inside the block, ``cuda.to_device``, ``cuda.device_array(_like)`` and a device array's
    ``copy_to_device`` / ``copy_to_host`` add to ``counts`` (:data:`HOST_COUNTS`) and then do
    what they do (simulator only: they copy NumPy arrays).

    What a launch function asks of the host between its launches: on a GPU each copy waits for
    itself (pageable memory) and each allocation is a driver call of its own, and the timer's
    events bracket the whole function, so these costs are in the time it measures."""
    from numba import cuda
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    for name in HOST_COUNTS:
        counts.setdefault(name, 0)
    originals = {name: getattr(cuda, name) for name in ("to_device", "device_array",
                                                        "device_array_like")}
    to_dev, to_host = FakeCUDAArray.copy_to_device, FakeCUDAArray.copy_to_host

    def to_device(obj, *args, **kwargs):
        to = kwargs.get("to", args[2] if len(args) > 2 else None)  # (stream, copy, to)
        counts["allocs"] += to is None
        counts["h2d"] += 1
        counts["h2d_bytes"] += _nbytes(obj)
        return originals["to_device"](obj, *args, **kwargs)

    def allocating(name):
        def alloc(*args, **kwargs):
            counts["allocs"] += 1
            return originals[name](*args, **kwargs)
        return alloc

    def copy_to_device(self, ary, *args, **kwargs):
        if _array(ary) is None or isinstance(ary, np.ndarray):  # a device-to-device copy is not
            counts["h2d"] += 1                                   # the host's
            counts["h2d_bytes"] += _nbytes(ary)
        return to_dev(self, ary, *args, **kwargs)

    def copy_to_host(self, *args, **kwargs):
        counts["d2h"] += 1
        counts["d2h_bytes"] += _nbytes(self)
        return to_host(self, *args, **kwargs)

    cuda.to_device = to_device
    cuda.device_array = allocating("device_array")
    cuda.device_array_like = allocating("device_array_like")
    FakeCUDAArray.copy_to_device, FakeCUDAArray.copy_to_host = copy_to_device, copy_to_host
    try:
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(cuda, name, fn)
        FakeCUDAArray.copy_to_device, FakeCUDAArray.copy_to_host = to_dev, to_host


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
                                warm, values=list(args)))
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
    # Twice, the second call counted: the GPU timer's calls come after the grader's check has
    # run the function once, so what a call builds once and keeps (ropelab's device tables)
    # is not in the times it measures, and what every call does again is.
    with recorded_launches():
        fn(*args)
    host: dict = {}
    with recorded_launches() as found, counted_transfers(host):
        fn(*args)
    if not found:
        raise NotPredictable(f"{getattr(fn, '__name__', fn)} launched no kernel")
    found[0].host = host
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
    return {**analyze(built["ptx"], parameter_values(launch.args), launch.block),
            "regs": built.get("regs", 0)}


PROFILE_BUDGET = 200_000  # source lines a block profile may run (about a second)


def block_lines(launch: Launch) -> tuple[float, float]:
    """``(serial_lines, thread_lines)`` of the launch, from blocks of it run on the simulator
    (:func:`ropelab.sim.block.profiled_block`): its first block, and where the grid has more,
    its middle and last blocks.

    ``serial_lines``: source lines the busiest thread of the first block runs beyond the
    block's mean: 0 when the work is spread evenly, the length of the loop when one thread loops
    while the others wait (thread 0 copying a table, summing a row).  The bytes a launch moves
    say how much work there is; this says whether one thread does it alone.

    ``thread_lines``: source lines a warp runs, on average over the warps of the sampled blocks,
    a warp taking as long as its busiest lane: the work a loop whose trip count depends on the
    data does (a carry loop that runs thousands of times, a search), which neither the PTX nor
    the bytes show.  The blocks are sampled at both ends and the middle of the grid because
    such a count can grow with the block's place (a token found by subtracting whole rows
    loops once per earlier token: nothing in the first block, thousands in the last).  A block
    stopped at the budget gives the mean over the warps of the threads that had ended (threads
    run one after another where they never wait for each other; where they run together, every
    count is partial and the figure is a lower bound), or, when none had, the stopped thread's
    count as its warp's; and no serial lines (a long grid-stride loop shares its work evenly).

    Both are 0 without the simulator, when the arguments are not kept, or when the first
    block faults."""
    if launch.values is None or not hasattr(launch.kernel, "__getitem__"):
        return 0.0, 0.0
    first = _one_block(launch, (0, 0, 0))
    if first is None:
        return 0.0, 0.0
    sampled = [first[1]]
    for at in sample_blocks(launch.grid)[1:]:
        other = _one_block(launch, at)
        if other is not None:
            sampled.append(other[1])
    return first[0], float(sum(sampled) / len(sampled))


def sample_blocks(grid) -> list[tuple]:
    """The blocks :func:`block_lines` runs: the first, the middle and the last of the grid (in
    the order blockIdx.x varies fastest), without repeats."""
    g = tuple(grid) + (1,) * (3 - len(tuple(grid)))
    total = g[0] * g[1] * g[2]
    picked = []
    for flat in (0, total // 2, total - 1):
        at = (flat % g[0], (flat // g[0]) % g[1], flat // (g[0] * g[1]))
        if at not in picked:
            picked.append(at)
    return picked


def _one_block(launch: Launch, block_idx: tuple) -> tuple[float, float] | None:
    """``(serial_lines, thread_lines)`` of one block of the launch (:func:`block_lines`), or
    None where it faults or there is no pooled simulator."""
    from ...sim.block import profiled_block
    from .. import kernel_census

    config = (launch.grid, launch.block, 0, launch.shared) if launch.shared else (
        launch.grid, launch.block)
    fn = kernel_census.python_function(launch.kernel)
    files = [fn.__code__.co_filename] if fn is not None and hasattr(fn, "__code__") else []
    try:
        # the arrays a recorded launch reads may hold what no earlier stage wrote (stage two's
        # partial sums): NumPy's warnings about their values say nothing here
        with profiled_block(block_idx, budget=PROFILE_BUDGET, files=files) as profile, \
                warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                launch.kernel[config](*launch.values)
            except Exception:  # noqa: BLE001  (the budget's stop, or a fault: no profile)
                if not profile.stopped:
                    return None
    except RuntimeError:  # no pooled simulator here
        return None
    b = launch.block
    threads = b[0] * b[1] * b[2]
    if profile.stopped:
        done = {t: n for t, n in profile.lines.items() if t != profile.stopped_thread}
        if not done:  # one thread ran past the budget alone: its count is a lower bound
            return 0.0, float(profile.lines.get(profile.stopped_thread, 0))
        return 0.0, warp_mean(done)
    counts = [profile.lines.get(t, 0) for t in range(threads)]
    if not counts:
        return 0.0, 0.0
    mean = sum(counts) / len(counts)
    return float(max(counts) - mean), warp_mean(dict(enumerate(counts)))


def warp_mean(lines: dict) -> float:
    """The mean over warps of their busiest lane's lines (``lines``: thread id within the
    block -> lines it ran; a warp is 32 consecutive ids): a warp's lanes run a loop together
    until the last of them leaves it."""
    busiest: dict = {}
    for t, n in lines.items():
        w = t // WARP
        busiest[w] = max(busiest.get(w, 0), n)
    return float(sum(busiest.values()) / len(busiest)) if busiest else 0.0


def features_of(launches: list[Launch], built: list[dict]) -> list[dict]:
    """One feature dict per launch, from its compiled row and its first block run on the
    simulator (:func:`block_lines`)."""
    out = []
    for x, b in zip(launches, built):
        f = launch_features(counts_of(x, b), x.grid, x.block, max(array_bytes(x.args), 1),
                            x.shared, warm=x.warm, host=x.host)
        f["serial_lines"], f["thread_lines"] = block_lines(x)
        x.values = None
        out.append(f)
    return out


def step_features(step, fn, case=None, progress=None) -> list[dict]:
    """The feature dicts of the launches ``fn`` makes on ``step``'s timing case."""
    from . import compiled

    case = case or step.timing_case()
    launches = step_launches(step, case, fn)
    return features_of(launches, compiled.compiled(describe(launches), progress=progress))
