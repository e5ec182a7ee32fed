"""What each row of the backward bench (:mod:`.backward`) launches: its inputs, then one
no-argument callable per entry (ropelab's public call and its pre-bound launches, autograd's
forward + backward, torch.compile and Liger-Kernel under autograd), and the bit comparison of
the weight gradients."""

from __future__ import annotations

import numpy as np

from ...freqs import DEFAULT_BASE, inv_freq
from ...target import SIMULATED

RUNS = 20  # backward runs compared bit for bit


def inputs(shape, dtype: str = "bfloat16", seed: int = 0):
    """(qkv, grad, q_weight, k_weight, positions) as a PyTorch user holds them on the GPU
    (torch.bfloat16), or numba device arrays on the simulator (bfloat16 as uint16 bits)."""
    from ...check import random_inputs

    rng = np.random.default_rng(seed)
    heads = (shape.heads_q, shape.heads_k, shape.heads_v)
    qkv, wq, wk, pos = random_inputs(rng, shape.tokens, heads, shape.head_dim, dtype)
    grad, _, _, _ = random_inputs(rng, shape.tokens, heads, shape.head_dim, dtype)
    host = (qkv, grad, wq, wk, pos)
    if SIMULATED:
        from numba import cuda

        return tuple(cuda.to_device(a) for a in host)
    import torch

    dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in host]
    if dtype == "bfloat16":
        dev[:4] = [t.view(torch.bfloat16) for t in dev[:4]]
    return tuple(dev)


def _kwargs(shape, interleave: bool) -> dict:
    return dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k, num_heads_v=shape.heads_v,
                head_dim=shape.head_dim, rotary_dim=shape.rotary_dim, interleave=interleave)


# ---- what each entry launches (each returns a no-argument callable) ---------------------------------

def ropelab_backward(arrays, shape, interleave: bool, dw: str = "two_stage"):
    from ...ops.fused_backward import fused_qknorm_rope_backward

    qkv, grad, wq, wk, pos = arrays
    kw = _kwargs(shape, interleave)
    return lambda: fused_qknorm_rope_backward(qkv, grad, q_weight=wq, k_weight=wk, positions=pos,
                                              dw=dw, **kw)


def ropelab_backward_kernel(arrays, shape, interleave: bool, dw: str = "two_stage",
                            max_blocks: int | None = None, units_per_pass: int | None = None):
    """The backward's launches on fixed buffers (no host checks): the kernels' own cost.
    ``max_blocks``: the grid's cap (default one wave of the GPU); ``units_per_pass``: the
    kernel's (default its own)."""
    from numba import cuda

    from ...kernels.fused_qknorm_rope import backward as kmod, backward_host
    from ...kernels.launch import launch
    from ...ops.arrays import device_view, inspect_array
    from ...ops.fused import build_problem

    qkv, grad, wq, wk, pos = arrays
    info = inspect_array(qkv, "qkv")
    problem = build_problem(info, **_kwargs(shape, interleave))
    align = kmod.VECTOR_ALIGN[problem.storage]
    aligned = all(inspect_array(a, "a").ptr % align == 0 for a in (qkv, grad, wq, wk))
    extra = {} if units_per_pass is None else {"units_per_pass": units_per_pass}
    main, reduce = backward_host.plans(problem, dw_mode=dw, max_blocks=max_blocks,
                                       aligned=aligned, **extra)
    two = 2 * shape.head_dim
    words = kmod.KERNEL_VIEW[problem.storage]
    dx = cuda.device_array(info.nbytes // words.itemsize, words)
    sums = cuda.device_array(two if reduce is None else main.grid[0] * two, np.float32)
    dw_out = cuda.device_array(two, np.float32)
    views = [device_view(a, inspect_array(a, "a"), words) for a in (qkv, grad)] + [dx] + [
        device_view(a, inspect_array(a, "a"), words) for a in (wq, wk)] + [
        device_view(pos, inspect_array(pos, "positions")), sums]
    if reduce is None:
        def run():
            sums[:] = 0  # atomics add into it (the zeroing is part of the atomic mode's cost)
            launch(main, views)
        result = sums
    else:
        def run():
            launch(main, views)
            launch(reduce, [sums, dw_out])
        result = dw_out
    run.outputs = (dx, result)  # dx flat, then dq_weight | dk_weight (tests read them)
    return run


def ropelab_forward_backward(arrays, shape, interleave: bool, kernel: bool = False):
    """Autograd's sequence as ``ropelab.torch_ops`` runs it: the functional forward in one pass
    (read ``qkv``, write a new tensor: what ``fused_qknorm_rope_functional`` launches), then the
    backward from the saved input; ``kernel``: the backward's launches pre-bound."""
    import ropelab

    qkv, grad, wq, wk, pos = arrays
    kw = _kwargs(shape, interleave)
    out = _empty_like(qkv)
    backward = (ropelab_backward_kernel if kernel else ropelab_backward)(arrays, shape, interleave)

    def run():
        ropelab.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, out=out, **kw)
        backward()
    run.forward_out = out  # the forward's result (tests read it)
    return run


