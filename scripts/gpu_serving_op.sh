#!/usr/bin/env bash
# The serving op (ropelab.fused_qknorm_rope_kv: QK-RMSNorm + RoPE + the paged KV-cache write) on
# the H200, in ONE call (limits sum to 240 s):
#   1. GPU tests (tests/test_gpu_fused_kv.py): the kernel against the float64 judge (fast-math
#      build, every storage, FP8, Gemma), bit for bit against fused_qknorm_rope + torch
#      index_copy_ (and torch's FP8 cast) on CUDA tensors, the e4m3 conversion compiled with
#      fast-math against torch on 1M values, a CUDA graph replay, the slot error word
#   2. the bench: prefill qwen3-8b 4x1024, decode 64x1 and 1x1 (CUDA graphs of 20 calls), prefill
#      flux 4x1024; bfloat16 and FP8 caches; the op against a copy of the same bytes,
#      fused_qknorm_rope + torch scatter, torch.compile of the chain  -> data/serving/ (saved
#      after each case: a time limit keeps what finished)
# Run from the repository root with the numpy 2.4.6 cp312 wheel in .whl/ (carried).  Comes
# back: $OUT/serving.log (the tests' summary, the tables, one verdict line per case), and
# $OUT/data.tgz holding data/serving/serving-*.json.
LOG_NAME=serving.log source "$(dirname "$0")/gpu_common.sh"

step 90 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header \
  tests/test_gpu_fused_kv.py
step 150 bench python3 -m ropelab.measure.bench.serving --record
bundle
ls -la "$OUT" data/serving 2>&1 | tee -a "$LOG"
