#!/usr/bin/env bash
# The training path's host cost and speed on the H200, in one short call (limits sum to 420 s):
#   1. the CPU probe of the ops' host cost with the launch stubbed (a reference beside 2)
#   2. host us per call, direct vs torch op (rope, rope_qk, fused forward, fused backward), and
#      50 training iterations of rt.fused_qknorm_rope forward + backward in bf16 at flux_1024,
#      qwen_image_1024, zimage_1024, GPT-J and NeoX, beside torch.compile of the same math and
#      (NeoX) Liger-Kernel's RMSNorm + RoPE chain (carry the liger-kernel wheel in .whl/);
#      and (forward rows) the functional forward's one pass against copy + in place, cold L2
#                                                         -> $OUT/training_speed-GPU-STAMP.json (a data/training_speed/ record)
LOG_NAME=training_speed.log source "$(dirname "$0")/gpu_common.sh"

step 120 probe python3 scripts/host_cost_probe.py --json "$OUT/host_cost_probe.json"
step 300 training python3 scripts/gpu_training_speed.py --out "$OUT"
bundle
