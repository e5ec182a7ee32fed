"""Controlled experiments for three claims of the seed notes (the ledger in notebook 07).

1. **SGLang PR 21654, "before" and "after".**  The PR's fused kernel computed ``powf`` and
   ``__sincosf`` for every element; the fix computes them once per interleaved pair.
   :func:`make_kernel` builds both forms of one small Numba kernel that differ in that alone:
   a warp per (token, head), ``head_dim / 32`` consecutive elements per lane, the frequency
   from ``pow`` as SGLang's ``compute_freq`` does, and in-place GPT-J rotation.  No RMSNorm:
   what is measured is the rotation step the PR changed.  The PTX census shows that NVVM
   already merges the per-element form's duplicate ``pow``/``sin``/``cos`` (both builds are the
   same code), while NVIDIA's C++ compiler merges only some of them; so :func:`measure` times
   the CUDA C++ pair of :data:`CUDA_SOURCE` (through CuPy) beside the Numba pair, on the
   production shapes, against a copy of the same bytes (record kind ``sincos_per_pair``).
2. **``if constexpr (yarn)``.**  C++ removes the YaRN blend at compile time with a template
   parameter.  Numba's equivalent is a Python value the kernel closes over (or a global): it
   is a compile-time constant, and a branch on it is folded away.  :func:`make_kernel` takes
   ``yarn="off" | "on" | "runtime"``; the last one tests ``factor != 1`` at run time, as
   SGLang's code did before the PR.
3. **"``__sincosf`` halves SFU work".**  :data:`CUDA_SOURCE` holds CUDA C++ kernels compiled
   with NVRTC (no GPU needed): ``__sincosf`` against ``__sinf`` + ``__cosf``, and SGLang-style
   per-element / per-pair kernels, so the census shows what nvcc's compiler makes of them.

:func:`census` counts PTX instructions of every build here (rules of
:mod:`ropelab.measure.census.counting`), as a client of the census engine: the Numba kernels are
compiled in its child process with the simulator off; the CUDA C++ ones in-process with NVRTC.
Results are cached per compiled code and compiler versions.

Command line::

    python -m ropelab.measure.seed_claims --census        # print the counts (no GPU)
    python -m ropelab.measure.seed_claims --record        # time on a GPU, save under data/
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from functools import cache

import numpy as np
from numba import cuda, float32, uint32

from .census import engine
from .census.counting import count_ptx
from ..kernels._device import WARP  # one WARP for the package
HEAD_DIM = 128
WARPS_PER_BLOCK = 4
RECORD_KIND = "sincos_per_pair"
YARN_MODES = ("off", "on", "runtime")
CENSUS_FILE = engine.DATA_DIR / "seed-claims.json"
# Argument types of make_kernel's kernels, as measure() passes them.
SIGNATURE = "void(float32[::1], int32[::1], uint32, float32, float32, float32, float32, float32)"


# ex: begin yarn_blend
@cuda.jit(device=True, inline="always")
def yarn_blend(freq, half_dim, factor, low, high):
    """SGLang's YaRN blend: move ``freq`` towards ``freq / factor`` by a ramp over the pair
    index, clamped to [0, 1] (``high > low``; the host applies the ``low == high`` guard)."""
    ramp = min(max((float32(half_dim) - low) / (high - low), float32(0.0)), float32(1.0))
    return (freq / factor) * ramp + freq * (float32(1.0) - ramp)
# ex: end yarn_blend


@cache
def make_kernel(per_pair: bool = True, yarn: str = "off", head_dim: int = HEAD_DIM):
    """The kernel function (not yet compiled) for one combination; see the module docstring.

    ``per_pair`` and ``yarn`` become the closure constants ``PER_PAIR``, ``YARN_ALWAYS`` and
    ``YARN_AT_RUNTIME``: Numba reads them once, at compile time, so each combination is its
    own kernel and a branch on them costs nothing at run time.
    """
    if yarn not in YARN_MODES:
        raise ValueError(f"yarn must be one of {YARN_MODES}, got {yarn!r}")
    if head_dim % (2 * WARP):
        raise ValueError(f"head_dim must be a multiple of {2 * WARP}, got {head_dim}")
    E = head_dim // WARP  # elements per lane, even: a pair never straddles two lanes
    STEP = 2 if per_pair else 1  # elements per sin/cos evaluation
    PER_PAIR = bool(per_pair)
    YARN_ALWAYS = yarn == "on"
    YARN_AT_RUNTIME = yarn == "runtime"

    # ex: begin sglang_style_rope
    def rope_sglang_style(x, positions, heads, base, rotary_dim, factor, low, high):
        tid = uint32(cuda.threadIdx.x)
        lane = tid & uint32(WARP - 1)
        head = uint32(cuda.blockIdx.y) * (uint32(cuda.blockDim.x) >> uint32(5)) + (tid >> uint32(5))
        if head >= heads:
            return
        token = uint32(cuda.blockIdx.x)
        offset = lane * uint32(E)  # this lane's first element of the head
        first = (token * heads + head) * uint32(head_dim) + offset
        vals = cuda.local.array(E, float32)
        rotated = cuda.local.array(E, float32)
        for i in range(E):
            vals[i] = x[first + uint32(i)]
        pos = float32(positions[token])
        for k in range(E // STEP):
            i = k * STEP
            half_dim = (offset + uint32(i)) >> uint32(1)  # the pair index, as SGLang computes it
            freq = math.pow(base, float32(-2.0) * float32(half_dim) / rotary_dim)
            if YARN_ALWAYS:  # compile-time constant: the branch is gone from the other builds
                freq = yarn_blend(freq, half_dim, factor, low, high)
            elif YARN_AT_RUNTIME:  # the pre-PR form: tested on every call, in every thread
                if factor != float32(1.0):
                    freq = yarn_blend(freq, half_dim, factor, low, high)
            angle = pos * freq
            c = math.cos(angle)
            s = math.sin(angle)
            if PER_PAIR:  # after the PR: one sin/cos for both elements of pair (i, i + 1)
                x0 = vals[i]
                x1 = vals[i + 1]
                rotated[i] = x0 * c - x1 * s
                rotated[i + 1] = x0 * s + x1 * c
            else:  # before: every element evaluates its own, and reads its partner
                partner = -vals[i + 1] if i % 2 == 0 else vals[i - 1]
                rotated[i] = vals[i] * c + partner * s
        for i in range(E):
            x[first + uint32(i)] = rotated[i]
    # ex: end sglang_style_rope

    rope_sglang_style.__qualname__ = (f"rope_{'per_pair' if per_pair else 'per_element'}"
                                      f"_yarn_{yarn}_d{head_dim}")
    return rope_sglang_style


BUILDS = (  # (label, per_pair, yarn): what the census compiles and the ledger reads
    ("per_element", False, "off"),
    ("per_pair", True, "off"),
    ("per_pair_yarn_runtime", True, "runtime"),
    ("per_pair_yarn_on", True, "on"),
)


def launch_config(tokens: int, heads: int) -> tuple[tuple[int, int], int]:
    """((tokens, head blocks), threads): a warp per (token, head), WARPS_PER_BLOCK per block."""
    return (tokens, -(-heads // WARPS_PER_BLOCK)), WARPS_PER_BLOCK * WARP


def host_freqs(rotary_dim: int, base: float = 10000.0, yarn: tuple | None = None) -> np.ndarray:
    """The kernels' frequencies in float64: ``base ** (-2 j / rotary_dim)``, blended as in
    :func:`yarn_blend` when ``yarn = (factor, low, high)``.  For checks against the reference."""
    j = np.arange(rotary_dim // 2, dtype=np.float64)
    f = base ** (-2.0 * j / rotary_dim)
    if yarn is not None:
        factor, low, high = yarn
        ramp = np.clip((j - low) / (high - low), 0.0, 1.0)
        f = f / factor * ramp + f * (1.0 - ramp)
    return f


def run(x, positions, *, per_pair: bool = True, yarn: str = "off", base: float = 10000.0,
        yarn_params: tuple = (1.0, 0.0, 1.0), fastmath: bool = True):
    """Rotate ``x`` (``[tokens, heads, head_dim]`` float32, C-contiguous) in place with one
    build; on the simulator or a GPU.  ``yarn_params`` is ``(factor, low, high)``."""
    from ..kernels.plan import jitted

    tokens, heads, head_dim = x.shape
    grid, block = launch_config(tokens, heads)
    kernel = jitted(make_kernel(per_pair, yarn, head_dim), fastmath)
    factor, low, high = (np.float32(v) for v in yarn_params)
    kernel[grid, block](x.reshape(-1), positions, np.uint32(heads), np.float32(base),
                        np.float32(head_dim), factor, low, high)
    return x


# --------------------------------------------------------------------------------------------
# CUDA C++ for comparison, compiled by NVRTC (NVIDIA's runtime compiler: the nvcc front end)
# --------------------------------------------------------------------------------------------

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
_BRANCH = re.compile(r"^\s*(?:@!?%p\d+\s+)?bra(?:\.uni)?\s", re.M)


def _entry_bodies(ptx_text: str) -> dict[str, str]:
    """``{kernel name: its PTX from .entry to the closing brace}``."""
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\(", ptx_text):
        end = ptx_text.find("\n}", m.end())
        out[m.group(1)] = ptx_text[m.start():end + 2]
    return out


def _counts(body: str) -> dict:
    counts = count_ptx(body)
    counts["branches"] = len(_BRANCH.findall(body))
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


def compile_rows(payload=None):
    """(In the child.)  Compile each Numba build of :data:`BUILDS`: one row each."""
    for label, per_pair, yarn in BUILDS:
        text, _ = cuda.compile_ptx(make_kernel(per_pair, yarn), SIGNATURE, cc=engine.CC,
                                   fastmath=True)
        yield {"compiler": "numba", "kernel": label, **_counts(text)}


def census_key() -> str:
    """The Numba builds' code and signature, the CUDA C++ source and the NVRTC options."""
    kernels = [make_kernel(per_pair, yarn) for _, per_pair, yarn in BUILDS]
    return engine.cache_key("seed_claims", kernels + [_counts, _entry_bodies, nvrtc_ptx],
                            builds=BUILDS, signature=SIGNATURE, cuda_source=CUDA_SOURCE)


