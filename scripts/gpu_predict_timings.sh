#!/usr/bin/env bash
# The prediction's H200 run in ONE call of about 7 minutes:
#   every training kernel (ropelab's solutions, data/predict/training/learner_*.py: learner-style
#   kernels for every timed step, ropelab's variants and controls on step 02.3) and every entry of
#   every learner_*.py in the set directories given, each on its step's timing case through
#   verdict.time()'s GPU path (learner_time.measure_on_gpu: the cold-L2 timer, a device copy of
#   the same bytes), after a check of its output against the float64 reference on that case.
# Held-out sets are timed first; 12 processes compile every kernel into numba's disk cache first
# (about a second a kernel), then one process times them one after another (15 repeats each).
# A kernel that fails to compile, is wrong on the GPU or faults gets a row that says so; a fault
# restarts the timing process for the rest.
#
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried):
#   bash scripts/gpu_predict_timings.sh data/heldout/set_a .heldout_b
# Comes back under $OUT: timings-<set>-<stamp>.csv per set (training, set_a, heldout_b),
# timings-<stamp>.meta.json (GPU, driver, versions, date), predict.log, data.tgz.
# Test it here first: python -m ropelab.grader.predict.timings --dry-run [SET_DIR ...] (the
# simulator: every case, launch and feature, no times).
LOG_NAME=predict.log source "$(dirname "$0")/gpu_common.sh"
export NUMBA_CACHE_DIR=/tmp/numba-predict-cache

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu \
  --format=csv 2>&1 | tee -a "$LOG"
step 430 timings python3 -m ropelab.grader.predict.timings --out "$OUT" --workers 12 \
  --deadline 390 --repeats 15 "$@"
ls -la "$OUT" 2>&1 | tee -a "$LOG"
