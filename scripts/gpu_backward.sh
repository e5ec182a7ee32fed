#!/usr/bin/env bash
# Issue 20's backward evidence, plus the fast path's host time, in ONE H200 call (< 9.5 minutes):
#   1. GPU tests: the fused backward on the device (vs the float64 judge, two-stage bits, atomic,
#      autograd on CUDA), the public path after the fast-path changes
#   2. forward + backward vs the copy roof of their bytes, torch.compile's backward, Liger's
#      RMSNorm + RoPE backward chained, two-stage vs atomic dw     -> data/bench_backward/
#   3. host launch overhead, interleaved rounds                     -> data/launch_overhead/
#   4. the fast path's Python cost on this host, new vs the cf71f61 path (printed only)
# Run from the repository root with the numpy 2.4.6 cp312 wheel and the liger-kernel 0.8.5
# wheel in .whl/ (carried).
LOG_NAME=backward.log source "$(dirname "$0")/gpu_common.sh"

step 130 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_fused_backward.py tests/test_backward_ptx.py tests/test_torch_fused_backward.py \
  tests/test_gpu_public_path.py tests/test_fastpath_refusals.py
step 330 backward python3 -m ropelab.measure.bench_backward
step 60  overhead python3 -m ropelab bench --overhead-only --no-charts
step 30  hostpath python3 -m ropelab.measure.bench.host_path --stub-launch
bundle
ls -la "$OUT" data/bench_backward 2>&1 | tee -a "$LOG"
