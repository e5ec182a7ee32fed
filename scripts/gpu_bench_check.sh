#!/usr/bin/env bash
# Every bench of ropelab.measure.bench runs on the H200 and writes a record of its kind, in short
# runs (limits sum to 420 s; about 5 minutes): the sweep on the seed shapes with the baselines and
# the launch overhead, the rows of plain RoPE as models call it, the backward on one shape, the
# torch ops, the controls on one shape, and the fast path's host time.  Run it after a change to
# the bench package, before trusting a long session to it.
#
# The records are NOT data/ records (short runs, one shape): they are written under a data root
# of their own and come back as $OUT/bench_check.tgz, to read, never to unpack into data/.
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).
LOG_NAME=bench_check.log source "$(dirname "$0")/gpu_common.sh"
ROOT=/tmp/bench_check  # a data root: each bench writes ROOT/<kind>/

step 100 sweep    python3 -m ropelab bench --shapes seed --budget-s 60 --no-charts --out "$ROOT"
step 60  rows     python3 -m ropelab bench --shapes rows --kind bench_rows --variant rope_rows \
  --no-overhead --no-charts --no-baselines --budget-s 40 --out "$ROOT"
step 90  backward python3 -m ropelab.measure.bench.backward --shapes flux_1024 --repeats 10 --out "$ROOT"
step 100 torchops python3 -m ropelab.measure.bench.torch_ops --record --out "$ROOT"
step 40  controls python3 -m ropelab.measure.bench.controls --shapes 4096x512 --rounds 2 --repeats 5 --out "$ROOT"
step 30  hostpath python3 -m ropelab.measure.bench.host_path --stub-launch
say "records"
ls -R "$ROOT" 2>&1 | tee -a "$LOG"
tar czf "$OUT/bench_check.tgz" -C "$ROOT" . 2>/dev/null
