#!/usr/bin/env bash
# Issue 19's evidence in ONE H200 call (< 9.5 minutes):
#   1. GPU tests: the public path (engine fixes: misaligned bf16 after aligned, raw streams,
#      side-stream check_errors, bounded tables), rope_rows / rope_qk, torch custom ops (compiled,
#      CUDA-graph capture, backward on the device), the user cos/sin cache
#   2. plain RoPE as models call it (kind bench_rows): bf16 32768x32x128 through ropelab.rope vs
#      the copy, rope_qk vs two single calls vs the copy, the mapping controls
#   3. torch custom ops eager vs torch.compile(fullgraph=True)      -> data/torch_ops/
#   4. host launch overhead of the public calls (the fast path)    -> data/launch_overhead/
#   5. every exercise solution graded on the GPU and timed against a device copy (no record)
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=models_a.log source "$(dirname "$0")/gpu_common.sh"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG"
step 150 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_public_path.py tests/test_gpu_rope_rows.py tests/test_torch_ops.py tests/test_fused_cache.py tests/test_engine.py
step 170 rows     python3 -m ropelab bench --shapes rows --kind bench_rows --variant rope_rows \
  --no-overhead --no-charts --no-baselines --budget-s 150
step 150 torchops python3 -m ropelab.measure.torch_bench --record
step 60  overhead python3 -m ropelab bench --overhead-only --no-charts
step 120 exercises python3 -m ropelab exercises --time
bundle
ls -la "$OUT" data/bench_rows data/torch_ops 2>&1 | tee -a "$LOG"
