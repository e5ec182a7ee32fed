#!/usr/bin/env bash
# Plain RoPE the way models call it, and the torch custom ops, in ONE H200 call (limits sum to
# 470 s):
#   1. GPU tests: the public path, rope_rows / rope_qk, 16-bit pair_sincos / pack4, the torch
#      custom ops (compiled, CUDA-graph capture, backward on the device, a user cos_sin_cache),
#      the fused op's cos/sin cache, the engine on device arrays
#   2. plain RoPE as models call it (kind bench_rows): bf16 32768x32x128 through ropelab.rope vs
#      the copy, rope_qk vs two single calls vs the copy, the mapping controls, the 16-bit
#      pair_sincos / pack4 builds                                   -> data/bench_rows/
#   3. torch custom ops eager vs torch.compile(fullgraph=True)      -> data/torch_ops/
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=model_calls.log source "$(dirname "$0")/gpu_common.sh"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG"
step 150 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_public_path.py tests/test_gpu_rope_rows.py tests/test_gpu_rope16_variants.py \
  tests/test_torch_ops.py tests/test_fused_cache.py tests/test_engine.py
step 170 rows     python3 -m ropelab bench --shapes rows --kind bench_rows --variant rope_rows \
  --no-overhead --no-charts --no-baselines --budget-s 150
step 150 torchops python3 -m ropelab.measure.bench.torch_ops --record
bundle
ls -la "$OUT" data/bench_rows data/torch_ops 2>&1 | tee -a "$LOG"
