#!/usr/bin/env bash
# Second records call: the public path before/after (each side from its own root), host launch
# cost, the check, fused precision by position, then the Nsight Compute profile and the controls.
LOG_NAME=session.log source "$(dirname "$0")/gpu_common.sh"
step 60  public    python3 scripts/public_path_before_after.py
step 30  overhead  python3 -m ropelab bench --overhead-only
step 40  gputests  python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_gpu_public_path.py
step 110 check     python3 -m ropelab check
step 50  fusedprec python3 -m ropelab.measure.fused_precision --samples 32
step 200 profile   python3 -m ropelab profile --timeout-s 90 --reports "$OUT/ncu"
step 55  timing    python3 -m ropelab.measure.timing --rounds 8 --repeats 10
ls -la "$OUT"
