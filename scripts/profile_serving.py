"""Launch the serving op once per case and cache dtype, and ropelab.rope once on a bfloat16
[32768, 32, 128], for Nsight Compute: why the FP8 prefill and the decode rows sit where they do
against the copy (issue 28), and what holds plain bfloat16 RoPE below 99% of it (issue 25).

Run under ncu (scripts/gpu_profile_serving.sh does):
    ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
        python3 scripts/profile_serving.py
Each launch is preceded by a warm-up launch of the same call (compiled, tables on the device);
the kernels ncu reports are named in the order printed.  Decode calls are launched directly,
not replayed from a graph (ncu profiles kernels, not graphs).
"""

import torch

import ropelab
from ropelab.measure.bench.serving_cases import CASES, op_launcher, tensors

for case in CASES:
    for fp8 in (False, True):
        state = tensors(case, fp8, "cuda")
        launch = op_launcher(case, state, fp8)
        launch()  # warm-up (compile), then the profiled launch
        torch.cuda.synchronize()
        launch()
        torch.cuda.synchronize()
        print(f"launched {case.name} {'fp8' if fp8 else 'bfloat16'} cache", flush=True)

x = torch.randn(32768, 32, 128, device="cuda", dtype=torch.bfloat16)
pos = torch.arange(32768, device="cuda", dtype=torch.int32)
out = torch.empty_like(x)
for _ in range(2):
    ropelab.rope(x, positions=pos, out=out)
torch.cuda.synchronize()
print("launched ropelab.rope bfloat16 [32768, 32, 128] (twice: warm-up, profiled)", flush=True)
