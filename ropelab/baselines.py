"""Baselines timed beside ropelab's kernels on a GPU host, when their packages are installed.

* ``torch_copy``: ``out.copy_(x)`` in PyTorch, a cross-check of the copy roof.
* ``torch_complex_seed``: the seed's eager PyTorch reference, rebuilt here from its recipe:
  frequencies and the position-frequency outer product on the CPU, moved to the GPU on every
  call, ``torch.polar`` for the unit complex numbers, one complex multiply on the
  ``view_as_complex`` of x.  The CPU work and the host-to-device copy are part of what the
  seed timed, so they are part of this row.
* ``torch_cached``: eager PyTorch with cos/sin tables ``[tokens, hidden/2]`` built once and
  kept on the GPU; each call is the rotation alone.
* ``torch_compile``: ``torch.compile`` of ``torch_cached``'s rotation (one fused Triton kernel).
* ``cuda_flat``, ``cuda_flat_i32``, ``cuda_float4``: CUDA C++ compiled by NVRTC through CuPy
  (``RawModule``, ``--use_fast_math`` like the seed).  ``cuda_flat`` is the twin of ropelab's
  ``flat``: same index types (int64, as numba's ``cuda.grid(1)``), same float32 formulas, a
  bounds guard and a positions array.  ``cuda_flat_i32`` indexes with ``int`` as the seed does.
  ``cuda_float4`` is the twin of ``pack4`` with the seed's ``float4`` loads and stores (it
  needs ``hidden % 4 == 0``, which every benchmark shape meets).

torch and CuPy are optional (``pip install -e ".[baselines]"``); a missing one only removes its
rows.  All work goes to the legacy default stream, where ropelab's events are recorded.
"""

from __future__ import annotations

import importlib

import numpy as np

CUDA_SOURCE = r"""
template <typename I>
__device__ __forceinline__ void rope_pair(const float* x, float* out, const int* positions,
                                          I n_pairs, I idx, float base) {
    I token = idx / n_pairs;
    I pair = idx % n_pairs;
    float x0 = x[2 * idx];
    float x1 = x[2 * idx + 1];
    float exponent = (float)(2 * pair) / (float)(2 * n_pairs);
    float inv_freq = 1.0f / powf(base, exponent);
    float angle = (float)positions[token] * inv_freq;
    float c = cosf(angle), s = sinf(angle);
    out[2 * idx] = x0 * c - x1 * s;
    out[2 * idx + 1] = x0 * s + x1 * c;
}

extern "C" __global__ void rope_flat_i64(const float* x, float* out, const int* positions,
                                         long long n_pairs, long long total_pairs, float base) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total_pairs) rope_pair<long long>(x, out, positions, n_pairs, idx, base);
}

extern "C" __global__ void rope_flat_i32(const float* x, float* out, const int* positions,
                                         int n_pairs, int total_pairs, float base) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total_pairs) rope_pair<int>(x, out, positions, n_pairs, idx, base);
}

// Two adjacent pairs per thread through one 16-byte load and store; n_pairs must be even so
// that every quad starts on a 16-byte boundary.
extern "C" __global__ void rope_float4_i64(const float* x, float* out, const int* positions,
                                           long long n_pairs, long long quads_per_row,
                                           long long total_quads, float base) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total_quads) return;
    long long token = idx / quads_per_row;
    long long pair = 2 * (idx % quads_per_row);
    long long i = token * 2 * n_pairs + 2 * pair;
    float pos = (float)positions[token];
    float inv_hidden = 1.0f / (float)(2 * n_pairs);
    float a0 = pos / powf(base, (float)(2 * pair) * inv_hidden);
    float a1 = pos / powf(base, (float)(2 * pair + 2) * inv_hidden);
    float4 v = *reinterpret_cast<const float4*>(x + i);
    float c0 = cosf(a0), s0 = sinf(a0), c1 = cosf(a1), s1 = sinf(a1);
    float4 r;
    r.x = v.x * c0 - v.y * s0;
    r.y = v.x * s0 + v.y * c0;
    r.z = v.z * c1 - v.w * s1;
    r.w = v.z * s1 + v.w * c1;
    *reinterpret_cast<float4*>(out + i) = r;
}

extern "C" __global__ void empty_kernel() {}
"""

NVRTC_OPTIONS = ("--use_fast_math", "-std=c++17")
THREADS = 256
TWINS = {"flat": "cuda_flat", "pack4": "cuda_float4"}  # numba variant -> CUDA C++ twin


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except Exception:  # ImportError, or a wheel that fails to load its CUDA libraries
        return None


def available() -> dict:
    """{package: version or None} for the optional baseline packages."""
    out = {}
    for name in ("torch", "cupy"):
        mod = _optional(name)
        out[name] = getattr(mod, "__version__", None) if mod is not None else None
    return out


# --------------------------------------------------------------------------------------------
# Reference formulas (also run on CPU tensors by the tests when torch is installed)
# --------------------------------------------------------------------------------------------

def torch_complex_seed(x, positions_cpu, base: float = 10000.0):
    """The seed's recipe: complex multiply by ``polar(1, pos * base**(-2i/hidden))``.

    ``x`` is ``[tokens, hidden]`` float32 on the GPU; ``positions_cpu`` a CPU int tensor.  The
    angle table is computed on the CPU and copied to x's device on every call, as in the seed.
    """
    import torch

    hidden = x.shape[-1]
    exponents = torch.arange(0, hidden, 2).float() / hidden
    inv_freq = 1.0 / (base ** exponents)
    angles = torch.outer(positions_cpu.float(), inv_freq).to(x.device)
    unit = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.float().reshape(x.shape[0], -1, 2))
    return torch.view_as_real(pairs * unit).reshape(x.shape).type_as(x)


def torch_tables(positions, hidden: int, base: float = 10000.0):
    """cos and sin ``[tokens, hidden/2]`` float32, computed in float64 once."""
    import torch

    exponents = torch.arange(0, hidden, 2, dtype=torch.float64, device=positions.device) / hidden
    angles = positions.double()[:, None] * base ** (-exponents)[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def torch_rotate(x, cos, sin):
    """Interleaved-pair rotation with cached tables: ``[tokens, hidden]`` in, same out."""
    import torch

    even, odd = x[:, 0::2], x[:, 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).reshape(x.shape)


# --------------------------------------------------------------------------------------------
# Bench entries
# --------------------------------------------------------------------------------------------

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
        base = np.float32(10000.0)
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


def entries() -> list:
    """Bench entries for the baselines whose packages import here."""
    from .bench import Entry

    have = available()
    out = []
    if have["cupy"]:
        out += [Entry("cuda_flat", "cuda_cpp", _make_cuda("rope_flat_i64"), fastmath=True),
                Entry("cuda_flat_i32", "cuda_cpp", _make_cuda("rope_flat_i32"), fastmath=True),
                Entry("cuda_float4", "cuda_cpp", _make_cuda("rope_float4_i64"), fastmath=True)]
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
        args = (cx, co, cp, np.int64(n_pairs), np.int64(total), np.float32(10000.0))
        grid = ((total + THREADS - 1) // THREADS,)
        cases += [("cupy RawKernel empty", 0, lambda: empty((1,), (32,), ())),
                  (f"cupy RawKernel cuda_flat {tokens}x{hidden}", 6,
                   lambda: flat(grid, (THREADS,), args))]
    if available()["torch"]:
        import torch

        t = torch.as_tensor(out, device="cuda")
        cases.append(("torch in-place add", 1, lambda: t.add_(1.0)))
    return cases
