"""numba-cuda-mlir on the GPU, beside numba-cuda: what a launch costs, and which of ropelab's
kernels compile with only the import changed; a ``data/numba_cuda_mlir/`` record to --out.

numba-cuda is in maintenance mode and its successor, numba-cuda-mlir, is meant to take
numba-cuda kernels after a change of imports (``from numba_cuda_mlir import cuda``).  Two
questions, on one machine in one run:

1. ``launch``: host microseconds per launch of a kernel of six arguments (three device arrays,
   three scalars: as many as ``ropelab.rope``'s kernel takes) whose body does no work, one
   block of 32 threads, no synchronization inside the timed loop: best of 15 rounds of 2000
   launches.  The same Python source through ``numba.cuda.jit`` (numba-cuda, what ropelab
   uses) and ``numba_cuda_mlir.cuda.jit``, each on its own library's device arrays and on
   CuPy arrays (``__cuda_array_interface__``), beside a CuPy ``RawKernel`` with the same
   parameters (the launch cost the direct calls are held to).
2. ``port``: every registered kernel build (the census's list, fast-math) rebuilt for
   numba-cuda-mlir by changing only what its imports bind: ``numba.cuda`` becomes
   ``numba_cuda_mlir.cuda``, numba's scalar types become numba-cuda-mlir's of the same name, and
   each numba-cuda device function it reaches is rebuilt the same way and jitted as a device
   function again (same ``inline``).  Then compiled to PTX for compute capability 9.0 with the
   argument types ropelab's launch passes: ``compiles`` and, where not, the error's first line.
   What it cannot carry over (an intrinsic written in LLVM IR, which numba-cuda-mlir replaces
   with MLIR) shows up there.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import types as pytypes

NUMBER, REPEAT = 2000, 15


def best_host_us(fn, sync, number: int = NUMBER, repeat: int = REPEAT) -> float:
    best = float("inf")
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    sync()
    return best * 1e6


def _noop_source(cuda):
    def noop(a, b, c, d, e, f):
        if e > f:  # never, at e=2 f=3: every argument is read, nothing is written
            b[cuda.threadIdx.x] = a[0] * d + c[0]
    return noop


def _row(part: str, impl: str, *, arrays: str = "", host_us=None, kernel: str = "",
         compiles=None, error: str = "") -> dict:
    """One row of the record: every column, in one order."""
    return {"part": part, "impl": impl, "arrays": arrays, "host_us": host_us, "kernel": kernel,
            "compiles": compiles, "error": error}


def _first_line(exc, prefix: str = "") -> str:
    return f"{prefix}{type(exc).__name__}: {exc}".splitlines()[0][:300]


def launch_rows() -> list[dict]:
    import numpy as np
    from numba import cuda

    import cupy

    rows = []

    def row(impl, arrays, make):
        """``make()`` builds the arrays and returns ``(launch, sync)``; a failure anywhere is
        the row's error, and the other rows still run."""
        try:
            fn, sync = make()
            fn()
            sync()
            us = round(best_host_us(fn, sync), 2)
            rows.append(_row("launch", impl, arrays=arrays, host_us=us))
        except Exception as exc:
            rows.append(_row("launch", impl, arrays=arrays, error=_first_line(exc)))
        print(rows[-1], flush=True)

    scalars = (np.float32(1.0), np.uint32(2), np.uint32(3))
    ca, cb = cupy.zeros(32, cupy.float32), cupy.zeros(32, cupy.float32)
    cc = cupy.zeros(32, cupy.int32)
    cupy_sync = cupy.cuda.runtime.deviceSynchronize
    raw = cupy.RawKernel(r"""extern "C" __global__ void noop(const float* a, float* b,
        const int* c, float d, unsigned e, unsigned f) {}""", "noop")
    row("cupy RawKernel", "cupy",
        lambda: (lambda: raw((1,), (32,), (ca, cb, cc) + scalars), cupy_sync))

    def own_arrays(lib, kernel):
        a, b = lib.to_device(np.zeros(32, np.float32)), lib.to_device(np.zeros(32, np.float32))
        c = lib.to_device(np.zeros(32, np.int32))
        return (lambda: kernel[1, 32](a, b, c, *scalars)), lib.synchronize

    k = cuda.jit(_noop_source(cuda))
    row("numba-cuda", "numba device arrays", lambda: own_arrays(cuda, k))
    row("numba-cuda", "cupy", lambda: ((lambda: k[1, 32](ca, cb, cc, *scalars)), cuda.synchronize))

    try:
        from numba_cuda_mlir import cuda as mcuda
    except Exception as exc:
        rows.append(_row("launch", "numba-cuda-mlir", error=_first_line(exc, "import: ")))
        return rows
    mk = mcuda.jit(_noop_source(mcuda))
    row("numba-cuda-mlir", "its device arrays", lambda: own_arrays(mcuda, mk))
    row("numba-cuda-mlir", "cupy",
        lambda: ((lambda: mk[1, 32](ca, cb, cc, *scalars)), cupy_sync))
    return rows


