"""Launch the fused forward and backward once per layout on flux_1024 bf16, for Nsight Compute.

Run under ncu (scripts/gpu_backward.sh does):
    ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section MemoryWorkloadAnalysis --kernel-name regex:qknorm python3 scripts/profile_backward.py
The printed report answers why the backward sits below the copy roof: DRAM throughput against
its peak, the stall reasons of its warps, and the memory traffic it really makes.
"""

import torch

import ropelab
from ropelab.shapes import PRODUCTION_SHAPES

shape = PRODUCTION_SHAPES["flux_1024"]
hq, hk, hv, hd = shape.heads_q, shape.heads_k, shape.heads_v, shape.head_dim
cols = (hq + hk + hv) * hd
torch.manual_seed(0)
for interleave in (True, False):
    qkv = torch.randn(shape.tokens, cols, device="cuda", dtype=torch.bfloat16)
    grad = torch.randn_like(qkv)
    w = torch.rand(hd, device="cuda", dtype=torch.bfloat16) + 0.5
    pos = torch.arange(shape.tokens, device="cuda", dtype=torch.int32)
    kw = dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=hd, q_weight=w,
              k_weight=w, positions=pos, interleave=interleave)
    ropelab.fused_qknorm_rope_backward(qkv, grad, **kw)
    ropelab.fused_qknorm_rope(qkv.clone(), **kw)
torch.cuda.synchronize()
print("launched forward and backward, GPT-J and NeoX")
