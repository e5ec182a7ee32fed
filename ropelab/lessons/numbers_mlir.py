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
    path, rows = _ports()
    failed = [re.sub(r"\x1b\[[0-9;]*m", "", r["error"]) for r in rows if not r["compiles"]]
    named = sum(1 for e in failed if "_Intrinsic" in e or "is not defined" in e)
    return Rendered(f"{named} of {len(failed)}", path)
