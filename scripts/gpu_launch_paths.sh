#!/usr/bin/env bash
# Host time of one launch by each route on the H200 (under a minute): Bound.fire through
# cuda-bindings, the driver's cuLaunchKernel through ctypes, CuPy's RawKernel with as many
# arguments (scripts/launch_paths_probe.py)              -> $OUT/launch_paths.json
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=launch_paths.log source "$(dirname "$0")/gpu_common.sh"

step 60 launchpaths python3 scripts/launch_paths_probe.py --json "$OUT/launch_paths.json"
step 60 launchpaths2 python3 scripts/launch_paths_probe.py --json "$OUT/launch_paths_2.json"
