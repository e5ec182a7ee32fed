"""The CUDA C++ side of the seed-claims experiments (:mod:`ropelab.measure.seed_claims`).

:data:`CUDA_SOURCE` holds the kernels the claims are about, written as the seed wrote them:
``__sincosf`` against ``__sinf`` + ``__cosf``, and SGLang-style rotation per element and per pair
(with compile-time and run-time YaRN).  NVRTC, NVIDIA's runtime compiler (the nvcc front end),
turns them into PTX without a GPU (:func:`nvrtc_ptx`, :func:`nvrtc_rows`: the census's NVRTC
rows); on a GPU, CuPy compiles the same source to time it (:func:`cuda_cpp_kernels`).
"""

from __future__ import annotations

import re

from .census import engine
from .census.counting import count_ptx

CUDA_SOURCE = r"""
// One sin and one cos of the same angle, three ways.
extern "C" __global__ void sincosf_intrinsic(const float* a, float* s, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float si, co; __sincosf(a[i], &si, &co); s[i] = si; c[i] = co; }
}
extern "C" __global__ void sinf_and_cosf(const float* a, float* s, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { s[i] = __sinf(a[i]); c[i] = __cosf(a[i]); }
}

// SGLang-style rotation of one head by a warp, 4 elements per lane (head_dim 128).
template <bool yarn>
__device__ inline float compute_freq(float base, int rotary_dim, int half_dim, float factor,
                                     float low, float high) {
  float freq = powf(base, -2.0f * half_dim / static_cast<float>(rotary_dim));
  if constexpr (yarn) {
    float ramp = fminf(fmaxf((half_dim - low) / (high - low), 0.0f), 1.0f);
    freq = freq / factor * ramp + freq * (1.0f - ramp);
  }
  return freq;
}
__device__ inline float compute_freq_runtime(float base, int rotary_dim, int half_dim,
                                             float factor, float low, float high) {
  float freq = powf(base, -2.0f * half_dim / static_cast<float>(rotary_dim));
  if (factor != 1.0f) {
    float ramp = fminf(fmaxf((half_dim - low) / (high - low), 0.0f), 1.0f);
    freq = freq / factor * ramp + freq * (1.0f - ramp);
  }
  return freq;
}
constexpr int E = 4;
#define HEAD_SETUP                                                                \
  int lane = threadIdx.x & 31;                                                    \
  int head = blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5);                  \
  if (head >= heads) return;                                                      \
  float* h = x + (static_cast<long>(blockIdx.x) * heads + head) * (32 * E);       \
  int offset = lane * E;                                                          \
  float el[E];                                                                    \
  for (int i = 0; i < E; i++) el[i] = h[offset + i];                              \
  float p = static_cast<float>(pos[blockIdx.x]);

extern "C" __global__ void sglang_per_element(float* x, const int* pos, int heads, float base,
                                              int rotary_dim, float factor, float low, float high) {
  HEAD_SETUP
  float partner[E], s[E], c[E];
  for (int i = 0; i < E; i++) {
    partner[i] = (i % 2 == 0) ? -el[i + 1] : el[i - 1];
    int half_dim = (offset + i) / 2;
    float f = compute_freq<false>(base, rotary_dim, half_dim, factor, low, high);
    __sincosf(p * f, &s[i], &c[i]);
  }
  for (int i = 0; i < E; i++) h[offset + i] = el[i] * c[i] + partner[i] * s[i];
}
#define PER_PAIR_BODY(FREQ)                                                       \
  for (int q = 0; q < E; q += 2) {                                                \
    int half_dim = (offset + q) / 2;                                              \
    float f = FREQ(base, rotary_dim, half_dim, factor, low, high);                \
    float s, c;                                                                   \
    __sincosf(p * f, &s, &c);                                                     \
    float e0 = el[q], e1 = el[q + 1];                                             \
    el[q] = e0 * c - e1 * s;                                                      \
    el[q + 1] = e0 * s + e1 * c;                                                  \
  }                                                                               \
  for (int i = 0; i < E; i++) h[offset + i] = el[i];

extern "C" __global__ void sglang_per_pair(float* x, const int* pos, int heads, float base,
                                           int rotary_dim, float factor, float low, float high) {
  HEAD_SETUP
  PER_PAIR_BODY(compute_freq<false>)
}
extern "C" __global__ void sglang_per_pair_yarn_runtime(float* x, const int* pos, int heads,
    float base, int rotary_dim, float factor, float low, float high) {
  HEAD_SETUP
  PER_PAIR_BODY(compute_freq_runtime)
}
extern "C" __global__ void sglang_per_pair_yarn_on(float* x, const int* pos, int heads,
    float base, int rotary_dim, float factor, float low, float high) {
  HEAD_SETUP
  PER_PAIR_BODY(compute_freq<true>)
}
"""
CUDA_KERNELS = ("sincosf_intrinsic", "sinf_and_cosf", "sglang_per_element", "sglang_per_pair",
                "sglang_per_pair_yarn_runtime", "sglang_per_pair_yarn_on")
BRANCH = re.compile(r"^\s*(?:@!?%p\d+\s+)?bra(?:\.uni)?\s", re.M)


def entry_bodies(ptx_text: str) -> dict[str, str]:
    """``{kernel name: its PTX from .entry to the closing brace}``."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx_text):
        end = ptx_text.find("\n}", m.end())
        out[m.group(1)] = ptx_text[m.start():end + 2]
    return out


def counts(body: str) -> dict:
    counts = count_ptx(body)
    counts["branches"] = len(BRANCH.findall(body))
    return {k: counts[k] for k in ("instructions", "branches", "sfu", "int_divrem", "f64")}


def nvrtc_ptx(source: str = CUDA_SOURCE, cc=engine.CC, fast_math: bool = True) -> str:
    """PTX of a CUDA C++ source from NVRTC, for compute capability ``cc`` (no GPU needed)."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"seed_claims.cu", 0, [], [])
    try:
        opts = [f"--gpu-architecture=compute_{cc[0]}{cc[1]}".encode(), b"-std=c++17"]
        if fast_math:
            opts.append(b"--use_fast_math")  # what the seed compiled with
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise engine.CensusError(f"NVRTC failed: {log.decode(errors='replace').strip()}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.decode().rstrip("\x00")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def nvrtc_rows() -> list[dict]:
    """The census rows of :data:`CUDA_KERNELS`, compiled here by NVRTC (fast-math)."""
    bodies = entry_bodies(nvrtc_ptx())
    return [{"compiler": "nvrtc", "kernel": k, **counts(bodies[k])} for k in CUDA_KERNELS]


def cuda_cpp_kernels():
    """The NVRTC-compiled per-element and per-pair kernels through CuPy (the bench's CUDA C++
    baselines use CuPy too), compiled with the seed's ``--use_fast_math``."""
    import cupy

    module = cupy.RawModule(code=CUDA_SOURCE, options=("--use_fast_math", "-std=c++17"))
    return {name: module.get_function(f"sglang_{name}") for name in ("per_element", "per_pair")}
