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
* ``cuda_fused``, ``cuda_fused_neox``: :data:`FUSED_TWIN_SOURCE`, the CUDA C++ twin of the fused
  QK-RMSNorm + RoPE kernel at its default mapping (GPT-J and NeoX pairs), on the production
  shapes; :func:`check_twin` compares it with the float64 reference on the GPU.
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

from .entry import Entry
from .. import check as ropelab_check
from ..tolerance import fused_atol

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

# The CUDA C++ twin of ropelab's fused QK-RMSNorm + RoPE (ropelab.kernels.fused_qknorm_rope at
# its default mapping), written to compare numba's code generation with nvcc-style C++ on the
# same algorithm: a group of G lanes per (token, head) -- 32 for float32, 16 (two heads per
# warp) for bfloat16 and float16 --, each lane moving its E = HEAD_DIM / G elements as one run
# (GPT-J, NeoX by shuffle) or as two runs of E / 2, one in each half of the head (SPLIT NeoX:
# both elements of every pair in the lane), with the widest accesses that divide a run; a
# shuffle butterfly inside the group for the sum of squares; the float32 inverse-frequency
# table (128-bit loads of a lane's 4 frequencies when every dim rotates); one __sincosf per
# pair (per slot for shuffled NeoX partners); and, when every dim rotates (FULL), the norm's
# scale and the attention factor folded into cos and sin.  Same grid and block as the numba
# kernel (blockIdx.x * blockDim.y + threadIdx.y the token, blockIdx.y * warps + warp the warp)
# and the same scalar arguments, plus the token count the numba kernel reads from positions'
# shape.  16-bit packing is one cvt.rn.{bf16x2,f16x2}.f32 per two elements, as numba's build
# emits; the source needs no CUDA header and compiles with bare NVRTC.  qkv, q_weight and
# k_weight must start on 16-byte boundaries (fresh allocations do).
FUSED_TWIN_SOURCE = r"""
#define FULL_MASK 0xffffffffu

struct F32 {  // one float per 32-bit word
    static constexpr int PER_WORD = 1;
    static __device__ __forceinline__ void unpack(unsigned w, float* v) { v[0] = __uint_as_float(w); }
    static __device__ __forceinline__ unsigned pack(const float* v) { return __float_as_uint(v[0]); }
};

struct Bf16 {  // two bfloat16 per word, element 2k in the low half
    static constexpr int PER_WORD = 2;
    static __device__ __forceinline__ void unpack(unsigned w, float* v) {
        v[0] = __uint_as_float(w << 16);
        v[1] = __uint_as_float(w & 0xffff0000u);
    }
    static __device__ __forceinline__ unsigned pack(const float* v) {  // round to nearest even
        unsigned d;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(v[1]), "f"(v[0]));
        return d;
    }
};

struct Half {  // two float16 per word
    static constexpr int PER_WORD = 2;
    static __device__ __forceinline__ float to_float(unsigned short h) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
    static __device__ __forceinline__ void unpack(unsigned w, float* v) {
        v[0] = to_float((unsigned short)(w & 0xffffu));
        v[1] = to_float((unsigned short)(w >> 16));
    }
    static __device__ __forceinline__ unsigned pack(const float* v) {
        unsigned d;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(v[1]), "f"(v[0]));
        return d;
    }
};

// A lane's WORDS consecutive 32-bit words, with the widest accesses that divide them.
template <int WORDS>
__device__ __forceinline__ void load_words(const void* p, unsigned* w) {
    if constexpr (WORDS % 4 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 4; ++k) {
            uint4 u = reinterpret_cast<const uint4*>(p)[k];
            w[4 * k] = u.x; w[4 * k + 1] = u.y; w[4 * k + 2] = u.z; w[4 * k + 3] = u.w;
        }
    } else if constexpr (WORDS % 2 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 2; ++k) {
            uint2 u = reinterpret_cast<const uint2*>(p)[k];
            w[2 * k] = u.x; w[2 * k + 1] = u.y;
        }
    } else {
#pragma unroll
        for (int k = 0; k < WORDS; ++k) w[k] = reinterpret_cast<const unsigned*>(p)[k];
    }
}

template <int WORDS>
__device__ __forceinline__ void store_words(void* p, const unsigned* w) {
    if constexpr (WORDS % 4 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 4; ++k)
            reinterpret_cast<uint4*>(p)[k] = make_uint4(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]);
    } else if constexpr (WORDS % 2 == 0) {
#pragma unroll
        for (int k = 0; k < WORDS / 2; ++k)
            reinterpret_cast<uint2*>(p)[k] = make_uint2(w[2 * k], w[2 * k + 1]);
    } else {
#pragma unroll
        for (int k = 0; k < WORDS; ++k) reinterpret_cast<unsigned*>(p)[k] = w[k];
    }
}

// S: storage (F32, Bf16, Half); ITEM: its size in bytes; G: lanes per head (32 or 16);
// SPLIT: NeoX pairs held whole by a lane (two runs); FULL: rotary_dim == HEAD_DIM.
template <typename S, int ITEM, int HEAD_DIM, int G, bool INTERLEAVE, bool SPLIT, bool FULL>
__global__ void fused_qknorm_rope_twin(char* qkv, const char* q_weight, const char* k_weight,
                                       const int* positions, const float* inv_freq,
                                       unsigned heads_q, unsigned heads_qk, unsigned heads_total,
                                       unsigned n_pairs, unsigned half_lanes, float eps,
                                       float attention_factor, unsigned tokens) {
    constexpr int E = HEAD_DIM / G;          // elements per lane
    constexpr int RUNS = SPLIT ? 2 : 1;      // runs of contiguous elements per lane
    constexpr int RUN = E / RUNS;
    constexpr int RUN_WORDS = RUN / S::PER_WORD;
    constexpr int PAIRS = E / 2;
    constexpr bool IN_LANE = INTERLEAVE || SPLIT;
    constexpr int HEADS_PER_WARP = 32 / G;
    const unsigned lane = threadIdx.x & 31u;
    const unsigned sub = lane & (G - 1);     // lane within its head's group
    const unsigned group = lane / G;
    const unsigned warp = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const unsigned head0 = warp * HEADS_PER_WARP;
    const unsigned token = blockIdx.x * blockDim.y + threadIdx.y;
    if (head0 >= heads_qk || token >= tokens) return;  // warp-uniform
    const unsigned head = head0 + group;
    const bool valid = head < heads_qk;      // a half warp past the last head still shuffles
    const size_t base = ((size_t)token * heads_total + head) * HEAD_DIM;

    float v[E];
#pragma unroll
    for (int q = 0; q < RUNS; ++q) {
        unsigned w[RUN_WORDS];
        const unsigned off = sub * RUN + q * (HEAD_DIM / 2);
        if (valid) {
            load_words<RUN_WORDS>(qkv + (base + off) * ITEM, w);
        } else {
#pragma unroll
            for (int k = 0; k < RUN_WORDS; ++k) w[k] = 0u;
        }
#pragma unroll
        for (int k = 0; k < RUN_WORDS; ++k) S::unpack(w[k], v + q * RUN + k * S::PER_WORD);
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) ss += v[i] * v[i];
#pragma unroll
    for (int m = G / 2; m >= 1; m >>= 1) ss += __shfl_xor_sync(FULL_MASK, ss, m);
    const float scale = 1.0f / sqrtf(ss * (1.0f / HEAD_DIM) + eps);

    const char* weight = head < heads_q ? q_weight : k_weight;
#pragma unroll
    for (int q = 0; q < RUNS; ++q) {
        unsigned ww[RUN_WORDS];
        float wt[RUN];
        load_words<RUN_WORDS>(weight + (size_t)(sub * RUN + q * (HEAD_DIM / 2)) * ITEM, ww);
#pragma unroll
        for (int k = 0; k < RUN_WORDS; ++k) S::unpack(ww[k], wt + k * S::PER_WORD);
#pragma unroll
        for (int i = 0; i < RUN; ++i) v[q * RUN + i] *= wt[i];
    }

    const float pos = (float)positions[token];
    if (IN_LANE) {
        const float rot = scale * attention_factor;  // rides on cos and sin
        float f[PAIRS];
        if constexpr (FULL && PAIRS % 4 == 0) {
#pragma unroll
            for (int k = 0; k < PAIRS / 4; ++k) {
                const float4 u = reinterpret_cast<const float4*>(inv_freq + sub * PAIRS)[k];
                f[4 * k] = u.x; f[4 * k + 1] = u.y; f[4 * k + 2] = u.z; f[4 * k + 3] = u.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < PAIRS; ++j)
                f[j] = (FULL || sub * PAIRS + j < n_pairs) ? inv_freq[sub * PAIRS + j] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < PAIRS; ++j) {
            const int a = INTERLEAVE ? 2 * j : j;
            const int b = INTERLEAVE ? 2 * j + 1 : RUN + j;
            const float x0 = v[a], x1 = v[b];
            if (FULL || sub * PAIRS + j < n_pairs) {
                float s, c;
                __sincosf(pos * f[j], &s, &c);
                c *= rot;
                s *= rot;
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            } else {  // partial rotary: normalized only
                v[a] = x0 * scale;
                v[b] = x1 * scale;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < E; ++i) v[i] *= scale;
        const bool first_half = sub < half_lanes;
        const bool rotated = sub < 2 * half_lanes;
        const unsigned partner = first_half ? lane + half_lanes : rotated ? lane - half_lanes : lane;
        const unsigned pair0 = first_half ? sub * E : rotated ? (sub - half_lanes) * E : 0u;
        const float sign = first_half ? -1.0f : rotated ? 1.0f : 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) {
            const float other = __shfl_sync(FULL_MASK, v[i], partner);
            if (rotated) {
                float s, c;
                __sincosf(pos * inv_freq[pair0 + i], &s, &c);
                v[i] = v[i] * (c * attention_factor) + sign * other * (s * attention_factor);
            }
        }
    }

    if (valid) {
#pragma unroll
        for (int q = 0; q < RUNS; ++q) {
            unsigned w[RUN_WORDS];
#pragma unroll
            for (int k = 0; k < RUN_WORDS; ++k) w[k] = S::pack(v + q * RUN + k * S::PER_WORD);
            store_words<RUN_WORDS>(qkv + (base + sub * RUN + q * (HEAD_DIM / 2)) * ITEM, w);
        }
    }
}
"""

