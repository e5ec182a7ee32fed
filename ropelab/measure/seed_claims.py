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
3. **"``__sincosf`` halves SFU work".**  :data:`CUDA_SOURCE` (in
   :mod:`ropelab.measure.seed_claims_cuda`, the CUDA C++ side) holds CUDA C++ kernels compiled
   with NVRTC (no GPU needed): ``__sincosf`` against ``__sinf`` + ``__cosf``, and SGLang-style
   per-element / per-pair kernels, so the census shows what nvcc's compiler makes of them.

:func:`census` counts PTX instructions of every build here (rules of
:mod:`ropelab.measure.census.counting`), as a client of the census engine, in two parts keyed
on what makes their PTX: the Numba kernels compiled in its child process with the simulator off
(NVVM), the CUDA C++ ones in-process (NVRTC).

Command line::

    python -m ropelab.measure.seed_claims --census        # print the counts (no GPU)
    python -m ropelab.measure.seed_claims --record        # time on a GPU, save under data/
"""

from __future__ import annotations

import argparse
import math
import sys
from functools import cache

import numpy as np
from numba import cuda, float32, uint32

from . import seed_claims_cuda
from .census import engine
from .seed_claims_cuda import CUDA_KERNELS, CUDA_SOURCE, nvrtc_ptx  # noqa: F401  (the claims' API)
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


def compile_rows(payload=None):
    """(In the child.)  Compile each Numba build of :data:`BUILDS`: one row each."""
    for label, per_pair, yarn in BUILDS:
        text, _ = cuda.compile_ptx(make_kernel(per_pair, yarn), SIGNATURE, cc=engine.CC,
                                   fastmath=True)
        yield {"compiler": "numba", "kernel": label, **seed_claims_cuda.counts(text)}


def census_keys() -> dict:
    """``{"numba": key, "nvrtc": key}``: the census in two parts, each keyed on what produces
    its PTX.  The Numba builds' code and signature (and NVVM); the CUDA C++ source and NVRTC's
    options (and NVRTC, which torch's pins may move while NVVM stays)."""
    kernels = [make_kernel(per_pair, yarn) for _, per_pair, yarn in BUILDS]
    count = [seed_claims_cuda.counts, seed_claims_cuda.entry_bodies]
    branch = seed_claims_cuda.BRANCH.pattern  # a compiled pattern is not code the digest reads
    return {"numba": engine.cache_key("seed_claims", kernels + count, builds=BUILDS,
                                      signature=SIGNATURE, branch=branch),
            "nvrtc": engine.cache_key("seed_claims_nvrtc", count + [seed_claims_cuda.nvrtc_ptx],
                                      stages=("nvrtc",), cuda_source=CUDA_SOURCE, branch=branch)}


def _build(part: str, key: str) -> dict:
    if part == "numba":
        rows = engine.run_child("ropelab.measure.seed_claims", total=len(BUILDS),
                                label="seed-claims census")
        return engine.document(key, rows, part=part)
    return engine.document(key, seed_claims_cuda.nvrtc_rows(), stages=("nvrtc",), part=part)


def census(use_cache: bool = True) -> dict:
    """PTX counts of every build (Numba and CUDA C++), fast-math: ``{"key", "rows"}``, each row
    ``{"compiler", "kernel", "instructions", "branches", "sfu", "int_divrem", "f64"}``.

    Each part is served from ``data/census/seed-claims.json`` (then the user cache) when its key
    matches, else built: the Numba builds in the census child, the CUDA C++ ones in-process.
    """
    keys = census_keys()
    parts = {keys[p]: p for p in ("numba", "nvrtc")}
    docs = engine.cached("seed-claims", parts,
                         lambda todo: {k: _build(p, k) for k, p in todo.items()},
                         committed=CENSUS_FILE, use_cache=use_cache, needs=("ptx", "nvrtc"),
                         label="the seed-claims census")
    numba, nvrtc = docs[keys["numba"]], docs[keys["nvrtc"]]
    return {"key": f"{keys['numba']}-{keys['nvrtc']}", "cc": numba["cc"],
            "versions": {**numba["versions"], **nvrtc["versions"]},
            "parts": {"numba": numba, "nvrtc": nvrtc}, "rows": numba["rows"] + nvrtc["rows"]}


def save_census(doc: dict) -> str:
    """Write the committed file: both parts, each under its own key."""
    entries = {part["key"]: part for part in doc["parts"].values()}
    return str(engine.write_json(CENSUS_FILE, {"entries": entries}))


def census_row(doc: dict, compiler: str, kernel: str) -> dict:
    for r in doc["rows"]:
        if r["compiler"] == compiler and r["kernel"] == kernel:
            return r
    raise KeyError(f"no {compiler} census row for {kernel!r}")


# --------------------------------------------------------------------------------------------
# On a GPU: time per-element against per-pair on the production shapes
# --------------------------------------------------------------------------------------------

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
    cpp = seed_claims_cuda.cuda_cpp_kernels()

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
            print(f"wrote {save_census(doc)}")
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
