"""Evidence for the course's explanations, one job per module or package:

- :mod:`.census`: the instruction census (one engine for every PTX/SASS count, no GPU needed);
- :mod:`.bench`: every GPU timing (the sweep of the kernels and :mod:`.baselines` (PyTorch,
  CUDA C++ twins), launch overhead, the backward, the torch ops, the controlled kernels of
  :mod:`.controls`), with one row schema, record writer and formatter;
- :mod:`.profile`: Nsight Compute counters of the launches of :mod:`.cases`; :mod:`.order`:
  memory instruction order; :mod:`.sanitizer`: compute-sanitizer records;
- :mod:`.precision`, :mod:`.fused_precision`: error against the float64 reference on a GPU;
- :mod:`.records`: the files under ``data/``; :mod:`.charts`: their charts;
- :mod:`.seed_claims`: the experiments behind the seed-claims ledger.

Import the submodules directly; this package imports nothing, so ``import ropelab`` never pays
for (or depends on) any of it."""
