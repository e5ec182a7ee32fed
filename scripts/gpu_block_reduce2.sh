#!/usr/bin/env bash
# After scripts/gpu_block_reduce.sh found the two-stage backward ~4 us slower with the reduction's
# height read from blockDim: the height compiled in again (make_reduce), re-checked and re-timed.
#   1. GPU tests of the fused backward (device vs judge, bits, CUDA graph, autograd on CUDA)
#   2. forward + backward vs the copy roof                          -> data/bench_backward/
#   3. compute-sanitizer memcheck over `ropelab check`, host API probes not reported
LOG_NAME=block_reduce2.log source "$(dirname "$0")/gpu_common.sh"

step 120 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_fused_backward.py tests/test_torch_fused_backward.py tests/test_backward_ptx.py
step 200 backward python3 -m ropelab.measure.bench_backward
step 100 memcheck compute-sanitizer --tool memcheck --report-api-errors no --print-limit 20 \
  python3 -m ropelab check
bundle
