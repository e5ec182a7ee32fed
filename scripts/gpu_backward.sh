#!/usr/bin/env bash
# The fused QK-RMSNorm + RoPE backward on the H200, in ONE call (limits sum to 480 s; about 400 s):
#   1. GPU tests: the backward on the device (vs the float64 judge, two-stage bits, atomic, the
#      CUDA graph of forward + backward), its PTX, autograd on CUDA, the block/warp helpers its
#      reduction uses (tests/test_sim_block.py, test_warp.py) on hardware
#   2. forward + backward vs the copy roof of their bytes, torch.compile's backward, Liger's
#      RMSNorm + RoPE backward chained, two-stage vs atomic dw     -> data/bench_backward/
#   3. Nsight Compute on the fused forward and backward (flux_1024 bf16, both layouts): DRAM
#      throughput, warp stalls, memory traffic                      -> $OUT/ncu_backward.txt
#   4. compute-sanitizer memcheck over `ropelab check` (every registered kernel on the GPU),
#      host API probes not reported (cuda-bindings' cuGetProcAddress misses are not kernel errors)
# Run from the repository root with the numpy 2.4.6 cp312 wheel and the liger-kernel 0.8.5
# wheel in .whl/ (carried).
LOG_NAME=backward.log source "$(dirname "$0")/gpu_common.sh"

step 150 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_fused_backward.py tests/test_backward_ptx.py tests/test_torch_fused_backward.py \
  tests/test_fused_backward.py tests/test_sim_block.py tests/test_warp.py
step 150 backward python3 -m ropelab.measure.bench.backward
NCU=$(command -v ncu || ls -d /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
step 80  ncu "$NCU" --clock-control none --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --kernel-name regex:qknorm python3 scripts/profile_backward.py
grep -v "^==PROF==" "$LOG" | sed -n '/ncu:/,$p' > "$OUT/ncu_backward.txt"
step 100 memcheck compute-sanitizer --tool memcheck --report-api-errors no --print-limit 20 \
  python3 -m ropelab check
bundle
ls -la "$OUT" data/bench_backward 2>&1 | tee -a "$LOG"
