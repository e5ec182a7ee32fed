#!/usr/bin/env bash
# The fused kernel's public call in both layouts, its kernel alone, its settings and controlled
# rows, one fused-only record (kind bench_fused), with the same-run copy (limit 215 s): heads per
# warp 1 / 2 / 4, NeoX with partner shuffles vs split pairs, one token per block vs token rows,
# and the cos/sin cache path.
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=fused_sweep.log source "$(dirname "$0")/gpu_common.sh"
step 215 bench python3 -m ropelab bench --shapes production --kind bench_fused --no-overhead --no-charts --budget-s 195 \
  --variant fused_qknorm_rope:default --variant fused_qknorm_rope:neox --variant fused_qknorm_rope:kernel \
  --variant fused_qknorm_rope_1head --variant fused_qknorm_rope_2heads --variant fused_qknorm_rope_4heads \
  --variant fused_qknorm_rope:neox_shuffle --variant fused_qknorm_rope:1token_blocks --variant fused_qknorm_rope:cache
bundle
ls -la "$OUT"
