#!/usr/bin/env bash
# compute-sanitizer over `python -m ropelab check` on the GPU: memcheck (every global/local access
# of every kernel against its allocation, and CUDA API errors) and racecheck (shared-memory
# hazards), both over all variants and the fused kernel, run side by side (the check is mostly
# host-side reference math).  Logs go to $OUT/sanitizer/, and one record (tool, version, errors
# found, the check's pass/fail count, command, date, GPU) to data/sanitizer/, copied to $OUT too.
#
# Run from the repository root on the GPU host (python3 must import ropelab with numpy < 2.5; see
# scripts/gpu_common.sh).  Environment: OUT (default ./out), SANITIZER_LIMIT_S (per tool, 240),
# COMPUTE_SANITIZER (path, default: PATH, then /usr/local/cuda*/bin).
set -uo pipefail
export PYTHONUNBUFFERED=1 ROPELAB_TARGET=gpu
OUT=${OUT:-$PWD/out}
LIMIT=${SANITIZER_LIMIT_S:-240}
SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls -d /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -r | head -1)}
if [ -z "$SAN" ] || [ ! -x "$SAN" ]; then
  echo "sanitize.sh: compute-sanitizer not found (set COMPUTE_SANITIZER)" >&2
  exit 3
fi
mkdir -p "$OUT/sanitizer"
echo "sanitize.sh: $SAN ($("$SAN" --version 2>/dev/null | grep -i version | head -1))"

declare -A PIDS START
for tool in memcheck racecheck; do
  START[$tool]=$(date +%s)
  # --error-exitcode 86: a nonzero status that says "the sanitizer found errors", apart from the
  # check's own failure (1) and the time limit (124).
  timeout -k 10 "$LIMIT" "$SAN" --tool "$tool" --target-processes all --error-exitcode 86 \
    python3 -m ropelab check > "$OUT/sanitizer/$tool.log" 2>&1 &
  PIDS[$tool]=$!
done
RUNS=()
for tool in memcheck racecheck; do
  wait "${PIDS[$tool]}"; rc=$?
  secs=$(( $(date +%s) - START[$tool] ))
  echo "sanitize.sh: $tool exit $rc after ${secs} s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer/$tool.log" | tail -1)"
  RUNS+=(--run "$tool" "$OUT/sanitizer/$tool.log" "$rc" "$secs")
done
python3 -m ropelab.measure.sanitizer --sanitizer "$SAN" --options " --target-processes all --error-exitcode 86" "${RUNS[@]}"
status=$?
newest=$(ls -t data/sanitizer/sanitizer-*.json 2>/dev/null | head -1)
[ -n "$newest" ] && cp "$newest" "${newest%.json}.csv" "$OUT/sanitizer/" 2>/dev/null
exit $status
