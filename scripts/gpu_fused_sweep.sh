#!/usr/bin/env bash
# The fused kernel's settings and controlled rows on the final mapping, one fused-only record
# (kind bench_fused): heads per warp 1 / 2 / 4, NeoX with partner shuffles vs split pairs, one
# token per block vs token rows, and the cos/sin cache path, with the same-run copy.  < 4 min.
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=fused_sweep.log source "$(dirname "$0")/gpu_common.sh"
step 215 bench python3 -m ropelab bench --shapes production --kind bench_fused --no-overhead --no-charts --budget-s 195 \
  --variant fused_qknorm_rope:default --variant fused_qknorm_rope:neox \
  --variant fused_qknorm_rope_1head --variant fused_qknorm_rope_2heads --variant fused_qknorm_rope_4heads \
  --variant fused_qknorm_rope:neox_shuffle --variant fused_qknorm_rope:1token_blocks --variant fused_qknorm_rope:cache
bundle
ls -la "$OUT"