# storage -> (C++ storage type, bytes per element, lanes per head at the default mapping)
FUSED_TWIN_STORAGE = {"float32": ("F32", 4, 32), "bfloat16": ("Bf16", 2, 16),
                      "float16": ("Half", 2, 16)}


def fused_twin_name(storage: str, head_dim: int, interleave: bool, full: bool = True) -> str:
    """The template instantiation of the twin for one case (a CuPy/NVRTC name expression):
    the numba kernel's mapping (:func:`ropelab.kernels.fused_qknorm_rope.neox_split`) at
    ``rotary_dim == head_dim`` (``full``) or below it."""
    from ..kernels.fused_qknorm_rope import split_fits

    kind, item, lanes = FUSED_TWIN_STORAGE[storage]
    split = split_fits(interleave, full, storage)
    flag = lambda b: "true" if b else "false"  # noqa: E731
    return (f"fused_qknorm_rope_twin<{kind}, {item}, {head_dim}, {lanes}, {flag(interleave)}, "
            f"{flag(split)}, {flag(full)}>")


def fused_twin_names(head_dims=(64, 128, 256)) -> list[str]:
    return [fused_twin_name(st, d, inter, full) for st in FUSED_TWIN_STORAGE for d in head_dims
            for inter in (True, False) for full in (True, False)]


