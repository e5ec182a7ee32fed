#!/usr/bin/env bash
# The public call's host time, in one short H200 call (limits sum to 130 s); run it before and
# after a change to the call engine (ropelab/ops/) to see what the change costs the host:
#   1. host launch overhead, interleaved rounds                     -> data/launch_overhead/
#   2. the fast path's Python cost on this host, the hit and its parts (printed)
LOG_NAME=host_time.log source "$(dirname "$0")/gpu_common.sh"

step 90 overhead python3 -m ropelab bench --overhead-only --no-charts
step 40 hostpath python3 -m ropelab.measure.bench.host_path --stub-launch
bundle
