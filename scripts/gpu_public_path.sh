#!/usr/bin/env bash
# GPU run for the public path (issue 9): GPU tests of the public functions (torch tensors, streams,
# CUDA graphs, device error word), the check, the host launch cost table, and the bench with the
# public-call rows beside the kernel-only rows.  Records land in data/ and come back as
# $OUT/data.tgz (bundled after every step).  Needs .whl/ (numpy 2.4.6 cp312) carried.
set -uo pipefail
export PYTHONUNBUFFERED=1 ROPELAB_TARGET=gpu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || { echo "wheel install failed"; exit 1; }
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT" data; LOG="$OUT/session.log"; : > "$LOG"; T0=$(date +%s)
bundle() { tar czf "$OUT/data.tgz" data 2>/dev/null; }
run() { local limit=$1 name=$2; shift 2
  echo "== [$(( $(date +%s) - T0 ))s] $name: $*" | tee -a "$LOG"
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$LOG"; echo "== $name exit ${PIPESTATUS[0]}" | tee -a "$LOG"; bundle; }
run 30  info     python3 -m ropelab info
run 120 gputest  python3 -m pytest -o addopts="" -q -x -p no:cacheprovider tests/test_gpu_public_path.py
run 150 check    python3 -m ropelab check
run 60  overhead python3 -m ropelab bench --overhead-only
run ${BENCH_S:-330} bench python3 -m ropelab bench --shapes ${SHAPES:-seed,big,production} --budget-s ${BUDGET:-250} --no-overhead
python3 -m ropelab bench --recorded > "$OUT/summary.txt" 2>&1
ls -la "$OUT"
