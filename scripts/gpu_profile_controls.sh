#!/usr/bin/env bash
# Why the kernels run as fast as they do, in ONE call on the H200 host (worst case about 8.7
# minutes):
#   1. Nsight Compute profile of every kernel      -> data/profile/   (python -m ropelab profile)
#   2. the controlled variants, timed              -> data/controls/  (python -m ropelab.measure.bench.controls)
#   3. compute-sanitizer memcheck + racecheck      -> data/sanitizer/ (scripts/sanitize.sh)
#   4. the seed-claims experiments, timed          -> data/sincos_per_pair/ (python -m ropelab.measure.seed_claims)
# After every step data/ is bundled into $OUT/data.tgz (raw .ncu-rep excluded; they go to
# $OUT/ncu/ with ncu's logs and raw CSV), so whatever finished before a time limit comes back.
# Unpack here with: tar xzf data.tgz   (from the repository root)
#
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried: .whl/ is
# git-ignored).  The host's numpy 2.5 breaks numba-cuda 0.30.4 (np.row_stack), hence the install
# (scripts/gpu_common.sh).
LOG_NAME=profile_controls.log source "$(dirname "$0")/gpu_common.sh"

say "tools"
{ command -v ncu || ls -d /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null; \
  command -v compute-sanitizer || ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null; \
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } 2>&1 | tee -a "$LOG"
step 20  info     python3 -m ropelab info
# One ncu run per group (plain variants, controls, fused); each group is recorded when it ends.
step 210 profile  python3 -m ropelab profile --timeout-s 95 --reports "$OUT/ncu"
step 60  controls python3 -m ropelab.measure.bench.controls --rounds 8 --repeats 10
# memcheck and racecheck run side by side, each cut at 180 s (a cut run is recorded as such).
step 165 sanitize env SANITIZER_LIMIT_S=150 bash scripts/sanitize.sh
step 60  seedclaims python3 -m ropelab.measure.seed_claims --record

say "summary"
{ python3 -m ropelab profile --recorded; echo; \
  python3 -c "from ropelab.measure import bench, records; print(bench.format_rows(records.load('controls')['rows'], 'controls'))"; \
  echo; cat data/sanitizer/sanitizer-*.csv 2>/dev/null | tail -3; } 2>&1 | tee "$OUT/summary.txt" | tee -a "$LOG"
bundle
ls -la "$OUT"
