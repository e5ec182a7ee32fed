#!/usr/bin/env bash
# A short H200 call after the bfloat16 pack change: the fused check against the float64 judge on
# production shapes, and the fused-only bench with the NeoX layout through the public call.
LOG_NAME=final.log source "$(dirname "$0")/gpu_common.sh"
step 70  check  python3 -m ropelab check --variant fused_qknorm_rope
step 150 bench  python3 -m ropelab bench --shapes production --variant fused_qknorm_rope --no-baselines --no-overhead --no-charts --budget-s 120
ls -la "$OUT"
