#!/usr/bin/env bash
# The torch fused ops with a user cos_sin_cache (forward, autograd, opcheck, compile) on the H200.
LOG_NAME=torch_cache.log source "$(dirname "$0")/gpu_common.sh"

step 300 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_torch_fused_backward.py tests/test_torch_ops.py tests/test_gpu_fused_backward.py \
  tests/test_backward_ptx.py tests/test_sim_block.py
bundle