def compile_fused_twin_ptx(names=None, arch: str = "compute_90") -> dict:
    """{name expression: PTX} through NVRTC (cuda-bindings), no GPU needed: a compile check of
    :data:`FUSED_TWIN_SOURCE` with the options CuPy uses for it."""
    names = list(names or fused_twin_names())
    ptx, lowered = _compile_twin_module(names, arch)
    return {n: _ptx_entry(ptx, lowered[n]) for n in names}


def _compile_twin_module(names, arch: str = "compute_90") -> tuple[str, dict]:
    """(the whole PTX module, {name expression: mangled name}) of the twin's instantiations."""
    from cuda.bindings import nvrtc

    def ok(result):
        err, *rest = result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC: {err}")
        return rest[0] if len(rest) == 1 else rest

    prog = ok(nvrtc.nvrtcCreateProgram(FUSED_TWIN_SOURCE.encode(), b"fused_twin.cu", 0, [], []))
    try:
        for n in names:
            ok(nvrtc.nvrtcAddNameExpression(prog, n.encode()))
        opts = [o.encode() for o in NVRTC_OPTIONS] + [f"--gpu-architecture={arch}".encode()]
        err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = ok(nvrtc.nvrtcGetProgramLogSize(prog))
            log = b" " * size
            ok(nvrtc.nvrtcGetProgramLog(prog, log))
            raise RuntimeError(f"NVRTC could not compile the fused twin:\n{log.decode(errors='replace')}")
        size = ok(nvrtc.nvrtcGetPTXSize(prog))
        ptx = b" " * size
        ok(nvrtc.nvrtcGetPTX(prog, ptx))
        ptx = ptx.decode().rstrip("\x00")
        lowered = {n: ok(nvrtc.nvrtcGetLoweredName(prog, n.encode())).decode() for n in names}
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return ptx, lowered


