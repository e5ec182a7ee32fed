#!/usr/bin/env bash
# ropelab inside a real model (notebook 09), in ONE H200 call (limits sum to 530 s):
#   1. GPU tests: a patched Qwen3's bfloat16 logits vs the original's (bf16 tolerance, against the
#      float64 model), the patched model under torch.compile(fullgraph=True), a planted layout
#   2. one Qwen3-8B-like decoder layer (hidden 4096, 32/8 heads, head_dim 128, bf16) at 4096
#      tokens: transformers / qkv_gemm control / ropelab, eager and compiled, forward and
#      forward+backward                                              -> data/real_model/
# Needs transformers on the host (the image has 5.17).  Run from the repository root with the
# numpy 2.4.6 cp312 wheel in .whl/ (carried).  Then rebuild notebook 09 on the CPU machine:
#   python scripts/notebooks/build.py --markdown-only 09
LOG_NAME=real_model.log source "$(dirname "$0")/gpu_common.sh"

python3 -c "import transformers; print('transformers', transformers.__version__)" 2>&1 | tee -a "$LOG"
step 150 gputests python3 -m pytest -o addopts="" -q -p no:cacheprovider --no-header -s \
  tests/test_gpu_models.py
step 380 layer    python3 -m ropelab.models.bench --record
bundle
ls -la "$OUT" data/real_model 2>&1 | tee -a "$LOG"
