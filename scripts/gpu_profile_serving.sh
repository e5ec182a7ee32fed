#!/usr/bin/env bash
# Nsight Compute on the serving op (every bench case, bfloat16 and FP8 caches) and on plain
# bfloat16 RoPE [32768, 32, 128] on the H200, in one short call (about 2 minutes):
# DRAM throughput against peak, warp stalls, memory traffic, launch geometry and occupancy
#                                                          -> $OUT/ncu_serving.txt
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=profile_serving.log source "$(dirname "$0")/gpu_common.sh"

NCU=$(command -v ncu || ls -d /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
step 240 ncu "$NCU" --clock-control none --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  python3 scripts/profile_serving.py
grep -v "^==PROF==" "$LOG" | sed -n '/ncu:/,$p' > "$OUT/ncu_serving.txt"
