#!/usr/bin/env bash
# The grader's defences where it cannot fork, on one H200 (well under 6 minutes):
#   1. every solution graded and timed on the GPU (exercises --time): the tamper inventory
#      raises no false alarm, the timing's reset of out before each timed launch, its check of
#      the last timed run and its floor against a device copy pass every honest kernel;
#   2. scripts/gpu_grader_integrity.py: a function that imports the grader is refused before
#      it runs; then, that first rule lifted, honest functions pass and are timed; a frame hunt,
#      a patched judge, work skipped on later calls, a patched clock and a non-blocking stream
#      are each refused or not timed (it exits 1 on any row not as expected).
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=grader_integrity.log source "$(dirname "$0")/gpu_common.sh"

step 240 time     python3 -m ropelab exercises --time
step 120 exploits python3 scripts/gpu_grader_integrity.py
ls -la "$OUT" | tee -a "$LOG"
