#!/usr/bin/env bash
# The closing H200 call of the session for issues 19 and 20 (< 9.5 minutes):
#   1. GPU tests, each with a 60 s limit: the fused backward (public call after its port onto the
#      call engine), 16-bit pair_sincos / pack4, rope_rows, the public path
#   2. the backward bench again (public call at kernel speed?)    -> data/bench_backward/
#   3. plain RoPE as models call it, with 16-bit pair_sincos/pack4 -> data/bench_rows/
#   4. Nsight Compute on the fused forward and backward (flux_1024 bf16, both layouts): why the
#      backward stays below the copy roof (printed to $OUT/ncu_backward.txt)
# Run from the repository root with the numpy 2.4.6 and liger-kernel wheels in .whl/ (carried).
LOG_NAME=final.log source "$(dirname "$0")/gpu_common.sh"

step 130 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header -p timeout \
  --timeout 60 --durations=8 tests/test_gpu_fused_backward.py tests/test_torch_fused_backward.py \
  tests/test_gpu_rope16_variants.py tests/test_gpu_rope_rows.py tests/test_gpu_public_path.py
step 230 backward python3 -m ropelab.measure.bench_backward
step 80  rows     python3 -m ropelab bench --shapes rows --kind bench_rows --variant rope_rows \
  --no-overhead --no-charts --no-baselines --budget-s 70
NCU=$(command -v ncu || ls -d /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
step 80  ncu "$NCU" --clock-control none --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --kernel-name regex:qknorm python3 scripts/profile_backward.py
grep -v "^==PROF==" "$LOG" | sed -n '/ncu:/,$p' > "$OUT/ncu_backward.txt"
bundle
ls -la "$OUT" 2>&1 | tee -a "$LOG"
