#!/usr/bin/env bash
# The fused backward's bytes in flight chosen and timed on the H200, in ONE call (limits sum to
# 560 s):
#   1. the sweep of gpu_backward_units.sh (units a warp loads per pass x the grid's cap)
#                                                          -> $OUT/units/bench_backward/*.json
#   2. backward.UNITS_PER_PASS set, in this copy of the tree, to the sweep's fastest U
#      (scripts/pick_backward_units.py; the log says which, and the tree here must then be
#      given the same value before the records are committed)
#   3. the backward's device tests on that build (vs the float64 judge, autograd on CUDA)
#   4. the backward bench (direct calls, peers)                -> data/bench_backward/
#   5. the training loop through autograd (gpu_training_speed.py) -> $OUT/training_speed-*.json
# Run from the repository root with the numpy 2.4.6 cp312 and liger-kernel wheels in .whl/.
LOG_NAME=backward_tuned.log source "$(dirname "$0")/gpu_common.sh"

step 200 sweep python3 -m ropelab.measure.bench.backward --out "$OUT/units" \
  --entries ropelab:bwd:kernel,ropelab:fwd+bwd:kernel
U=$(python3 scripts/pick_backward_units.py --table "$OUT"/units/bench_backward/*.json 2>>"$LOG")
[ -n "$U" ] || { say "no U picked"; exit 1; }
say "units_per_pass picked: $U"
sed -i "s/^UNITS_PER_PASS = .*/UNITS_PER_PASS = $U/" ropelab/kernels/fused_qknorm_rope/backward.py
grep -qx "UNITS_PER_PASS = $U" ropelab/kernels/fused_qknorm_rope/backward.py \
  || { say "UNITS_PER_PASS not set"; exit 1; }
step 60 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_fused_backward.py tests/test_torch_fused_backward.py
step 150 backward python3 -m ropelab.measure.bench.backward
step 150 training python3 scripts/gpu_training_speed.py --out "$OUT"
bundle