def census(use_cache: bool = True) -> dict:
    """PTX counts of every build (Numba and CUDA C++), fast-math: ``{"key", "rows"}``, each row
    ``{"compiler", "kernel", "instructions", "branches", "sfu", "int_divrem", "f64"}``."""
    key = census_key()
    user_file = engine.user_cache_dir() / f"seed-claims-{key}.json"
    if use_cache:
        doc = engine.lookup(key, CENSUS_FILE, user_file)
        if doc is not None:
            return doc
    bodies = _entry_bodies(nvrtc_ptx())
    rows = engine.run_child("ropelab.measure.seed_claims") + [{"compiler": "nvrtc", "kernel": k, **_counts(bodies[k])}
                                         for k in CUDA_KERNELS]
    doc = {"key": key, "cc": ".".join(map(str, engine.CC)), "versions": engine.versions(),
           "rows": rows}
    engine.remember(user_file, doc)
    return doc


def census_row(doc: dict, compiler: str, kernel: str) -> dict:
    for r in doc["rows"]:
        if r["compiler"] == compiler and r["kernel"] == kernel:
            return r
    raise KeyError(f"no {compiler} census row for {kernel!r}")


# --------------------------------------------------------------------------------------------
# On a GPU: time per-element against per-pair on the production shapes
# --------------------------------------------------------------------------------------------