class Porter:
    """Rebuilds numba-cuda kernels and device functions for numba-cuda-mlir, changing only what
    their imports bind (module docstring, part 2)."""

    def __init__(self, mcuda, mtypes):
        from numba import cuda
        from numba.core import types as nt

        self.cuda, self.mcuda, self.mtypes, self.nt = cuda, mcuda, mtypes, nt
        self.memo: dict[int, object] = {}

    def value(self, obj):
        key = id(obj)
        if key in self.memo:
            return self.memo[key]
        out = obj
        if obj is self.cuda:
            out = self.mcuda
        elif isinstance(obj, self.nt.Type):
            out = getattr(self.mtypes, str(obj), obj)
        elif hasattr(obj, "py_func") and hasattr(obj, "targetoptions"):  # a device function
            self.memo[key] = None  # a cycle would read None and fail: visible in the error
            inline = obj.targetoptions.get("inline", "never")
            out = self.mcuda.jit(device=True, inline=inline)(self.function(obj.py_func))
        elif isinstance(obj, pytypes.FunctionType) and (obj.__module__ or "").startswith("ropelab"):
            out = self.function(obj)
        self.memo[key] = out
        return out

    def function(self, fn):
        """``fn`` with its globals and closure cells bound to their ported values."""
        glb = dict(fn.__globals__)
        for name in _names(fn.__code__):
            if name in glb:
                glb[name] = self.value(glb[name])
        cells = []
        for cell in fn.__closure__ or ():
            try:
                cells.append(pytypes.CellType(self.value(cell.cell_contents)))
            except ValueError:  # an empty cell
                cells.append(pytypes.CellType())
        new = pytypes.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__,
                                   tuple(cells) if cells else None)
        new.__qualname__, new.__module__ = fn.__qualname__, fn.__module__
        return new


def _names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _names(const)
    return names


def port_rows() -> list[dict]:
    from ropelab.kernels.plan import signature_text
    from ropelab.measure.census import registered

    try:
        from numba_cuda_mlir import cuda as mcuda
        from numba_cuda_mlir import types as mtypes
    except Exception as exc:
        return [_row("port", "numba-cuda-mlir", compiles=False,
                     error=_first_line(exc, "import: "))]
    rows = []
    for target in registered.targets():
        name = f"{target['registry']}:{target['variant']}:{target['kernel']}"
        row = _row("port", "numba-cuda-mlir", kernel=name, compiles=False)
        try:
            fn = Porter(mcuda, mtypes).function(target["fn"])
            mcuda.compile_ptx(fn, signature_text(target["signature"]), fastmath=True, cc=(9, 0))
            row["compiles"] = True
        except Exception as exc:
            row["error"] = _cause(exc)
        rows.append(row)
        print(row, flush=True)
    return rows


def _cause(exc) -> str:
    """The lines of a compile error that say what failed (numba's first line names only the
    pipeline stage): its type, then the message lines that are not traceback or banner."""
    import re

    lines = [l.strip() for l in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()]  # no colours
    keep = [l for l in lines[1:] if l and not l.startswith(("File ", "During:", "^", "-", "<"))
            and "pipeline" not in l]
    return (f"{type(exc).__name__}: " + " | ".join(keep[:4] or lines[:1]))[:400]


METHOD = ("launch: host us per launch, no synchronization inside the timed loop, best of 15 "
          "rounds of 2000 launches (synchronized between rounds) of a six-argument kernel (three "
          "device arrays, three scalars) whose body does no work, grid 1, block 32; the same "
          "Python source through numba.cuda.jit (numba-cuda) and numba_cuda_mlir.cuda.jit, each "
          "on its own device arrays and on CuPy arrays, beside a CuPy RawKernel of the same "
          "parameters. port: each registered kernel build (measure.census.registered.targets, "
          "fast-math) rebuilt with only what its imports bind changed (numba.cuda -> "
          "numba_cuda_mlir.cuda, numba scalar types -> numba-cuda-mlir's of the same name, each "
          "device function reached rebuilt and jitted again with its inline option), then "
          "compile_ptx for cc 9.0 with the launch's argument types; error = what the exception "
          "says failed (its type and first message lines). Recorded by scripts/gpu_mlir_probe.sh.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = parser.parse_args(argv)
    from ropelab.measure import records

    rows = launch_rows() + port_rows()
    try:
        from importlib.metadata import version
        meta = records.metadata()
        meta["numba_cuda_mlir"] = version("numba-cuda-mlir")
    except Exception:
        meta = records.metadata()
    path = records.save("numba_cuda_mlir", rows, method=METHOD, meta=meta, directory=args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
