#!/usr/bin/env bash
# One GPU session that records everything the course quotes, on the H200 host.
#
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried: .whl/ is
# git-ignored).  The host's numpy 2.5 breaks numba-cuda 0.30.4 (np.row_stack), hence the install.
# Records go to the repo's data/ there; after every step data/ is bundled into $OUT/data.tgz, so
# whatever finished before a timeout comes back.  Unpack it here with: tar xzf data.tgz -C data
#
# Order = importance: check, bench sweep (numba + copy + fused + CUDA C++ first, then eager
# PyTorch, then torch.compile; each group saved as it completes), launch overhead, precision,
# census with SASS.  Worst case about 8.5 minutes; typical less.
set -uo pipefail
export PYTHONUNBUFFERED=1 ROPELAB_TARGET=gpu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || { echo "wheel install failed"; exit 1; }

OUT=${OUT:-$PWD/out}
mkdir -p "$OUT" data
LOG="$OUT/session.log"
: > "$LOG"
T0=$(date +%s)

bundle() { tar czf "$OUT/data.tgz" data 2>/dev/null; }
step() {  # step SECONDS NAME ARGS...: run python -m ropelab ARGS with a time limit, log, bundle
  local limit=$1 name=$2; shift 2
  echo "== [$(( $(date +%s) - T0 ))s] $name: python3 -m ropelab $*" | tee -a "$LOG"
  timeout -k 5 "$limit" python3 -m ropelab "$@" 2>&1 | tee -a "$LOG"
  echo "== $name exit ${PIPESTATUS[0]}" | tee -a "$LOG"
  bundle
}

step 30  info      info
step 170 check     check
step 290 bench     bench --shapes all --budget-s 200 --no-overhead
step 45  overhead  bench --overhead-only
if python3 -m ropelab --help 2>/dev/null | grep -q precision; then
  step 80 precision precision
fi
step 60  census    census --sass --no-cache --save data/census/census-sass.json

echo "== [$(( $(date +%s) - T0 ))s] summary" | tee -a "$LOG"
python3 -m ropelab bench --recorded 2>&1 | tee "$OUT/summary.txt" | tee -a "$LOG"
bundle
ls -la "$OUT"
