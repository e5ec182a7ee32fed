#!/usr/bin/env bash
# The public call's host time after the engine's shared _prepare (38dcce1), re-measured:
#   1. host launch overhead, interleaved rounds                     -> data/launch_overhead/
#   2. the fast path's Python cost on this host (printed)
LOG_NAME=host_time.log source "$(dirname "$0")/gpu_common.sh"

step 90 overhead python3 -m ropelab bench --overhead-only --no-charts
step 40 hostpath python3 -m ropelab.measure.bench.host_path --stub-launch
bundle
