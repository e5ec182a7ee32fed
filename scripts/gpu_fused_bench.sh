#!/usr/bin/env bash
# The fused QK-RMSNorm + RoPE kernel against the copy and its CUDA C++ twin, in one record (ONE
# H200 call, limits sum to 420 s):
#   1. GPU tests: the bfloat16 pack (cvt.rn.bf16x2.f32 gives, bit for bit, what the simulator's
#      twin gives: operand order, rounding, NaN), the public path, the CUDA C++ twin
#   2. the fused kernel against the float64 judge on the production shapes, and the twin too
#   3. the production shapes through ropelab.fused_qknorm_rope, the kernel alone, every mapping
#      row, and the baselines (cuda_fused / cuda_fused_neox, the twin) in the same run, so every
#      row has the same-run copy as its roof                      -> data/bench/
# The fused kernel's settings and controlled rows alone are scripts/gpu_fused_sweep.sh; its
# Nsight Compute profile is part of scripts/gpu_profile_controls.sh.
#
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried: .whl/ is
# git-ignored; the host's numpy 2.5 breaks numba-cuda 0.30.4).  After every step data/ is
# bundled into $OUT/data.tgz.  Unpack here with: tar xzf data.tgz
LOG_NAME=fused_bench.log source "$(dirname "$0")/gpu_common.sh"

step 100 gputests  python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_bf16.py \
  tests/test_gpu_public_path.py tests/test_fused_twin.py
step 70  check     python3 -m ropelab check --variant fused_qknorm_rope
step 50  twincheck python3 -c "from ropelab.measure import baselines as b; rows = b.check_twin(); [print(r) for r in rows]; print('twin check:', sum(r.passed for r in rows), 'of', len(rows), 'passed')"
step 200 bench     python3 -m ropelab bench --shapes production --variant fused_qknorm_rope --no-overhead --no-charts --budget-s 170
say "summary"
python3 -m ropelab bench --recorded > "$OUT/summary.txt" 2>&1
bundle
ls -la "$OUT"
