"""Where the time of a training step through ``ropelab.torch_ops`` goes, on the GPU.

One production shape (flux_1024, bf16, GPT-J), the loop a trainer runs: the leaves' ``.grad``
set to None (``zero_grad(set_to_none=True)``), ``y = rt.fused_qknorm_rope(qkv)`` on leaves that
require grad, then ``y.backward(g)``.  Prints:

1. wall and host us per iteration of controlled variants of that loop, each changing one thing:
   the backward on the caller's thread (``torch.autograd.set_multithreading_enabled(False)``),
   the forward alone, the direct public calls (no autograd), a torch-native op of the same
   bytes through the same engine (``y = qkv * 1.5``), and each at a tiny size (the fixed cost);
2. cProfile of the loop with the backward on the caller's thread (cProfile sees one thread);
3. the Python threads alive and the interpreter's switch interval (GIL hand-offs);
4. torch.profiler of 5 iterations: every op and kernel with counts, then one iteration's
   timeline (host threads and GPU kernels, us from the iteration's start), which shows whether
   the GPU or the host is waiting and on what.

Run on the H200 by scripts/gpu_training_profile.sh; ``--dry-run`` runs it on CPU tensors with a
tiny shape (the simulator), which checks the script and nothing else.
"""

from __future__ import annotations

import argparse
import sys
import threading
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


def _case(torch, device, tokens, shape):
    """The leaves, upstream gradient and positions of one loop at ``tokens`` tokens."""
    width = (shape.heads_q + shape.heads_k + shape.heads_v) * shape.head_dim
    gen = torch.Generator(device=device).manual_seed(0)
    qkv = torch.randn(tokens, width, device=device, generator=gen).to(torch.bfloat16)
    g = torch.randn(tokens, width, device=device, generator=gen).to(torch.bfloat16)
    pos = torch.arange(tokens, dtype=torch.int32, device=device)
    leaves = [qkv.clone().requires_grad_()] + [
        torch.ones(shape.head_dim, device=device, dtype=torch.bfloat16).requires_grad_()
        for _ in range(2)]
    return leaves, g, pos


def _timeline(prof, iteration_marker: str) -> list[str]:
    """One profiled iteration (the third ``iteration_marker`` range) as text lines: start and
    duration in us from the range's start, thread or stream, name; host ops two levels deep,
    every CUDA runtime/driver call, every kernel and copy."""
    events = list(prof.events())
    marks = sorted((e for e in events if e.name == iteration_marker),
                   key=lambda e: e.time_range.start)
    if len(marks) < 3:
        return ["(too few iterations profiled)"]
    mark = marks[2]
    t0, t1 = mark.time_range.start, mark.time_range.end
    lines = [f"iteration: {t1 - t0:.1f} us of host time"]
    rows = []
    for e in events:
        start = e.time_range.start
        if not t0 <= start <= t1 + 400 or e is mark:
            continue
        on_gpu = str(getattr(e, "device_type", "")).endswith("CUDA")
        if not on_gpu and start > t1:
            continue
        depth = 0
        parent = e.cpu_parent
        while parent is not None:
            depth += 1
            parent = parent.cpu_parent
        interesting = (on_gpu or depth <= 2 or e.name.startswith(("cu", "cuda")))
        if interesting:
            where = "gpu" if on_gpu else f"thread {e.thread}"
            rows.append((start - t0, e.time_range.end - start, where, "  " * depth + e.name))
    for start, dur, where, name in sorted(rows):
        lines.append(f"  {start:9.1f} {dur:9.1f}  {where:<16} {name[:90]}")
    return lines


