"""Evidence for the course's explanations: controlled kernels, Nsight Compute profiles, timing of
controls, compute-sanitizer records.  Import the submodules directly; this package imports
nothing, so ``import ropelab`` never pays for (or depends on) any of it."""
