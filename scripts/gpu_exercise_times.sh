#!/usr/bin/env bash
# Every exercise solution graded on the H200 and timed against a device copy of the same bytes
# (`python -m ropelab exercises --time`; printed, no record), in one short call (limit 120 s).
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=exercise_times.log source "$(dirname "$0")/gpu_common.sh"

step 120 exercises python3 -m ropelab exercises --time