def _stages(torch, trainer, sync, n: int, warm: int) -> list:
    """Mean us between timestamps taken inside a running step: the forward's call, the
    backward's entry (torch's hand-off to the thread that runs it), the backward's own stages
    (saved tensors, the backward op's body, the weight gradients' casts) and the return to
    the caller (gradient accumulation, the hand-back)."""
    from ropelab.torch_ops import fused_op

    marks: dict = {}
    stamp = time.perf_counter
    original = fused_op._FusedGrad.backward
    configs = fused_op._backward_options

    def timed_backward(ctx, grad):
        marks.setdefault("entered", []).append(stamp())
        qkv, q_weight, k_weight, positions, cos_sin_cache = ctx.saved_tensors
        grad = grad.contiguous()
        fused_op.direct(qkv, grad, q_weight, k_weight, positions, cos_sin_cache)
        marks.setdefault("unpacked", []).append(stamp())
        dqkv, dq, dk = fused_op.call_public(fused_op._public_backward, {
            "qkv": qkv, "grad": grad, "q_weight": q_weight, "k_weight": k_weight,
            "positions": positions, "cos_sin_cache": cos_sin_cache}, configs(ctx.config))
        if not qkv.is_cuda:  # the dry run's host path returns NumPy arrays
            dqkv = fused_op.from_host(dqkv, qkv)
            dq, dk = torch.from_numpy(dq), torch.from_numpy(dk)
        marks.setdefault("launched", []).append(stamp())
        dq, dk = dq.to(q_weight.dtype, copy=True), dk.to(k_weight.dtype, copy=True)
        marks.setdefault("cast", []).append(stamp())
        return None, dqkv, dq, dk, None, None, None

    fused_op._FusedGrad.backward = staticmethod(timed_backward)
    try:
        import ropelab.torch_ops as rt

        def step():
            marks.setdefault("start", []).append(stamp())
            trainer()
            marks.setdefault("end", []).append(stamp())

        for _ in range(warm):
            step()
        sync()
        marks.clear()
        for _ in range(n):
            step()
        sync()
    finally:
        fused_op._FusedGrad.backward = original
    del rt
    order = ("start", "entered", "unpacked", "launched", "cast", "end")
    names = ("forward, .backward() called, until the backward runs",
             "saved tensors, grad.contiguous(), direct()", "the backward op's body (public call)",
             "the two weight-gradient casts", "return: AccumulateGrad, hand-back to the caller")
    out = []
    for a, b, name in zip(order, order[1:], names):
        out.append((name, sum(y - x for x, y in zip(marks[a], marks[b])) / n * 1e6))
    out.append(("the whole step", sum(y - x for x, y in zip(marks["start"], marks["end"]))
                / n * 1e6))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    import torch

    import ropelab
    import ropelab.torch_ops as rt
    from ropelab.ops.fused_backward import fused_qknorm_rope_backward
    from ropelab.shapes import PRODUCTION_SHAPES, FusedShape

    device = "cpu" if args.dry_run else "cuda"
    n = 1 if args.dry_run else 50
    warm = 0 if args.dry_run else 3
    shape = PRODUCTION_SHAPES["flux_1024"]
    if args.dry_run:  # one head each: the simulator runs every thread in Python
        shape = FusedShape("dry_run", 4, 1, 1, 1, 64, 64)
    heads = dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k,
                 num_heads_v=shape.heads_v, head_dim=shape.head_dim)
    view = (lambda t: t) if device == "cuda" else rt.args.host_view

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def loops(tokens):
        leaves, g, pos = _case(torch, device, tokens, shape)
        qkv, wq, wk = leaves
        plain, qkv0, g0, pos0 = view(qkv.detach().clone()), view(qkv.detach()), view(g), view(pos)
        wq0, wk0 = view(wq.detach()), view(wk.detach())

        def trainer():
            for t in leaves:
                t.grad = None
            rt.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos,
                                 **heads).backward(g)

        def forward_only():
            for t in leaves:
                t.grad = None
            rt.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, **heads)

        def direct():
            ropelab.fused_qknorm_rope(qkv0, q_weight=wq0, k_weight=wk0, positions=pos0,
                                      out=plain, **heads)
            fused_qknorm_rope_backward(qkv0, g0, q_weight=wq0, k_weight=wk0, positions=pos0,
                                       **heads)

        def torch_mul():
            qkv.grad = None
            (qkv * 1.5).backward(g)

        from ropelab.measure.bench.backward_calls import empty_function
        empty = empty_function()

        def empty_step():
            for t in leaves:
                t.grad = None
            empty.apply(qkv, wq, wk).backward(g)

        from ropelab.torch_ops.fused_op import _fused_backward_kernel
        config = rt.encode(**heads)

        def backward_body():  # what _FusedGrad.backward runs, on the caller's thread
            with torch.no_grad():
                _fused_backward_kernel(qkv.detach(), g, wq.detach(), wk.detach(), pos, config)

        w32 = torch.ones(2 * shape.head_dim, device=device, dtype=torch.float32)

        def casts():  # the weight gradients' two casts alone
            w32[:shape.head_dim].to(torch.bfloat16, copy=True)
            w32[shape.head_dim:].to(torch.bfloat16, copy=True)

        return (trainer, forward_only, direct, torch_mul, empty_step, backward_body, casts)

    print(f"flux_1024 bf16 GPT-J, device {device}")
    print(f"python threads: {[t.name for t in threading.enumerate()]}; "
          f"switch interval {sys.getswitchinterval() * 1e3:.1f} ms")
    sizes = ((4, "tiny (4 tokens)"),) if args.dry_run else (
        (shape.tokens, f"{shape.tokens} tokens"), (4, "tiny (4 tokens)"))
    for tokens, label in sizes:
        trainer, forward_only, direct, torch_mul, empty_step, backward_body, casts = loops(tokens)
        print(f"-- {label}")
        for name, fn, threaded in (
                ("empty Function + backward", empty_step, True),
                ("empty Function, backward on caller", empty_step, False),
                ("backward op's body, no engine", backward_body, True),
                ("the two weight-gradient casts", casts, True),
                ("trainer loop (forward + backward)", trainer, True),
                ("trainer loop, backward on caller", trainer, False),
                ("forward under autograd alone", forward_only, True),
                ("direct forward + backward", direct, True),
                ("torch qkv*1.5 + backward", torch_mul, True),
                ("torch qkv*1.5, backward on caller", torch_mul, False)):
            with torch.autograd.set_multithreading_enabled(threaded):
                host, wall = _timed(fn, sync, n, warm)
            print(f"  {name:<36} host {host:8.1f} us/iter   wall {wall:8.1f} us/iter")
        result = []
        worker = threading.Thread(target=lambda: result.append(_timed(backward_body, sync, n,
                                                                      warm)))
        worker.start()
        worker.join()
        print(f"  {'backward op body, on another thread':<36} host {result[0][0]:8.1f} us/iter"
              f"   wall {result[0][1]:8.1f} us/iter")

    trainer = loops(4 if args.dry_run else shape.tokens)[0]
    for threaded in (True, False):
        with torch.autograd.set_multithreading_enabled(threaded):
            print(f"---- the step's stages, us (mean of {n}), backward "
                  f"{'on the device thread' if threaded else 'on the caller'} ----")
            for name, us in _stages(torch, trainer, sync, n, warm):
                print(f"  {name:<58} {us:8.1f}")
    # cProfile sees one thread: with the backward on the caller's, it sees the whole step.
    import cProfile
    import io
    import pstats
    profile = cProfile.Profile()
    with torch.autograd.set_multithreading_enabled(False):
        for _ in range(warm):
            trainer()
        sync()
        profile.enable()
        for _ in range(n * 4):
            trainer()
        sync()
        profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(35)
    print(f"---- cProfile of {n * 4} iterations, backward on the caller's thread ----")
    print(text.getvalue())
    from torch.profiler import ProfilerActivity, profile as tprofile, record_function
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    for _ in range(warm):
        trainer()
    sync()
    with tprofile(activities=activities) as prof:
        for _ in range(5):
            with record_function("iteration"):
                trainer()
        sync()
    print("---- torch.profiler, 5 iterations ----")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))
    print("---- one iteration's timeline (us from its start) ----")
    print("\n".join(_timeline(prof, "iteration")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
