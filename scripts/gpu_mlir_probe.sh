#!/usr/bin/env bash
# numba-cuda-mlir beside numba-cuda on the H200 (scripts/gpu_mlir_probe.py), and Liger-Kernel's
# RMSNorm + RoPE chain in the training loop beside ropelab's (scripts/gpu_training_speed.py), in
# one call.  Carried in .whl/: the greenlet cp312 and liger-kernel wheels, and numba-cuda-mlir as
# numba_cuda_mlir.tar.xz (its 68 MiB wheel unpacked and recompressed with xz -9e: 45 MiB,
# unpacked under /tmp/site beside the wheels).  The numpy 2.4.6 wheel does not fit beside it in
# the 64 MiB that travels, so both scripts run on the image's numpy 2.5 with np.row_stack put
# back (scripts/with_row_stack.py); the records' versions say so.
#                                                 -> $OUT/numba_cuda_mlir-GPU-STAMP.json
#                                                 -> $OUT/training_speed-GPU-STAMP.json
LOG_NAME=mlir_probe.log source "$(dirname "$0")/gpu_common.sh"

step 60 unpack tar -xJf .whl/numba_cuda_mlir.tar.xz -C /tmp/site
step 240 mlir python3 scripts/with_row_stack.py scripts/gpu_mlir_probe.py --out "$OUT"
step 280 training python3 scripts/with_row_stack.py scripts/gpu_training_speed.py --only training --out "$OUT"
bundle
