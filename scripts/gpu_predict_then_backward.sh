#!/usr/bin/env bash
# One call of about 7 minutes: the prediction's GPU run on the held-out sets given (and the
# training kernels), then the backward bench and the training loop on the build as committed.
#   bash scripts/gpu_predict_then_backward.sh data/heldout/set_i ...
#     -> $OUT/timings-*.csv, $OUT/timings-*.meta.json (gpu_predict_timings.sh), data/bench_backward/,
#        $OUT/training_speed-*.json
# Run from the repository root with the numpy 2.4.6 cp312 and liger-kernel wheels in .whl/.
HERE="$(dirname "$0")"
bash "$HERE/gpu_predict_timings.sh" "$@"
LOG_NAME=backward_after_predict.log source "$HERE/gpu_common.sh"
step 150 backward python3 -m ropelab.measure.bench.backward
step 150 training python3 scripts/gpu_training_speed.py --out "$OUT"
bundle
