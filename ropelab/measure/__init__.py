"""Evidence for the course's explanations: controlled kernels, Nsight Compute profiles, timing of
controls, compute-sanitizer records, and (:mod:`.seed_claims`) the experiments behind the
seed-claims ledger.  Import the submodules directly; this package imports nothing, so
``import ropelab`` never pays for (or depends on) any of it."""
