"""The ``training`` rows of scripts/gpu_training_speed.py: a trainer's loop of forward +
``.backward()`` through ``ropelab.torch_ops.fused_qknorm_rope``, timed beside the same loop
through torch.compile of the same math, Liger-Kernel's chain (NeoX), the op captured as CUDA
graphs, and an autograd Function that does no work (the host floor).  That script's docstring
and METHOD say how each is timed; this module builds and times the loops."""

from __future__ import annotations

import time


def sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def training_rows(shapes, device, iterations: int, compile_baseline: bool) -> list[dict]:
    import torch

    import ropelab.torch_ops as rt
    from ropelab.measure.bench.backward_calls import torch_math

    rows = []
    for shape in shapes:
        heads = dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k,
                     num_heads_v=shape.heads_v, head_dim=shape.head_dim,
                     rotary_dim=shape.rotary_dim)
        width = (shape.heads_q + shape.heads_k + shape.heads_v) * shape.head_dim
        gen = torch.Generator(device=device).manual_seed(0)
        qkv = torch.randn(shape.tokens, width, device=device, generator=gen).to(torch.bfloat16)
        g = torch.randn(shape.tokens, width, device=device, generator=gen).to(torch.bfloat16)
        pos = torch.arange(shape.tokens, dtype=torch.int32, device=device)
        for interleave in (True, False):
            layout = "gptj" if interleave else "neox"

            def failed(impl, exc):  # the row of a baseline that could not run
                return _failed({"shape": shape.name, "layout": layout, "impl": impl}, exc)

            leaves = [qkv.clone().requires_grad_(),
                      torch.ones(shape.head_dim, device=device,
                                 dtype=torch.bfloat16).requires_grad_(),
                      torch.ones(shape.head_dim, device=device,
                                 dtype=torch.bfloat16).requires_grad_()]

            # A trainer's step starts from no gradient (optimizer.zero_grad(set_to_none=True)):
            # the backward then hands its result to .grad instead of adding into the last one.
            def ropelab_step():
                for t in leaves:
                    t.grad = None
                y = rt.fused_qknorm_rope(leaves[0], q_weight=leaves[1], k_weight=leaves[2],
                                         positions=pos, interleave=interleave, **heads)
                y.backward(g)

            steps = [("ropelab", ropelab_step), ("empty_function", _floor_step(torch, leaves, g))]
            if device == "cuda":
                try:  # a capture that fails must not lose the other rows
                    steps.append(("ropelab_graphed",
                                  _graphed_step(torch, rt, leaves, g, pos, interleave, heads)))
                except Exception as exc:
                    rows.append(failed("ropelab_graphed", exc))
            if compile_baseline:
                forward = torch.compile(torch_math(shape, interleave, device=device))

                def compiled_step():
                    for t in leaves:
                        t.grad = None
                    y = forward(leaves[0], leaves[1], leaves[2], pos)
                    y.backward(g)

                steps.append(("torch.compile", compiled_step))
            if device == "cuda" and not interleave:  # Liger rotates half-split pairs only
                try:
                    steps.append(("liger", _liger_step(torch, leaves, g, pos, shape)))
                except Exception as exc:  # not installed, or an API it does not have
                    rows.append(failed("liger", exc))
            for name, step in steps:
                row = _timed(step, device, iterations,
                             {"shape": shape.name, "layout": layout, "impl": name,
                              "bytes": training_bytes(shape)})
                rows.append(row)
                print(row, flush=True)
    return rows


def training_bytes(shape, itemsize: int = 2) -> int:
    """The bytes one forward + backward must move (the byte model of
    :mod:`ropelab.kernels.fused_qknorm_rope.backward_host`): the forward reads and writes the
    row, the backward reads dy (the row) and x's Q and K and writes dx (the row): per token
    ``4 * row + QK`` elements (the weights, positions and partial sums are noise)."""
    row = (shape.heads_q + shape.heads_k + shape.heads_v) * shape.head_dim
    qk = (shape.heads_q + shape.heads_k) * shape.head_dim
    return shape.tokens * (4 * row + qk) * itemsize


def _floor_step(torch, leaves, g):
    """The same loop around an autograd Function that does no work
    (:func:`ropelab.measure.bench.backward_calls.empty_function`): the host floor."""
    from ropelab.measure.bench.backward_calls import empty_function

    empty = empty_function()

    def step():
        for t in leaves:
            t.grad = None
        empty.apply(*leaves).backward(g)

    return step


def _graphed_step(torch, rt, leaves, g, pos, interleave, heads):
    """The same loop with the op's forward and backward captured once as CUDA graphs
    (``torch.cuda.make_graphed_callables``): each step replays two graphs, so the host cost of
    the op and of autograd around it is gone; what is left is the GPU's."""
    def forward(qkv, q_weight, k_weight):
        return rt.fused_qknorm_rope(qkv, q_weight=q_weight, k_weight=k_weight, positions=pos,
                                    interleave=interleave, **heads)

    graphed = torch.cuda.make_graphed_callables(forward, tuple(leaves))

    def step():
        for t in leaves:
            t.grad = None
        graphed(*leaves).backward(g)

    return step


