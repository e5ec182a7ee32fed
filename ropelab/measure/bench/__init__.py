"""Honest GPU timing of ropelab's kernels and their baselines.

How a launch is timed (``Timer.time``), and why:

1. Warm-up launches (compilation, allocator, clocks), then a synchronize.
2. For each of N repeats: a fill kernel writes a buffer at least 4x the L2 (512 MB on an H200,
   whose L2 is 60 MB), a CUDA event is recorded, the launcher runs, a second event is recorded.
   The fill evicts the L2, so every repeat starts cold, as a kernel in a real model does.  It
   also keeps the GPU busy for ~150 us while the host enqueues the timed launch: numba spends
   20-60 us of host time per launch, and on an idle GPU the events would measure that instead
   of the kernel.
3. One synchronize at the end; the elapsed times of the N event pairs are the samples.
4. Median and 20th/80th percentiles; ``bytes_moved`` over the median gives GB/s.  A
   device-to-device copy of the same bytes, timed the same way in the same run, is the roof:
   ``frac_of_copy`` = GB/s of the row / GB/s of that copy.

``bytes_moved`` is the minimum traffic of the operation (x read, out written, positions read
once; for the fused kernel Q and K read and written), identical for every row of one shape, so
GB/s is an *effective* bandwidth and rows of a shape compare by it directly.  A baseline that
reads cos/sin tables moves more bytes than it is credited for; that is its cost.

The package, one job per module:

- :mod:`.stats`: pure arithmetic on timings (quantiles, GB/s, repeat counts, flush sizes),
  tested on synthetic numbers;
- :mod:`.rows`: shapes and result rows;
- :mod:`.timer`: :class:`Timer` (what the exercise grader imports);
- :mod:`.entries`: what is timed (ropelab's variants, the fused kernel, the copy, baselines) and
  the device buffers of a shape;
- :mod:`.sweeper`: every (entry, shape) pair; :mod:`.overhead`: host launch cost;
- :mod:`.cli`: ``python -m ropelab bench``;
- :mod:`.host_path`: the public call's fast-path host time on the CPU, no GPU needed
  (``python -m ropelab.measure.bench.host_path``; not one of the lazily exported submodules).

The GPU parts refuse to run under the simulator: its "times" describe a Python interpreter.
Every public name of the submodules is reachable as ``ropelab.measure.bench.NAME``; a
submodule is imported on first use, so ``bench.Timer`` does not import the baselines.
"""

from __future__ import annotations

import importlib

# In dependency order: a name is looked up in the first submodule that defines it.
_SUBMODULES = ("stats", "timer", "rows", "entries", "sweeper", "overhead", "cli")


def __getattr__(name: str):
    for sub in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{sub}")
        if name in vars(module):
            value = vars(module)[name]
            globals()[name] = value  # found once, then an ordinary attribute
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