def _cuda_cpp_kernels():
    """The NVRTC-compiled per-element and per-pair kernels through CuPy (the bench's CUDA C++
    baselines use CuPy too), compiled with the seed's ``--use_fast_math``."""
    import cupy

    module = cupy.RawModule(code=CUDA_SOURCE, options=("--use_fast_math", "-std=c++17"))
    return {name: module.get_function(f"sglang_{name}") for name in ("per_element", "per_pair")}


def measure(repeats: int | None = None, progress: bool = True) -> list[dict]:
    """Time the per-element and per-pair forms in float32 on the production shapes (Q and K
    heads, in place, fast-math, no YaRN): the CUDA C++ kernels of :data:`CUDA_SOURCE` (the
    seed's compiler, through CuPy) and the Numba builds of :func:`make_kernel`, with the device
    copy of the same bytes timed the same way (cold L2, events; :class:`ropelab.measure.bench.Timer`).
    Every kernel is checked against the float64 reference first."""
    from . import bench

    bench.require_gpu()  # before CuPy: on the simulator the refusal is the message, not an import
    import cupy

    from .. import reference, shapes
    from ..kernels.plan import jitted
    from ..tolerance import max_angle, rope_atol

    rng = np.random.default_rng(0)
    cpp = _cuda_cpp_kernels()

    def launcher(family: str, label: str, x, positions, tokens: int, heads: int):
        grid, block = launch_config(tokens, heads)
        if family == "cuda_cpp":
            fn = cpp[label]
            args = (x, positions, np.int32(heads), np.float32(10000.0), np.int32(HEAD_DIM),
                    np.float32(1.0), np.float32(0.0), np.float32(1.0))
            return lambda: fn(grid, (block,), args)
        kernel = jitted(make_kernel(label == "per_pair", "off"), True)[grid, block]
        args = (x, positions, np.uint32(heads), np.float32(10000.0), np.float32(HEAD_DIM),
                np.float32(1.0), np.float32(0.0), np.float32(1.0))
        return lambda: kernel(*args)

    kinds = [(f, k) for f in ("cuda_cpp", "numba") for k in ("per_element", "per_pair")]
    # Correctness on the GPU first: a timing of a wrong kernel means nothing.
    small = rng.standard_normal((5, 3, HEAD_DIM)).astype(np.float32)
    small_pos = rng.integers(0, 4096, 5).astype(np.int32)
    freqs = host_freqs(HEAD_DIM)
    want = reference.rope(small, small_pos, freqs=freqs)
    tol = rope_atol(float(np.abs(small).max()), max_angle(small_pos, freqs), fastmath=True)
    for family, label in kinds:
        x = cupy.asarray(small.reshape(-1))
        launcher(family, label, x, cupy.asarray(small_pos), 5, 3)()
        err = float(np.abs(cupy.asnumpy(x).reshape(small.shape) - want).max())
        if not err <= tol:
            raise bench.BenchError(f"{family} {label}: max error {err:.2e} > {tol:.2e}")

    timer = bench.Timer(**({"repeats": repeats} if repeats else {}))
    rows = []
    for spec in shapes.PRODUCTION_SHAPES.values():
        if spec.head_dim != HEAD_DIM:
            continue
        shape = bench.Shape(spec.name, spec.tokens, heads_q=spec.heads_q, heads_k=spec.heads_k,
                            head_dim=spec.head_dim, heads_v=spec.heads_v, rotary_dim=spec.rotary_dim)
        buf = bench.Buffers(shape)
        copy = bench.summarize(timer.time(buf.copy), shape.bytes_moved)
        heads = shape.heads_q + shape.heads_k
        x = cupy.asarray(rng.standard_normal(shape.tokens * heads * HEAD_DIM, dtype=np.float32))
        positions = cupy.arange(shape.tokens, dtype=cupy.int32)
        for family, label in kinds:
            samples = timer.time(launcher(family, label, x, positions, shape.tokens, heads))
            timing = bench.summarize(samples, shape.bytes_moved, copy["gbps"])
            rows.append({"family": family, "kernel": label, "shape": shape.label,
                         "tokens": shape.tokens, "heads": heads, "head_dim": HEAD_DIM,
                         "dtype": "float32", **timing,
                         **bench.host_fields(timer.last_host_us, timer.fill_us)})
            if progress:
                print(f"{shape.label:<20} {family:<9} {label:<12} {timing['median_us']:>8.1f} us "
                      f"({100 * timing['frac_of_copy']:.0f}% of copy)", file=sys.stderr)
    return rows


