# Sourced by the scripts/gpu_*.sh sessions (not run on its own): the environment every H200 call
# needs, and the one `step` helper they share.
#
# The host's numpy 2.5 breaks numba-cuda 0.30.4 (np.row_stack), so the carried numpy 2.4.6 cp312
# wheel in .whl/ is installed under /tmp/site first, with greenlet (the simulator's scheduler needs
# it where a GPU run grades on the simulator; the image has none).  Each step runs with a time limit, is logged
# to $LOG, and is followed by a bundle of data/ into $OUT/data.tgz, so whatever finished before a
# limit comes back.  Set LOG_NAME before sourcing to name the log.
set -uo pipefail
export PYTHONUNBUFFERED=1 ROPELAB_TARGET=gpu
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || { echo "wheel install failed"; exit 1; }
export OUT=${OUT:-$PWD/out}
mkdir -p "$OUT" data
LOG="$OUT/${LOG_NAME:-session.log}"
: > "$LOG"
T0=$(date +%s)
say() { echo "== [$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
bundle() { tar czf "$OUT/data.tgz" --exclude='*.ncu-rep' --exclude='data/profile/reports' data 2>/dev/null; }
step() {  # step SECONDS NAME COMMAND...: run with a time limit (progress bars dropped), log, bundle
  local limit=$1 name=$2; shift 2
  say "$name: $*"
  timeout -k 10 "$limit" "$@" 2>&1 | grep -v "it/s\]\|s/it\]\|row/s\]\|s/row\]" | tee -a "$LOG"
  say "$name exit ${PIPESTATUS[0]}"
  bundle
}
