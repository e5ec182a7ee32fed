"""Numbers of numba-cuda-mlir beside numba-cuda (``data/numba_cuda_mlir/``, by
scripts/gpu_mlir_probe.py): the host cost of a launch through each, and how many of ropelab's
registered kernel builds compile with only the imports changed."""

from __future__ import annotations

import re

from .numbers_core import Rendered, newest, number


def _launch_us(impl: str, arrays: str) -> Rendered:
    path, rec = newest("numba_cuda_mlir")
    for r in rec["rows"]:
        if r["part"] == "launch" and r["impl"] == impl and r["arrays"] == arrays:
            if r["host_us"] is None:
                raise LookupError(f"{path}: the {impl} launch on {arrays} failed: {r['error']}")
            return Rendered(f"{r['host_us']:.1f} us", path)
    raise LookupError(f"{path} has no {impl} launch row on {arrays}")


@number("mlir.launch_us")
def mlir_launch_us():
    return _launch_us("numba-cuda-mlir", "its device arrays")


@number("mlir.launch_cupy_us")
def mlir_launch_cupy_us():
    return _launch_us("numba-cuda-mlir", "cupy")


@number("mlir.numba_cuda_launch_us")
def mlir_numba_cuda_launch_us():
    return _launch_us("numba-cuda", "numba device arrays")


@number("mlir.numba_cuda_launch_cupy_us")
def mlir_numba_cuda_launch_cupy_us():
    return _launch_us("numba-cuda", "cupy")


@number("mlir.rawkernel_us")
def mlir_rawkernel_us():
    return _launch_us("cupy RawKernel", "cupy")


def _ports():
    path, rec = newest("numba_cuda_mlir")
    rows = [r for r in rec["rows"] if r["part"] == "port"]
    if not rows:
        raise LookupError(f"{path} has no port rows")
    return path, rows


@number("mlir.compiles")
def mlir_compiles():
    """How many registered builds compile with only the imports changed, of how many."""
    path, rows = _ports()
    return Rendered(f"{sum(1 for r in rows if r['compiles'])} of {len(rows)}", path)


@number("mlir.intrinsic_failures")
def mlir_intrinsic_failures():
    """Of the builds that do not compile, how many stop at one of ropelab's own intrinsics
    (``numba.cuda.extending.intrinsic``: LLVM IR, which numba-cuda-mlir replaces with MLIR)."""
    import importlib
    import inspect

    path, rows = _ports()
    failed = [re.sub(r"\x1b\[[0-9;]*m", "", r["error"]) for r in rows if not r["compiles"]]
    # A name the compiler could not resolve counts only where one of the modules that hold
    # ropelab's intrinsics defines it (read from their source: some are defined for a GPU only).
    sources = [inspect.getsource(importlib.import_module(m)) for m in (
        "ropelab.kernels.vec", "ropelab.bf16", "ropelab.fp8", "ropelab.kernels.words16")]

    def ropelab_intrinsic(error: str) -> bool:
        if "_Intrinsic" in error:
            return True
        missing = re.search(r"name '(\w+)' is not defined", error)
        if not missing:
            return False
        defined = re.compile(rf"(def {missing.group(1)}\(|\b{missing.group(1)} = )")
        return any(defined.search(text) for text in sources)

    named = sum(1 for e in failed if ropelab_intrinsic(e))
    return Rendered(f"{named} of {len(failed)}", path)
