#!/usr/bin/env bash
# One H200 call for the fused kernel's second mapping (32-bit indexing, scale folded into cos/sin,
# NeoX pairs held by one lane, token rows in a block): GPU tests, the check against the float64
# judge and of the CUDA C++ twin, the fused-only bench with the twins in the same run, and an
# Nsight Compute profile of the fused group (recorded under $OUT/prof, for reading; the full
# profile of every kernel is scripts/gpu_evidence.sh).  < 9 minutes.
#
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=fused_v2.log source "$(dirname "$0")/gpu_common.sh"

step 20  info      python3 -m ropelab info
step 90  gputests  python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_gpu_public_path.py tests/test_fused_twin.py
step 90  check     python3 -m ropelab check --variant fused_qknorm_rope
step 60  twincheck python3 -c "from ropelab.measure import baselines as b; rows = b.check_twin(); [print(r) for r in rows]; print('twin check:', sum(r.passed for r in rows), 'of', len(rows), 'passed')"
step 200 bench     python3 -m ropelab bench --shapes production --variant fused_qknorm_rope --no-overhead --no-charts --budget-s 170
step 130 profile   python3 -m ropelab profile --groups fused --timeout-s 120 --reports /tmp/ncu --out "$OUT/prof"
say "summary"
python3 -m ropelab bench --recorded > "$OUT/summary.txt" 2>&1
bundle
ls -la "$OUT" "$OUT/prof"/* 2>/dev/null
