"""Honest GPU timing of ropelab's kernels and their baselines: every bench, one package.

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

What every bench shares:

- :mod:`.stats`: pure arithmetic on timings (quantiles, GB/s, repeat counts, flush sizes);
- :mod:`.timer`: :class:`Timer` (what the exercise grader imports);
- :mod:`.schema` and :mod:`.kinds`: a record kind's row schema (its columns, in the order the
  committed records keep, and its text table); every kind is declared in :mod:`.kinds`, and
  ``format_rows(rows, kind)`` is the one formatter;
- :mod:`.record`: the one record writer (``save``, ``Recording`` for runs that save as they
  go), a run's provenance (``run_meta``) and the one method text (``method_text``).

The benches, one module each (``python -m`` runs the ones that name a command):

- the sweep, ``python -m ropelab bench`` (:mod:`.cli`): :mod:`.shapes` (what it times on),
  :mod:`.entries` (ropelab's variants and fused kernel, the copy roof), :mod:`.rope_rows`
  (plain RoPE as models call it), :mod:`.baselines` (PyTorch, CUDA C++), :mod:`.sweeper` (the
  plan, the loop, the rows, the targets);
- :mod:`.overhead`: host launch cost (kind ``launch_overhead``);
- :mod:`.backward` (and :mod:`.backward_calls`, what its rows launch): the fused backward;
- :mod:`.torch_ops`: the torch custom ops, eager and compiled;
- :mod:`.controls`: the controlled kernels against their references;
- :mod:`.host_path`: the public call's fast-path host time on the CPU, no GPU needed;
- :mod:`ropelab.models.bench` (outside: transformers is imported under ``models`` only): one
  decoder layer with and without ropelab (kind ``real_model``), built on the parts above.

**Adding a row.**  A new timed thing in the sweep is an :class:`~.entries.Entry` in the module
of its family (a ropelab kernel: :mod:`.entries`; a model-shaped call: :mod:`.rope_rows`; a
library to compare with: :mod:`.baselines`); :func:`~.sweeper.plan` picks it up.  A new column
or record kind is declared in :mod:`.kinds`; rows are built with ``SCHEMA.row(...)``, which
refuses a missing or unknown column, and written with :func:`~.record.save`.

The GPU parts refuse to run under the simulator: its "times" describe a Python interpreter.
Every public name of the shared modules is reachable as ``ropelab.measure.bench.NAME``, and
each bench as ``ropelab.measure.bench.MODULE``; a module is imported on first use, so
``bench.Timer`` does not import the baselines.
"""

from __future__ import annotations

import importlib

# In dependency order: a name is looked up in the first module that defines it.
_SHARED = ("stats", "schema", "kinds", "timer", "record", "shapes", "entries", "sweeper",
           "overhead", "cli")
_BENCHES = ("rope_rows", "baselines", "backward", "backward_calls", "torch_ops", "controls",
            "host_path")


def __getattr__(name: str):
    if name in _SHARED + _BENCHES:
        return importlib.import_module(f"{__name__}.{name}")
    for sub in _SHARED:
        module = importlib.import_module(f"{__name__}.{sub}")
        if name in vars(module):
            value = vars(module)[name]
            globals()[name] = value  # found once, then an ordinary attribute
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
