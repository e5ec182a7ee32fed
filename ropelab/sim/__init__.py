"""Shims that make the Numba CUDA simulator compute what ropelab's kernels compute on a GPU.

* :mod:`ropelab.sim.warp`: warp shuffles (the simulator has none);
* :mod:`ropelab.sim.fma`: a correctly rounded ``cuda.fma`` (the simulator's rounds twice);
* :mod:`ropelab.sim.block`: a block scheduler that sleeps instead of busy-polling its threads
  (same results, several times less CPU), with :mod:`ropelab.sim.barrier`'s rule: every thread
  of a block reaches the same barriers, or the launch fails naming those that did not;
* :mod:`ropelab.sim.shared_race`: the grader's shared-memory race detector;
* :mod:`ropelab.sim.intwrap`: the grader's refusal of a 32-bit integer sum that wraps on the
  simulator (NumPy's 32 bits) where a GPU keeps the carry (Numba's 64);
* and :func:`ropelab.sim.block.profiled_block`: one block run with its threads' source lines
  counted (the time prediction's view of a thread that works alone).

``import ropelab`` calls :func:`install`; on a GPU it does nothing.  :data:`ARITHMETIC` says what
the simulator's numbers are worth; the start-up banner and the notebooks print it.
"""

from __future__ import annotations

from . import block, fma, warp

# The one statement of what simulated arithmetic is (the banner and notebook 00 print this).
ARITHMETIC = (
    "On the simulator, a kernel's float32 arithmetic runs as NumPy float32: each "
    "operation is rounded once, as IEEE float32. What differs from a GPU: math.sin, math.cos and "
    "math.pow are double-precision library calls rounded to float32 (more accurate than the "
    "GPU's); fastmath is ignored (no sin.approx, no flush to zero); the GPU compiler may fuse a "
    "multiply and an add into one fma (one rounding fewer) where the simulator rounds both; an "
    "explicit cuda.fma is rounded once on both (ropelab's shim). So the simulator checks a "
    "kernel's logic and its float32 rounding; fast-math error and speed come from a GPU."
)


def install() -> dict:
    """Install every simulator shim (idempotent; a no-op on a GPU).

    Returns what was installed: ``{"warp": names of the shuffles added, "fma": True/False,
    "block": True/False}``.
    """
    return {"warp": warp.install(), "fma": fma.install(), "block": block.install()}
