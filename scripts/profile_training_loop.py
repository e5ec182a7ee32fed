"""Where the host time of a training step through ``ropelab.torch_ops`` goes, on the GPU.

One production shape (flux_1024, bf16, GPT-J), the loop a trainer runs: ``y =
rt.fused_qknorm_rope(qkv)`` on leaves that require grad, then ``y.backward(g)``.  Prints:

1. wall and host us per iteration of the loop, and of its pieces alone (the forward under
   autograd, the backward op called directly, the direct public calls);
2. cProfile of 50 iterations: the functions with the most own time, and the most cumulative;
3. torch.profiler of 5 iterations: every op and CUDA kernel, with counts (the launches a step
   makes beyond ropelab's two kernels: copies, casts, gradient accumulation).

Run on the H200 by scripts/gpu_training_profile.sh; ``--dry-run`` runs it on CPU tensors with a
tiny shape (the simulator), which checks the script and nothing else.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time


def _timed(fn, sync, n, warm=3):
    for _ in range(warm):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    import torch

    import ropelab
    import ropelab.torch_ops as rt
    from ropelab.ops.fused_backward import fused_qknorm_rope_backward
    from ropelab.shapes import PRODUCTION_SHAPES

    device = "cpu" if args.dry_run else "cuda"
    n = 1 if args.dry_run else 50
    shape = PRODUCTION_SHAPES["flux_1024"]
    tokens = 4 if args.dry_run else shape.tokens
    heads = dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k,
                 num_heads_v=shape.heads_v, head_dim=shape.head_dim)
    width = (shape.heads_q + shape.heads_k + shape.heads_v) * shape.head_dim
    gen = torch.Generator(device=device).manual_seed(0)
    qkv = torch.randn(tokens, width, device=device, generator=gen).to(torch.bfloat16)
    g = torch.randn(tokens, width, device=device, generator=gen).to(torch.bfloat16)
    pos = torch.arange(tokens, dtype=torch.int32, device=device)
    leaf = qkv.clone().requires_grad_()
    wq = torch.ones(shape.head_dim, device=device, dtype=torch.bfloat16).requires_grad_()
    wk = torch.ones(shape.head_dim, device=device, dtype=torch.bfloat16).requires_grad_()

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def step():
        rt.fused_qknorm_rope(leaf, q_weight=wq, k_weight=wk, positions=pos, **heads).backward(g)

    def forward():
        return rt.fused_qknorm_rope(leaf, q_weight=wq, k_weight=wk, positions=pos, **heads)

    # The direct calls take device arrays: CUDA tensors as they are, CPU ones as NumPy views.
    view = (lambda t: t) if device == "cuda" else rt.args.host_view
    plain, qkv0, g0, pos0 = view(qkv.clone()), view(qkv), view(g), view(pos)
    wq0, wk0 = view(wq.detach()), view(wk.detach())

    def direct_forward():
        ropelab.fused_qknorm_rope(plain, q_weight=wq0, k_weight=wk0, positions=pos0, **heads)

    def direct_backward():
        fused_qknorm_rope_backward(qkv0, g0, q_weight=wq0, k_weight=wk0, positions=pos0, **heads)

    print(f"flux_1024 bf16 GPT-J, {tokens} tokens, device {device}")
    for name, fn in (("loop: forward + backward", step), ("forward under autograd", forward),
                     ("direct forward", direct_forward), ("direct backward", direct_backward)):
        host, wall = _timed(fn, sync, n, warm=0 if args.dry_run else 3)
        print(f"  {name:<28} host {host:8.1f} us/iter   wall {wall:8.1f} us/iter")

    profile = cProfile.Profile()
    sync()
    profile.enable()
    for _ in range(n):
        step()
    sync()
    profile.disable()
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(order).print_stats(30)
        print(f"---- cProfile of {n} iterations, by {order} ----")
        print(text.getvalue())

    from torch.profiler import ProfilerActivity, profile as tprofile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with tprofile(activities=activities) as prof:
        for _ in range(1 if args.dry_run else 5):
            step()
        sync()
    print("---- torch.profiler, 5 iterations ----")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