def twin_sass_counts(names) -> dict:
    """{name expression: SASS counts} of the twin (:func:`ropelab.measure.census.count_sass`),
    compiled here without a GPU: NVRTC to PTX, nvJitLink to a cubin, ``nvdisasm`` (the ``sass``
    extra).  Beside the numba kernel's census (``ropelab census --sass``) it shows what the two
    compilers made of one algorithm."""
    import re

    from .census import count_sass, ptx_to_sass

    module, lowered = _compile_twin_module(list(names))
    sass = ptx_to_sass(module)
    # nvdisasm prints one ".text.<mangled name>" section per kernel.
    sections = re.split(r"^\s*\.section\s+\.text\.([^,\s]+),.*$", sass, flags=re.M)
    bodies = dict(zip(sections[1::2], sections[2::2]))
    return {n: count_sass(bodies[lowered[n]]) for n in names}


def _ptx_entry(ptx: str, mangled: str) -> str:
    """The body of one ``.entry`` of a PTX module."""
    start = ptx.index(f".entry {mangled}(")
    nxt = ptx.find(".entry ", start + 1)
    return ptx[start:nxt if nxt >= 0 else len(ptx)]


NVRTC_OPTIONS = ("--use_fast_math", "-std=c++17")
THREADS = 256
TWINS = {"flat": "cuda_flat", "pack4": "cuda_float4",  # numba variant -> CUDA C++ twin
         "fused_qknorm_rope": "cuda_fused"}


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


_TWIN_FUNCTIONS = {}


def _twin_function(name: str):
    """The compiled twin for one name expression (one small NVRTC module each, made once)."""
    if name not in _TWIN_FUNCTIONS:
        import cupy

        mod = cupy.RawModule(code=FUSED_TWIN_SOURCE, options=NVRTC_OPTIONS, name_expressions=[name])
        _TWIN_FUNCTIONS[name] = mod.get_function(name)
    return _TWIN_FUNCTIONS[name]