def _empty_like(a):
    """A new device array like ``a``: a torch tensor on the GPU, a numba array on the
    simulator (what :func:`inputs` hands out there)."""
    if SIMULATED:
        from numba import cuda

        return cuda.device_array_like(a)
    import torch

    return torch.empty_like(a)


def _inv_freq(torch, rotary_dim: int, base: float, device, dtype):
    """The inverse frequencies as a tensor on ``device``, made once per peer: a table moved
    from the host on every call is a blocking copy, which would make a timed loop wait for the
    GPU at each step (as a model's ``inv_freq`` buffer, it lives on the device)."""
    return torch.from_numpy(inv_freq(rotary_dim, base)).to(device=device or "cpu", dtype=dtype)


def torch_math(shape, interleave: bool, eps: float = 1e-6, base: float = DEFAULT_BASE,
               device=None):
    """The fused forward in PyTorch: float32 math, output in the input's dtype (what
    torch.compile is given); its frequency table is made on ``device`` once (pass the inputs'
    device: a table elsewhere is moved on every call)."""
    import torch

    hq, hk, hd, rd = shape.heads_q, shape.heads_k, shape.head_dim, shape.rotary_dim
    inv = _inv_freq(torch, rd, base, device, torch.float32)

    def forward(qkv, wq, wk, pos):
        t = qkv.shape[0]
        heads = qkv.view(t, -1, hd)
        qk = heads[:, :hq + hk].float()
        w = torch.cat([wq.float().expand(hq, hd), wk.float().expand(hk, hd)])
        z = qk * torch.rsqrt(qk.pow(2).mean(-1, keepdim=True) + eps) * w
        ang = pos.float()[:, None, None] * inv.to(qkv.device)[None, None, :]  # no-op on device
        c, s = torch.cos(ang), torch.sin(ang)
        if interleave:
            a, b = z[..., 0:rd:2], z[..., 1:rd:2]
            rot = torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
        else:
            a, b = z[..., :rd // 2], z[..., rd // 2:rd]
            rot = torch.cat([a * c - b * s, a * s + b * c], dim=-1)
        y = torch.cat([rot, z[..., rd:]], dim=-1).to(qkv.dtype)
        return torch.cat([y, heads[:, hq + hk:]], dim=1).reshape(qkv.shape)
    return forward


def _autograd_pair(forward, arrays):
    """(fwd+bwd, bwd-only) callables for a differentiable ``forward(qkv, wq, wk, pos)``."""
    import torch

    qkv, grad, wq, wk, pos = arrays
    leaves = [a.detach().clone().requires_grad_(True) for a in (qkv, wq, wk)]

    def both():
        y = forward(leaves[0], leaves[1], leaves[2], pos)
        torch.autograd.grad(y, leaves, grad)

    y = forward(leaves[0], leaves[1], leaves[2], pos)
    return both, lambda: torch.autograd.grad(y, leaves, grad, retain_graph=True)


def compiled_pair(arrays, shape, interleave: bool):
    """torch.compile's pair.  Buffer donation is off (``torch._functorch.config.donated_buffer
    = False``, for both rows): with it on, a compiled backward may reuse the memory of the
    tensors its forward saved, so it refuses ``retain_graph=True``, and the bwd-only row (one
    forward, the backward timed again and again) failed with "compiled with non-empty donated
    buffers".  Donation saves memory, not a launch; the backward's kernels are the same."""
    import torch
    import torch._functorch.config as functorch_config

    functorch_config.donated_buffer = False  # before the first compile of this process
    return _autograd_pair(torch.compile(torch_math(shape, interleave, device=arrays[0].device)),
                          arrays)


def liger_math(shape, eps: float = 1e-6, base: float = DEFAULT_BASE, device=None):
    """The fused forward through Liger-Kernel's chain, as a model that uses Liger runs it:
    ``forward(qkv, wq, wk, pos)`` with its RMSNorm Function on the Q heads and on the K heads
    (its defaults: llama casting, float32 math, the input's dtype out), then its RoPE Function
    on both with cos/sin tables ``[1, tokens, head_dim]`` in the input's dtype, built on each
    call from an ``inv_freq`` kept on ``device`` (as a Hugging Face model builds them once per
    forward from its ``inv_freq`` buffer); the packed output is rebuilt with V (``torch.cat``),
    so it is the fused op's function of the same arguments.  Liger's RoPE is the half-split
    (NeoX) rotation of whole heads only."""
    import torch
    # lazy: optional (the lead carries the liger-kernel 0.8.5 wheel to the GPU host)
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    from liger_kernel.transformers.rope import liger_rotary_pos_emb

    hq, hk, hd, rd = shape.heads_q, shape.heads_k, shape.head_dim, shape.rotary_dim
    if rd != hd:
        raise ValueError("Liger's RoPE rotates the whole head")
    inv = _inv_freq(torch, hd, base, device, torch.float64)

    def forward(qkv, wq, wk, pos):
        t = qkv.shape[0]
        heads = qkv.view(t, -1, hd)
        q = LigerRMSNormFunction.apply(heads[:, :hq].reshape(-1, hd), wq, eps).view(1, t, hq, hd)
        k = LigerRMSNormFunction.apply(heads[:, hq:hq + hk].reshape(-1, hd), wk, eps).view(1, t, hk, hd)
        ang = pos.double()[:, None] * inv.to(qkv.device)[None, :]
        emb = torch.cat([ang, ang], dim=-1)[None]
        cos, sin = emb.cos().to(qkv.dtype), emb.sin().to(qkv.dtype)
        q, k = liger_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return torch.cat([q.transpose(1, 2)[0], k.transpose(1, 2)[0], heads[:, hq + hk:]],
                         dim=1).reshape(qkv.shape)
    return forward


def liger_pair(arrays, shape):
    """Liger-Kernel's RMSNorm of Q and K heads, then its (NeoX) RoPE (:func:`liger_math`),
    under autograd."""
    return _autograd_pair(liger_math(shape, device=arrays[0].device), arrays)


def bit_differences(run, runs: int = RUNS) -> tuple[int, float]:
    """(runs whose weight gradients differ in any bit from the first run's, largest |diff|)."""
    def grads():
        _, dq, dk = run()
        return np.concatenate([_host(dq), _host(dk)])

    first = grads()
    differing, worst = 0, 0.0
    for _ in range(runs - 1):
        now = grads()
        if now.tobytes() != first.tobytes():
            differing += 1
            worst = max(worst, float(np.max(np.abs(now.astype(np.float64) - first))))
    return differing, worst


def _host(a) -> np.ndarray:
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return np.asarray(a)


def empty_function():
    """An autograd Function that does no work, over the tensors it is given (the fused op's
    ``qkv``, ``q_weight``, ``k_weight``, or the rope op's ``x``): the forward makes an output
    like the first, the backward hands back a fresh gradient for each.  A training loop around
    it costs the host what torch's autograd alone costs: the floor under any Python op's loop
    on that machine (the training-speed record's ``empty_function``)."""
    import torch

    class Empty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            ctx.save_for_backward(*tensors)
            return torch.empty_like(tensors[0])

        @staticmethod
        def backward(ctx, grad):
            return tuple(torch.empty_like(t) for t in ctx.saved_tensors)

    return Empty
