#!/usr/bin/env bash
# The fused backward's bytes in flight on the H200, in one short call (limits sum to 350 s):
#   1. the backward's tests on the GPU (every units_per_pass build against the float64 judge and
#      against one unit a pass)
#   2. the backward kernel alone (pre-bound launches, cold L2) on the production shapes, both
#      layouts, swept over units a warp loads before it computes (1 .. 4) x the grid's cap
#      (2 .. 6 blocks an SM), beside the copy roof     -> $OUT/units/bench_backward/*.json
# The builds' registers (so the blocks an SM holds) come from nvJitLink without a GPU.
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=backward_units.log source "$(dirname "$0")/gpu_common.sh"

step 150 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_fused_backward.py tests/test_bench_backward.py
step 200 sweep python3 -m ropelab.measure.bench.backward --out "$OUT/units" \
  --entries ropelab:bwd:kernel,ropelab:fwd+bwd:kernel
ls -la "$OUT" "$OUT/units" 2>&1 | tee -a "$LOG"
