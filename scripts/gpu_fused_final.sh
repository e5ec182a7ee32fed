#!/usr/bin/env bash
# The closing H200 call for the fused kernel's second mapping (< 9 minutes):
#   1. GPU tests: public path, CUDA graphs, and the CUDA C++ twin against the float64 judge
#   2. fused-only bench (kind bench_fused): the public call in both layouts, the kernel alone,
#      and the CUDA C++ twin (cuda_fused, cuda_fused_neox) in the same run, same-run copy roof
#   3. Nsight Compute profile of every kernel (plain, controls, fused) -> data/profile/
#   4. compute-sanitizer memcheck + racecheck over python -m ropelab check -> data/sanitizer/
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=fused_final.log source "$(dirname "$0")/gpu_common.sh"

step 45  gputests  python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_gpu_public_path.py
step 150 bench     python3 -m ropelab bench --shapes production --kind bench_fused --no-overhead --no-charts --budget-s 125 \
  --variant fused_qknorm_rope:default --variant fused_qknorm_rope:neox --variant fused_qknorm_rope:kernel
step 215 profile   python3 -m ropelab profile --timeout-s 95 --reports /tmp/ncu
step 115 sanitize  env SANITIZER_LIMIT_S=100 bash scripts/sanitize.sh
say "summary"
{ python3 -m ropelab profile --recorded; cat data/sanitizer/sanitizer-*.csv | tail -2; } > "$OUT/summary.txt" 2>&1
bundle
ls -la "$OUT"
