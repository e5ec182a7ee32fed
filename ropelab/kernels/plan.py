"""What a kernel launch is, as data: a :class:`Variant` (a registered kernel and its options)
and the :class:`Plan` it builds for one problem (kernel, geometry, argument types, tables).

Nothing here touches a GPU: the census compiles a plan's argument types in a driver-less child,
the tests check plans on the simulator, and :mod:`ropelab.kernels.launch` turns a plan into a
launch.  Adding a variant: one kernel module that defines ``VARIANT = Variant(...)``, plus its
line in the registry tuple of :mod:`ropelab.kernels`; the public call, ``python -m ropelab
check``, the bench plan and the census all read that registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np
from numba import cuda, typeof, types
from numba.np.numpy_support import from_dtype

from ..cuda_limits import MAX_GRID
from ..errors import RopeInputError
from ..problem import HEADS, RopeProblem


@cache
def jitted(fn, fastmath: bool = True):
    """One lazily compiled dispatcher per (kernel function, fastmath) pair.

    Kernel modules define plain Python functions and never decorate them with an eager
    signature: importing a kernel module must not need a CUDA driver (the census imports them in
    a driver-less child process) and must work under the simulator.
    """
    return cuda.jit(fastmath=fastmath)(fn)


def blocks_for(work_items: int, threads: int) -> int:
    """Enough blocks of ``threads`` threads to cover ``work_items`` (ceil division)."""
    return (work_items + threads - 1) // threads


def dim3(value) -> tuple[int, int, int]:
    if isinstance(value, tuple):
        return tuple(int(v) for v in value) + (1,) * (3 - len(value))
    return int(value), 1, 1


# The caller arrays of plain RoPE, in kernel order: x, out (float32), positions (int32).
ROPE_ARRAYS = (np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.int32))

# Storage of x and out -> the NumPy dtype the kernels see (bfloat16 travels as uint16 bits).
STORAGE_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                  "bfloat16": np.dtype(np.uint16)}


def rope_arrays(storage: str = "float32") -> tuple:
    """:data:`ROPE_ARRAYS` for x and out stored as ``storage``."""
    dt = STORAGE_DTYPES[storage]
    return (dt, dt, np.dtype(np.int32))

# The kernels index their arrays with 32-bit unsigned arithmetic: an array (a row-strided one:
# its span) must hold fewer elements than this.
MAX_ELEMENTS = 2**32 - 1


@dataclass(frozen=True, eq=False)  # eq=False: hashed by identity (plans are cached upstream)
class Plan:
    """Everything one launch needs besides the caller's arrays.

    The kernel receives, in order: the caller's arrays (each as a 1-D C-contiguous array),
    ``tables`` (host NumPy arrays; :func:`launch` passes a device copy made once), the device
    error word when ``errors`` is set, then ``scalars`` (NumPy scalars whose types are the
    kernel's argument types: ``np.uint64`` for index math, ``np.float32`` for floats).
    """

    kernel: object
    fastmath: bool
    grid: tuple
    block: tuple
    caller: tuple  # dtypes of the caller's arrays, in kernel order
    tables: tuple = ()
    scalars: tuple = ()
    errors: bool = False
    # Positions must be below this for the plan's stated accuracy (None: any int32).  Host
    # positions are checked against it; device positions are flagged by the kernel (``errors``).
    position_limit: int | None = None
    limit_reason: str = ""

    def __post_init__(self):
        object.__setattr__(self, "grid", dim3(self.grid))
        object.__setattr__(self, "block", dim3(self.block))
        for g, limit in zip(self.grid, MAX_GRID):
            if g > limit:
                raise RopeInputError(f"this input needs a grid of {self.grid} blocks; CUDA allows "
                                     f"at most {MAX_GRID}")

    def argtypes(self) -> tuple:
        """numba argument types of the kernel exactly as :func:`launch` passes its arguments."""
        out = [types.Array(from_dtype(np.dtype(d)), 1, "C") for d in self.caller]
        out += [types.Array(from_dtype(t.dtype), t.ndim, "C") for t in self.tables]
        if self.errors:
            out.append(types.Array(types.int32, 1, "C"))
        out += [typeof(s) for s in self.scalars]
        return tuple(out)

    def signature(self) -> str:
        """:meth:`argtypes` as numba signature text (see :func:`signature_text`)."""
        return signature_text(self.argtypes())


def signature_text(argtypes) -> str:
    """numba's signature string of argument types (``"void(float32[::1], uint64, ...)"``), the
    form a child process can receive as text and hand to ``cuda.compile_ptx``."""
    def one(t):
        if isinstance(t, types.Array):
            dims = [":"] * (t.ndim - 1) + ["::1"]
            return f"{t.dtype}[{', '.join(dims)}]"
        return str(t)

    return f"void({', '.join(one(t) for t in argtypes)})"


@dataclass(frozen=True)
class Variant:
    """A kernel variant as the rest of ropelab sees it.

    ``plan(problem, options, fastmath=, threads=, aligned=)`` checks nothing the public API has
    not checked, except the variant's own ``options`` (declared here with their defaults), and
    returns the :class:`Plan`.  ``aligned`` says whether every caller array starts on a 16-byte
    boundary (128-bit accesses need it).  ``census_options`` are the option sets whose kernels
    the PTX census compiles; ``check_cases`` the ones ``python -m ropelab check`` runs.
    """

    name: str
    summary: str
    features: frozenset
    make_plan: object
    kernel: object  # the main kernel function (notebooks show its source)
    options: dict = field(default_factory=dict)
    census_options: tuple = ({},)
    check_cases: tuple = ()
    census: object = None  # () -> [Plan]: overrides the census's default problems
    # Storages of x and out the kernels are built for (one build each; see RopeProblem.storage).
    storages: frozenset = frozenset({"float32"})

    def plan(self, problem, options=None, *, fastmath=True, threads=None, aligned=True) -> Plan:
        return self.make_plan(problem, dict(options or {}), fastmath=fastmath, threads=threads,
                              aligned=aligned)

    def census_plans(self, fastmath: bool = True) -> list[Plan]:
        """The plans whose kernels the PTX census compiles (argument types included)."""
        if self.census is not None:
            return self.census()
        plans = []
        for storage in ("float32", "float16", "bfloat16"):  # float32 first, as before 16-bit
            if storage in self.storages:
                problem = replace(census_problem(self.features), storage=storage)
                plans += [self.plan(problem, o, fastmath=fastmath) for o in self.census_options]
        return plans


def census_problem(features=frozenset()) -> RopeProblem:
    """A representative problem for the PTX census: only its argument types matter, so it uses
    every feature the variant supports (multi-head, so shifts and divisions are both compiled)."""
    heads = 2 if HEADS in features else 1
    return RopeProblem(tokens=4096, heads=heads, head_dim=128, rotary_dim=128)
