#!/usr/bin/env bash
# The fused kernel against copy and its CUDA C++ twin, in one record (one H200 call, < 5 min).
#
#   bash scripts/gpu_fused_bench.sh
#
# For the bfloat16 pack through cvt.rn.bf16x2.f32 (ropelab.bf16.pack2): first the GPU checks
# that the instruction gives, bit for bit, what the simulator's twin gives (operand order,
# rounding, NaN) and the fused public-path tests; then the production shapes through
# ropelab.fused_qknorm_rope, the kernel alone, and the baselines (cuda_fused / cuda_fused_neox,
# the CUDA C++ twin) in the same run, so every row has the same-run copy as its roof.
#
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried: .whl/ is
# git-ignored; the host's numpy 2.5 breaks numba-cuda 0.30.4).  The record goes to data/bench/;
# after every step data/ is bundled into $OUT/data.tgz.  Unpack here with: tar xzf data.tgz
LOG_NAME=fused_bench.log source "$(dirname "$0")/gpu_common.sh"

step 40  bf16tests python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_bf16.py
step 60  gputests  python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_gpu_public_path.py -k fused
step 185 bench     python3 -m ropelab bench --shapes production --variant fused_qknorm_rope --no-overhead --budget-s 150
echo "== [$(( $(date +%s) - T0 ))s] summary" | tee -a "$LOG"
python3 -m ropelab bench --recorded > "$OUT/summary.txt" 2>&1
bundle
ls -la "$OUT"