class TwinCase:
    """The twin on one set of random inputs, on the GPU: ``launch()`` runs it in place.

    Inputs are :func:`ropelab.check.random_inputs` (as the numba rows of the bench use), held as
    CuPy arrays (bfloat16 as uint16 bits); grid, block and scalar arguments are the numba
    kernel's own (:mod:`ropelab.kernels.fused_qknorm_rope`) at the twin's lanes per head.
    """

    def __init__(self, tokens, heads, head_dim, rotary_dim, storage, interleave, seed=0,
                 max_position=4096):
        import cupy

        from ..ops import fused
        from ..ops.arrays import inspect_array
        from ..kernels import fused_qknorm_rope as kmod

        hq, hk, hv = heads
        rng = np.random.default_rng(seed)
        self.host = ropelab_check.random_inputs(rng, tokens, heads, head_dim, storage, max_position)
        self.problem = fused.build_problem(inspect_array(self.host[0], "qkv"), num_heads_q=hq,
                                           num_heads_k=hk, num_heads_v=hv, head_dim=head_dim,
                                           rotary_dim=rotary_dim, interleave=interleave)
        lanes = FUSED_TWIN_STORAGE[storage][2]
        if not kmod.neox_fits(self.problem, lanes, kmod.neox_split(self.problem)):
            raise ValueError(f"the twin needs rotary_dim a multiple of {2 * head_dim // lanes} "
                             f"for NeoX; got {rotary_dim}")
        self.qkv, self.q_weight, self.k_weight, self.positions = (cupy.asarray(a) for a in self.host)
        self.inv_freq = cupy.asarray(self.problem.inv_freq.astype(np.float32))
        self.fn = _twin_function(fused_twin_name(storage, head_dim, interleave,
                                                 self.problem.rotary_dim == head_dim))
        self.grid, self.block = kmod.launch_config(self.problem, None, 32 // lanes)
        self.args = (self.qkv, self.q_weight, self.k_weight, self.positions, self.inv_freq,
                     *kmod.scalar_args(self.problem, lanes), np.uint32(tokens))

    def launch(self):
        self.fn(self.grid, self.block, self.args)


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


def check_twin(shapes=None, storages=("bfloat16", "float16", "float32"),
               layouts=(True, False), seed: int = 0) -> list:
    """The CUDA C++ twin against the float64 reference, with the fused kernel's tolerance
    (:func:`ropelab.fused.tolerance`, fast-math); needs a GPU and CuPy.

    ``shapes``: :class:`ropelab.shapes.FusedShape` values (default: the production shapes).
    Returns :class:`ropelab.verdict.CheckRow` rows (``passed`` says if each is within budget);
    ``tests/test_gpu_public_path.py`` runs it on the GPU.
    """
    from .. import reference
    from ..shapes import PRODUCTION_SHAPES
    from ..verdict import CheckRow
    from ..target import SIMULATED

    if SIMULATED or not available()["cupy"]:
        raise RuntimeError("check_twin needs a GPU and CuPy (pip install -e '.[baselines]')")
    rows = []
    for shape in shapes or PRODUCTION_SHAPES.values():
        heads = (shape.heads_q, shape.heads_k, shape.heads_v)
        for storage in storages:
            for inter in layouts:
                case = TwinCase(shape.tokens, heads, shape.head_dim, shape.rotary_dim, storage,
                                inter, seed=seed)
                qkv, wq, wk, pos = case.host
                kw = dict(num_heads_q=heads[0], num_heads_k=heads[1], num_heads_v=heads[2],
                          head_dim=shape.head_dim, rotary_dim=shape.rotary_dim, interleave=inter)
                dq, dwq, dwk = (ropelab_check.decode(a, storage) for a in (qkv, wq, wk))
                want = reference.fused_qknorm_rope(dq, q_weight=dwq, k_weight=dwk, positions=pos,
                                                   **kw)
                normed = reference.fused_qknorm_rope(dq, q_weight=dwq, k_weight=dwk,
                                                     positions=np.zeros_like(pos), **kw)
                case.launch()
                got = case.qkv.get()
                qk = (heads[0] + heads[1]) * shape.head_dim
                angle = float(np.abs(pos).max()) * float(case.problem.inv_freq.max())
                tol = fused_atol(float(np.abs(normed[:, :qk]).max()),
                                      float(np.abs(want[:, :qk]).max()), angle, storage,
                                      fastmath=True)
                err = float(np.abs(ropelab_check.decode(got, storage)[:, :qk] - want[:, :qk]).max())
                v_same = bool(np.array_equal(got[:, qk:].view(np.uint8), qkv[:, qk:].view(np.uint8)))
                rows.append(CheckRow("cuda_fused", "gpu", (shape.name,),
                                     f"{'gptj' if inter else 'neox'},rot={shape.rotary_dim}",
                                     err, tol, storage, v_same))
    return rows


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
        args = (cx, co, cp, np.int64(n_pairs), np.int64(total), np.float32(10000.0))
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
