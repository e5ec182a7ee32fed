"""The sweep's rows of the baselines (:mod:`ropelab.measure.baselines`: PyTorch, CUDA C++ through
CuPy, the fused kernel's twin) and their launch-overhead cases, for whichever of CuPy and torch
import here."""

from __future__ import annotations

import numpy as np

from ...freqs import DEFAULT_BASE
from ..baselines import CUDA_SOURCE, NVRTC_OPTIONS, TwinCase, available
from ..baselines import torch_complex_seed, torch_rotate, torch_tables
from .entries import Entry

THREADS = 256  # block size of the CUDA C++ plain kernels, as the seed launched them


def _torch_views(buf):
    import torch

    s = buf.shape
    x = torch.as_tensor(buf.x, device="cuda").view(s.tokens, s.hidden)
    out = torch.as_tensor(buf.out, device="cuda").view(s.tokens, s.hidden)
    pos = torch.as_tensor(buf.positions, device="cuda")
    return torch, x, out, pos


def _make_torch_copy(buf):
    _, x, out, _ = _torch_views(buf)
    return lambda: out.copy_(x)


def _make_torch_complex(buf):
    torch, x, _, pos = _torch_views(buf)
    pos_cpu = pos.cpu()
    return lambda: torch_complex_seed(x, pos_cpu)


def _make_torch_cached(buf):
    _, x, _, pos = _torch_views(buf)
    cos, sin = torch_tables(pos, x.shape[1])
    return lambda: torch_rotate(x, cos, sin)


_COMPILED = {}


def _make_torch_compile(buf):
    torch, x, _, pos = _torch_views(buf)
    cos, sin = torch_tables(pos, x.shape[1])
    if "rotate" not in _COMPILED:
        _COMPILED["rotate"] = torch.compile(torch_rotate, dynamic=False, fullgraph=True)
    fn = _COMPILED["rotate"]
    return lambda: fn(x, cos, sin)


_MODULE = {}


def _cupy_module():
    if "mod" not in _MODULE:
        import cupy

        _MODULE["mod"] = cupy.RawModule(code=CUDA_SOURCE, options=NVRTC_OPTIONS)
    return _MODULE["mod"]


def _make_cuda(kernel: str):
    def make(buf):
        import cupy

        s = buf.shape
        x, out, pos = cupy.asarray(buf.x), cupy.asarray(buf.out), cupy.asarray(buf.positions)
        fn = _cupy_module().get_function(kernel)
        n_pairs = s.hidden // 2
        base = np.float32(DEFAULT_BASE)
        if kernel == "rope_float4_i64":
            if n_pairs % 2:
                raise ValueError("cuda_float4 needs hidden % 4 == 0")
            quads = n_pairs // 2
            total = s.tokens * quads
            args = (x, out, pos, np.int64(n_pairs), np.int64(quads), np.int64(total), base)
        elif kernel == "rope_flat_i64":
            total = s.tokens * n_pairs
            args = (x, out, pos, np.int64(n_pairs), np.int64(total), base)
        else:
            total = s.tokens * n_pairs
            args = (x, out, pos, np.int32(n_pairs), np.int32(total), base)
        grid = ((total + THREADS - 1) // THREADS,)
        return lambda: fn(grid, (THREADS,), args)
    return make


def _make_cuda_fused(interleave: bool):
    def make(buf):
        s = buf.shape
        if not s.fused:
            return None
        case = TwinCase(s.tokens, (s.heads_q, s.heads_k, s.heads_v or 0), s.head_dim,
                        s.rotary_dim, s.dtype, interleave)
        case.launch()  # compiles once, outside the timed region
        return case.launch
    return make


def entries() -> list:
    """Bench entries for the baselines whose packages import here."""

    have = available()
    out = []
    if have["cupy"]:
        out += [Entry("cuda_flat", "cuda_cpp", _make_cuda("rope_flat_i64"), fastmath=True),
                Entry("cuda_flat_i32", "cuda_cpp", _make_cuda("rope_flat_i32"), fastmath=True),
                Entry("cuda_float4", "cuda_cpp", _make_cuda("rope_float4_i64"), fastmath=True),
                Entry("cuda_fused", "cuda_cpp", _make_cuda_fused(True), fastmath=True,
                      fused=True),
                Entry("cuda_fused_neox", "cuda_cpp", _make_cuda_fused(False),
                      fastmath=True, fused=True)]
    if have["torch"]:
        out += [Entry("torch_copy", "torch", _make_torch_copy, group=1),
                Entry("torch_cached", "torch", _make_torch_cached, group=1),
                Entry("torch_complex_seed", "torch", _make_torch_complex, group=1),
                Entry("torch_compile", "torch", _make_torch_compile, group=2)]
    return out


def overhead_cases(x, out, pos, tokens: int, hidden: int) -> list:
    """(name, kernel args, launch) for the launch-overhead table: CuPy and torch, if present."""
    cases = []
    if available()["cupy"]:
        import cupy

        mod = _cupy_module()
        empty = mod.get_function("empty_kernel")
        flat = mod.get_function("rope_flat_i64")
        cx, co, cp = cupy.asarray(x), cupy.asarray(out), cupy.asarray(pos)
        n_pairs = hidden // 2
        total = tokens * n_pairs
        args = (cx, co, cp, np.int64(n_pairs), np.int64(total), np.float32(DEFAULT_BASE))
        grid = ((total + THREADS - 1) // THREADS,)
        cases += [("cupy RawKernel empty", 0, lambda: empty((1,), (32,), ())),
                  (f"cupy RawKernel cuda_flat {tokens}x{hidden}", 6,
                   lambda: flat(grid, (THREADS,), args))]
        # The fused twin: as many kernel arguments as ropelab's fused kernel (12), the yardstick
        # for ropelab.fused_qknorm_rope's host cost.
        twin = TwinCase(64, (24, 24, 24), 128, 128, "bfloat16", True)
        twin.launch()
        cases.append(("cupy RawKernel cuda_fused 64x(24+24+24)x128 bfloat16", len(twin.args),
                      twin.launch))
    if available()["torch"]:
        import torch

        t = torch.as_tensor(out, device="cuda")
        cases.append(("torch in-place add", 1, lambda: t.add_(1.0)))
    return cases
