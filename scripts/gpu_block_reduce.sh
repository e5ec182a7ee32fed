#!/usr/bin/env bash
# The H200 check after the suite-time work (one call, < 9.5 minutes):
#   1. GPU tests: the fused backward (its reduction now takes its height from the block), the
#      CUDA graph of forward + backward, autograd on CUDA, the block/warp kernels of
#      tests/test_sim_block.py and test_warp.py on hardware, the public path
#   2. forward + backward vs the copy roof again, on the changed reduction -> data/bench_backward/
#   3. compute-sanitizer memcheck over `ropelab check` (every registered kernel on the GPU)
# Run from the repository root with the numpy 2.4.6 cp312 wheel and the liger-kernel 0.8.5
# wheel in .whl/ (carried).
LOG_NAME=block_reduce.log source "$(dirname "$0")/gpu_common.sh"

step 150 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_fused_backward.py tests/test_torch_fused_backward.py tests/test_sim_block.py \
  tests/test_warp.py tests/test_gpu_public_path.py tests/test_fused_backward.py
step 300 backward python3 -m ropelab.measure.bench_backward
step 100 memcheck compute-sanitizer --tool memcheck --print-limit 20 python3 -m ropelab check
bundle
ls -la "$OUT" data/bench_backward 2>&1 | tee -a "$LOG"