def _liger_step(torch, leaves, g, pos, shape):
    """The same loop through Liger-Kernel's RMSNorm + RoPE chain
    (:func:`ropelab.measure.bench.backward_calls.liger_math`, what the backward bench times),
    checked first against the op's math in PyTorch: no row for a chain that computes something
    else."""
    from ropelab.measure.bench.backward_calls import liger_math, torch_math

    forward = liger_math(shape, device=pos.device)
    with torch.no_grad():  # random weights: a weight swapped between Q and K, or lost, shows
        gen = torch.Generator(device=pos.device).manual_seed(1)
        w = [1 + 0.5 * torch.randn(shape.head_dim, device=pos.device, generator=gen).to(
            leaves[1].dtype) for _ in range(2)]
        args = (leaves[0].detach(), w[0], w[1], pos)
        want = torch_math(shape, False, device=pos.device)(*args).float()
        error = (forward(*args).float() - want).abs().max().item()
    if not error <= 0.25:  # a few bf16 ulps of values of order 1-8
        raise AssertionError(f"Liger's chain differs from the op's math by {error}")

    def step():
        for t in leaves:
            t.grad = None
        forward(leaves[0], leaves[1], leaves[2], pos).backward(g)

    return step


# The plain RoPE case of the bench (``ropelab.measure.bench.torch_ops``): bfloat16 activations
# [tokens, heads, head_dim] as attention hands them over.
ROPE_SHAPE = (32768, 32, 128)


def rope_training_rows(device, iterations: int, compile_baseline: bool,
                       shape=ROPE_SHAPE) -> list[dict]:
    """A trainer's loop through the rope op: ``y = rt.rope(x, positions=pos)`` (no ``out=``: a
    new differentiable tensor) on a bfloat16 leaf, then ``y.backward(g)``; beside it the same
    rotation in PyTorch (float32 math on cos/sin tables cached once, bfloat16 out) under
    torch.compile, and the empty autograd Function (the host floor).  ``bytes``: the forward
    reads x and writes y, the backward reads dy and writes dx: ``4 * x.numel() * 2``.  The
    compiled rotation is checked against the op's output first: no row for other math."""
    import torch

    import ropelab.torch_ops as rt
    from ropelab.measure.baselines import torch_tables

    tokens, heads, head_dim = shape
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(tokens, heads, head_dim, device=device, generator=gen).to(torch.bfloat16)
    g = torch.randn(tokens, heads, head_dim, device=device, generator=gen).to(torch.bfloat16)
    pos = torch.arange(tokens, dtype=torch.int32, device=device)
    leaf = x.clone().requires_grad_()
    nbytes = 4 * x.numel() * x.element_size()
    label = "x".join(str(n) for n in shape)

    def ropelab_step():
        leaf.grad = None
        rt.rope(leaf, positions=pos).backward(g)

    rows = []
    steps = [("ropelab", ropelab_step), ("empty_function", _floor_step(torch, [leaf], g))]
    if compile_baseline:
        # torch_rotate's interleaved rotation, one table row per token shared by its heads
        cos, sin = (t[:, None, :] for t in torch_tables(pos, head_dim))

        def rotate(t):
            f = t.float()
            even, odd = f[..., 0::2], f[..., 1::2]
            return torch.stack((even * cos - odd * sin, even * sin + odd * cos),
                               dim=-1).flatten(-2).to(t.dtype)

        compiled = torch.compile(rotate, fullgraph=True)
        with torch.no_grad():
            error = (compiled(x).float() - rt.rope(x, positions=pos).float()).abs().max().item()

        def compiled_step():
            leaf.grad = None
            compiled(leaf).backward(g)

        if error <= 0.1:  # a few bfloat16 ulps of values of order 1-4
            steps.append(("torch.compile", compiled_step))
        else:
            rows.append({"shape": label, "layout": "gptj", "impl": "torch.compile",
                         "error": f"the compiled rotation differs from rt.rope by {error}"})
    for name, step in steps:
        row = _timed(step, device, iterations, {"shape": label, "layout": "gptj", "impl": name,
                                                "bytes": nbytes})
        rows.append(row)
        print(row, flush=True)
    if device == "cuda":  # the roof's rate: a cold-L2 copy of x, in the same run
        from ropelab.measure.bench.stats import quantiles
        from ropelab.measure.bench.timer import Timer

        out = torch.empty_like(x)
        median = quantiles(Timer().time(lambda: out.copy_(x)))[0]
        rows.append({"shape": label, "layout": "gptj", "impl": "torch_copy",
                     "bytes": 2 * x.numel() * x.element_size(), "median_us": round(median, 2)})
        print(rows[-1], flush=True)
    return rows


def _timed(step, device, iterations: int, row: dict) -> dict:
    """``row`` with the loop's host and wall us per iteration (3 warm-up steps first), or the
    error that stopped it."""
    try:
        for _ in range(3):  # compile, upload tables, warm the allocator
            step()
        sync(device)
        t0 = time.perf_counter()
        for _ in range(iterations):
            step()
        t1 = time.perf_counter()
        sync(device)
        t2 = time.perf_counter()
        return {**row, "iterations": iterations,
                "host_us_per_iter": round((t1 - t0) / iterations * 1e6, 1),
                "wall_us_per_iter": round((t2 - t0) / iterations * 1e6, 1)}
    except Exception as exc:  # one failing baseline must not lose the other rows
        return _failed(row, exc)


def _failed(row: dict, exc) -> dict:
    """The row of a loop that could not run: its shape, layout and impl, and why."""
    return {**{k: row[k] for k in ("shape", "layout", "impl")},
            "error": f"{type(exc).__name__}: {exc}"[:500]}
