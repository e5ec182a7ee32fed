#!/usr/bin/env bash
# Second records call: the public path before/after (each side from its own root), host launch
# cost, the check, fused precision by position, then the Nsight Compute profile and the controls.
set -uo pipefail
export PYTHONUNBUFFERED=1 ROPELAB_TARGET=gpu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || { echo "wheel install failed"; exit 1; }
export OUT=${OUT:-$PWD/out}
mkdir -p "$OUT" data
LOG="$OUT/session.log"; : > "$LOG"; T0=$(date +%s)
bundle() { tar czf "$OUT/data.tgz" --exclude='*.ncu-rep' --exclude='data/profile/reports' data 2>/dev/null; }
step() { local limit=$1 name=$2; shift 2
  echo "== [$(( $(date +%s) - T0 ))s] $name: $*" | tee -a "$LOG"
  timeout -k 5 "$limit" "$@" 2>&1 | grep -v "it/s\]\|s/it\]\|row/s\]\|s/row\]" | tee -a "$LOG"
  echo "== $name exit ${PIPESTATUS[0]}" | tee -a "$LOG"; bundle; }
step 60  public    python3 scripts/public_path_before_after.py
step 30  overhead  python3 -m ropelab bench --overhead-only
step 40  gputests  python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_gpu_public_path.py
step 110 check     python3 -m ropelab check
step 50  fusedprec python3 -m ropelab.measure.fused_precision --samples 32
step 200 profile   python3 -m ropelab profile --timeout-s 90 --reports "$OUT/ncu"
step 55  timing    python3 -m ropelab.measure.timing --rounds 8 --repeats 10
ls -la "$OUT"