METHOD = ("Per-element (SGLang before PR 21654: pow and sin/cos for every element) against "
          "per-pair (after) RoPE, a warp per (token, head), float32 in place on the Q and K heads "
          "of each production shape, fast-math, no YaRN: cuda_cpp rows are "
          "ropelab.measure.seed_claims.CUDA_SOURCE compiled by NVRTC through CuPy, numba rows "
          "make_kernel's builds. Timed with ropelab.measure.bench.Timer: cold L2 (fill before every "
          "launch), CUDA events, median and 20th/80th percentiles; copy_gbps from "
          "cuMemcpyDtoDAsync of the same bytes timed the same way.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="controlled experiments for the seed-claims ledger")
    parser.add_argument("--census", action="store_true", help="print the PTX counts (no GPU)")
    parser.add_argument("--save-census", action="store_true",
                        help="write the counts to data/census/seed-claims.json")
    parser.add_argument("--record", action="store_true",
                        help=f"time on a GPU and save a {RECORD_KIND!r} record under data/")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    if args.census or args.save_census:
        doc = census(use_cache=not args.save_census)
        for r in doc["rows"]:
            print(f"{r['compiler']:<6} {r['kernel']:<30} instr {r['instructions']:>4}  "
                  f"branches {r['branches']:>3}  sfu {r['sfu']}")
        if args.save_census:
            print(f"wrote {engine.write_json(CENSUS_FILE, doc)}")
    if args.record:
        from . import records

        from .bench import BenchError

        try:
            rows = measure(repeats=args.repeats)
        except BenchError as exc:
            print(f"ropelab.measure.seed_claims: {exc}", file=sys.stderr)
            return 2
        print(f"saved {records.save(RECORD_KIND, rows, method=METHOD)}")
    if not (args.census or args.save_census or args.record):
        parser.print_help()
    return 0


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy: the census key reads the kernels' module.
    from ropelab.measure import seed_claims as _imported

    sys.exit(_imported.main())
