#!/usr/bin/env bash
# The timings and checks the course and the README quote, in one H200 call (limits sum to 565 s):
# GPU tests, the public path before/after (with .old/), host launch cost, the full bench sweep,
# the check against the float64 judge, fused precision by position.  Its companion,
# scripts/gpu_profile_controls.sh, records the explanations: ncu profile, controls, sanitizer,
# seed claims.
#
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried: .whl/ is
# git-ignored; the host's numpy 2.5 breaks numba-cuda 0.30.4) and, for the before/after rows, the
# reviewed code in .old/ (git archive e4c1533 ropelab | tar -x -C .old).  Records go to data/;
# after every step data/ is bundled into $OUT/data.tgz, so whatever finished before a time limit
# comes back.  Unpack here with: tar xzf data.tgz
LOG_NAME=course_records.log source "$(dirname "$0")/gpu_common.sh"

step 15  info      python3 -m ropelab info
step 70  gputests  python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_gpu_public_path.py tests/test_fused_twin.py
step 100 public    python3 scripts/public_path_before_after.py
step 45  overhead  python3 -m ropelab bench --overhead-only
step 230 bench     python3 -m ropelab bench --shapes all --budget-s 175 --no-overhead
step 60  check     python3 -m ropelab check
step 45  fusedprec python3 -m ropelab.measure.fused_precision --samples 32
echo "== [$(( $(date +%s) - T0 ))s] summary" | tee -a "$LOG"
python3 -m ropelab bench --recorded > "$OUT/summary.txt" 2>&1
bundle
ls -la "$OUT"
