#!/usr/bin/env bash
# The one call engine on the H200 (ops describe the call, ops/call.py runs it), in order of
# importance, each step with its own limit (whatever finished comes back):
#   1. the GPU tests of the device route: first and cached calls of each op, overlap refusals on
#      device arrays, zero tokens, streams and CUDA graphs, the fused backward's outputs and dw
#      modes, its torch op; the CPU tests of the same rules run here on real device arrays;
#   2. the host launch overhead of the public call, interleaved rounds -> data/launch_overhead/;
#   3. the fast path's Python cost on this host (printed; compare with the CPU numbers);
#   4. the torch ops on CUDA tensors (torch.compile: the slowest, last).
LOG_NAME=engine.log source "$(dirname "$0")/gpu_common.sh"

step 200 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_public_path.py tests/test_gpu_rope_rows.py tests/test_gpu_rope16_variants.py \
  tests/test_gpu_fused_backward.py tests/test_engine.py tests/test_engine_rules.py \
  tests/test_fastpath_refusals.py tests/test_torch_fused_backward.py
step 60 overhead python3 -m ropelab bench --overhead-only --no-charts
step 40 hostpath python3 -m ropelab.measure.bench.host_path --stub-launch
step 120 torchops python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_torch_ops.py
bundle
