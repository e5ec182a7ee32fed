"""Honest GPU timing of ropelab's kernels and their baselines.

How a launch is timed (``Timer.time``), and why:

1. Warm-up launches (compilation, allocator, clocks), then a synchronize.
2. For each of N repeats: a fill kernel writes a buffer at least 4x the L2 (512 MB on an H200,
   whose L2 is 60 MB), a CUDA event is recorded, the launcher runs, a second event is recorded.
   The fill evicts the L2, so every repeat starts cold, as a kernel in a real model does.  It
   also keeps the GPU busy for ~150 us while the host enqueues the timed launch: numba spends
   20-60 us of host time per launch, and on an idle GPU the events would measure that instead
   of the kernel.
3. One synchronize at the end; the elapsed times of the N event pairs are the samples.
4. Median and 20th/80th percentiles; ``bytes_moved`` over the median gives GB/s.  A
   device-to-device copy of the same bytes, timed the same way in the same run, is the roof:
   ``frac_of_copy`` = GB/s of the row / GB/s of that copy.

``bytes_moved`` is the minimum traffic of the operation (x read, out written, positions read
once; for the fused kernel Q and K read and written), identical for every row of one shape, so
GB/s is an *effective* bandwidth and rows of a shape compare by it directly.  A baseline that
reads cos/sin tables moves more bytes than it is credited for; that is its cost.

Everything that is pure arithmetic on timings (quantiles, GB/s, repeat counts, byte counts)
lives in plain functions at the top of this module and is tested on synthetic numbers.  The
GPU parts refuse to run under the simulator: its "times" describe a Python interpreter.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from . import baselines as bl
from . import bench_rows, charts, records
from .. import check as ropelab_check
from .entry import Entry
from ..shapes import PRODUCTION_SHAPES, ROPE_SHAPES, qk_bytes, rope_bytes  # noqa: F401 (re-exported)
from ..target import SIMULATED

# At least this much, and at least 4x the L2.  1 GiB keeps the H200 busy for ~300 us, longer than
# the host needs to enqueue any launch we time (numba's dispatch of a many-argument kernel is
# 40-100 us); each row records the host time so a reader can check that.
FLUSH_BYTES_MIN = 2**30
L2_FACTOR = 4
DEFAULT_REPEATS = 50
DEFAULT_WARMUP = 5
ENTRY_SECONDS = 2.0  # a slow baseline gets fewer repeats so one row takes about this long
MIN_REPEATS = 5

# The shapes come from ropelab.shapes (the one registry): the seed's [tokens, hidden] sizes, one
# that moves more than 1 GB, and the production shapes of the fused kernel (SGLang PR 21654).
SEED_SHAPES = [(s.tokens, s.hidden) for n, s in ROPE_SHAPES.items() if n.startswith("seed_")]
BIG_SHAPES = [(s.tokens, s.hidden) for n, s in ROPE_SHAPES.items() if n.startswith("large_")]
OVERHEAD_SHAPE = (64, 512)  # host launch cost: a kernel far shorter than its launch  # 512 MiB in, 512 MiB out: 1.07 GB moved
FUSED_DTYPES = ("bfloat16", "float16", "float32")

COLUMNS = ("variant", "family", "shape", "tokens", "hidden", "heads_q", "heads_k", "head_dim",
           "dtype", "fastmath", "bytes_moved", "median_us", "p20_us", "p80_us", "repeats",
           "gbps", "copy_gbps", "frac_of_copy", "host_us", "fill_us", "host_bound")


class BenchError(RuntimeError):
    """The benchmark cannot run here (simulator, no device)."""


# --------------------------------------------------------------------------------------------
# Pure arithmetic: tested on synthetic timings
# --------------------------------------------------------------------------------------------

def quantiles(samples_us) -> tuple[float, float, float]:
    """(median, 20th percentile, 80th percentile) of the samples, linear interpolation."""
    a = np.asarray(samples_us, dtype=np.float64)
    if a.size == 0:
        raise ValueError("no timing samples")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"timing samples must be finite and positive, got {a.min()}..{a.max()}")
    p20, med, p80 = np.percentile(a, [20, 50, 80])
    return float(med), float(p20), float(p80)


def gbps(bytes_moved: int, microseconds: float) -> float:
    """Decimal gigabytes per second (1 GB = 1e9 bytes), as GPU data sheets quote bandwidth."""
    if microseconds <= 0:
        raise ValueError("time must be positive")
    return bytes_moved / (microseconds * 1e-6) / 1e9


def host_fields(host_us, fill_us) -> dict:
    """Host enqueue time of the timed launches against the GPU time each fill covers.

    ``host_bound`` is True when the median enqueue time reached 80% of the fill's duration: the
    GPU may have run out of work before the launch arrived, so the row may include host time.
    """
    if not host_us or not fill_us:
        return {"host_us": None, "fill_us": None, "host_bound": None}
    host = quantiles(host_us)[0]
    return {"host_us": round(host, 2), "fill_us": round(float(fill_us), 2),
            "host_bound": bool(host >= 0.8 * fill_us)}


def summarize(samples_us, bytes_moved: int, copy_gbps: float | None = None) -> dict:
    """The timing columns of one bench row."""
    med, p20, p80 = quantiles(samples_us)
    rate = gbps(bytes_moved, med)
    return {
        "bytes_moved": int(bytes_moved),
        "median_us": round(med, 3),
        "p20_us": round(p20, 3),
        "p80_us": round(p80, 3),
        "repeats": len(samples_us),
        "gbps": round(rate, 2),
        "copy_gbps": None if copy_gbps is None else round(copy_gbps, 2),
        "frac_of_copy": None if not copy_gbps else round(rate / copy_gbps, 4),
    }


def repeats_for(seconds_per_call: float, repeats: int = DEFAULT_REPEATS,
                budget_s: float = ENTRY_SECONDS, minimum: int = MIN_REPEATS) -> int:
    """Fewer repeats for slow baselines (eager PyTorch at 1 GB takes ~0.1 s a call)."""
    if seconds_per_call <= 0:
        return repeats
    return max(minimum, min(repeats, int(budget_s / seconds_per_call)))


def flush_bytes(l2_bytes: int) -> int:
    """Size of the L2-evicting fill buffer: at least 4x the L2 and at least 1 GiB."""
    return max(L2_FACTOR * int(l2_bytes), FLUSH_BYTES_MIN)


def per_launch_us(seconds: float, launches: int) -> float:
    if launches <= 0:
        raise ValueError("launches must be positive")
    return seconds / launches * 1e6


def method_text(l2_bytes: int, flush: int, warmup: int, repeats: int) -> str:
    return (
        f"CUDA events on the default stream around each launch; before every timed launch a fill "
        f"kernel writes {flush / 2**20:.0f} MiB (>= {L2_FACTOR}x the {l2_bytes / 2**20:.0f} MiB "
        f"L2), which evicts the L2 (cold cache) and keeps the GPU busy while the host enqueues "
        f"the launch, so the events bracket GPU work only; {warmup} warm-up launches, then up to "
        f"{repeats} timed repeats (fewer for baselines slower than {ENTRY_SECONDS / repeats * 1e3:.0f} "
        f"ms a call, at least {MIN_REPEATS}); median and 20th/80th percentiles; bytes_moved is the "
        f"operation's minimum traffic (same for every row of a shape), GB/s = bytes_moved / "
        f"median (1 GB = 1e9 B); copy_gbps: a device-to-device copy of the same bytes timed the "
        f"same way in the same run (cuMemcpyDtoDAsync called on the driver directly); "
        f"frac_of_copy = gbps / copy_gbps; host_us: median wall time to enqueue the timed launch, "
        f"fill_us: GPU time of one fill; host_bound when host_us >= 0.8 * fill_us (the GPU may "
        f"have idled inside the events)"
    )


@dataclass(frozen=True)
class Shape:
    """One benchmark shape: plain RoPE on [tokens, hidden] or the fused kernel's Q and K."""

    label: str
    tokens: int
    hidden: int | None = None  # plain RoPE: one head of this width
    heads_q: int | None = None  # fused: [tokens, heads, head_dim] Q and K
    heads_k: int | None = None
    head_dim: int | None = None
    dtype: str = "float32"
    heads_v: int | None = None  # fused: V heads sit in qkv but are not touched
    rotary_dim: int | None = None

    @property
    def fused(self) -> bool:
        return self.heads_q is not None

    @property
    def itemsize(self) -> int:
        return {"float32": 4, "bfloat16": 2, "float16": 2}[self.dtype]

    @property
    def bytes_moved(self) -> int:
        if self.fused:
            return qk_bytes(self.tokens, self.heads_q, self.heads_k, self.head_dim, self.itemsize)
        return rope_bytes(self.tokens, self.hidden, self.itemsize)

    @property
    def copy_bytes(self) -> int:
        """Bytes one copy must read (and write) to move what this shape moves."""
        if self.fused:
            return self.tokens * (self.heads_q + self.heads_k) * self.head_dim * self.itemsize
        return self.tokens * self.hidden * self.itemsize

    def fields(self) -> dict:
        return {"shape": self.label, "tokens": self.tokens, "hidden": self.hidden,
                "heads_q": self.heads_q, "heads_k": self.heads_k, "head_dim": self.head_dim,
                "dtype": self.dtype}


def plain_shape(tokens: int, hidden: int) -> Shape:
    return Shape(f"{tokens}x{hidden}", tokens, hidden=hidden)


def shapes_for(groups) -> list[Shape]:
    """Shapes of the named groups: 'seed', 'big', 'production' (or 'all')."""
    groups = {"seed", "big", "production"} if "all" in groups else set(groups)
    unknown = groups - {"seed", "big", "production", "rows"}
    if unknown:
        raise ValueError(f"unknown shape group(s) {sorted(unknown)}; use seed, big, production, "
                         f"rows, all")
    out = []
    if "seed" in groups:
        out += [plain_shape(t, h) for t, h in SEED_SHAPES]
    if "big" in groups:
        out += [plain_shape(t, h) for t, h in BIG_SHAPES]
    if "production" in groups:
        out += [Shape(p.name, p.tokens, heads_q=p.heads_q, heads_k=p.heads_k, head_dim=p.head_dim,
                      dtype=dt, heads_v=p.heads_v, rotary_dim=p.rotary_dim)
                for p in PRODUCTION_SHAPES.values() for dt in FUSED_DTYPES]
    if "rows" in groups:  # h-rope16: plain RoPE as models call it (measure/bench_rows.py)
        out += [Shape(label, t, heads_q=hq, heads_k=hk, head_dim=hd, dtype=dt, heads_v=hv)
                for label, t, hq, hk, hd, dt, hv in bench_rows.SHAPES]
    return out


def make_row(name: str, family: str, shape: Shape, fastmath, timing: dict) -> dict:
    row = {"variant": name, "family": family, **shape.fields(), "fastmath": fastmath,
           **host_fields(None, None), **timing}
    return {c: row[c] for c in COLUMNS}


def target_summary(rows: list[dict]) -> list[str]:
    """The course's speed targets, read off one record's rows (no judgement of pass/fail).

    Best plain-RoPE numba variant at >= 1 GB as a share of the copy; each numba variant over its
    CUDA C++ twin; the fused kernel's share of the copy on the production shapes.
    """
    TWINS = bl.TWINS

    out = []
    big = [r for r in rows if r["family"] == "numba" and r["bytes_moved"] >= 1e9
           and r["frac_of_copy"] is not None]
    for label in dict.fromkeys(r["shape"] for r in big):
        best = max((r for r in big if r["shape"] == label), key=lambda r: r["frac_of_copy"])
        out.append(f"best plain RoPE at {label}: {best['variant']} {100 * best['frac_of_copy']:.1f}% "
                   f"of copy (target >= 95%)")
    med = {(r["variant"], r["shape"], r["dtype"]): r["median_us"] for r in rows}
    for numba_name, cpp_name in TWINS.items():
        ratios = [(r["shape"], r["median_us"] / med[(cpp_name, r["shape"], r["dtype"])])
                  for r in rows if r["variant"] == numba_name
                  and (cpp_name, r["shape"], r["dtype"]) in med]
        if ratios:
            worst = max(ratios, key=lambda t: t[1])
            out.append(f"{numba_name} / {cpp_name}: worst time ratio {worst[1]:.3f} at {worst[0]} "
                       f"(target <= 1.10)")
    for r in rows:
        if r["family"] == "numba_fused" and r["frac_of_copy"] is not None:
            out.append(f"{r['variant']} {r['shape']} {r['dtype']}: {100 * r['frac_of_copy']:.1f}% "
                       f"of copy (target >= 80% on flux_1024, qwen_image_1024)")
    return out


def format_rows(rows: list[dict]) -> str:
    head = (f"{'variant':<22} {'shape':<22} {'median us':>10} {'p20-p80 us':>17} {'GB/s':>8} "
            f"{'copy GB/s':>9} {'of copy':>8} {'host us':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        label = r["shape"] + ("" if r["dtype"] == "float32" else f" {r['dtype']}")
        frac = "" if r["frac_of_copy"] is None else f"{100 * r['frac_of_copy']:.1f}%"
        copy = "" if r["copy_gbps"] is None else f"{r['copy_gbps']:.0f}"
        lines.append(f"{r['variant']:<22} {label:<22} {r['median_us']:>10.2f} "
                     f"{r['p20_us']:>8.2f}-{r['p80_us']:<8.2f} {r['gbps']:>8.0f} {copy:>9} "
                     f"{frac:>8} {_host_cell(r):>8}")
    if any(r.get("host_bound") for r in rows):
        lines.append("! = enqueueing took >= 80% of the fill's GPU time: that row may include host time")
    return "\n".join(lines)


def _host_cell(row: dict) -> str:
    if row.get("host_us") is None:  # records made before host times were kept
        return ""
    return f"{row['host_us']:.0f}{'!' if row.get('host_bound') else ''}"


# --------------------------------------------------------------------------------------------
# The GPU side
# --------------------------------------------------------------------------------------------

def require_gpu() -> None:
    from ..target import SIMULATED

    if SIMULATED:
        raise BenchError(
            "refusing to benchmark on the Numba CUDA simulator: it runs each CUDA thread as a "
            "Python thread, so any time it reports describes the interpreter, not a GPU. Run on a "
            "machine with an NVIDIA GPU, or look at the recorded GPU data "
            "(python -m ropelab bench --recorded).")


def _fill(buf, value):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < buf.size:
        buf[i] = value
        i += stride


@dataclass
class Timer:
    """Event timing with an L2-evicting, GPU-occupying fill before every timed launch."""

    warmup: int = DEFAULT_WARMUP
    repeats: int = DEFAULT_REPEATS
    l2_bytes: int = field(init=False)
    flush_bytes: int = field(init=False)

    def __post_init__(self):
        require_gpu()
        dev = cuda.get_current_device()
        self.l2_bytes = int(dev.L2_CACHE_SIZE)
        self.flush_bytes = flush_bytes(self.l2_bytes)
        self._buf = cuda.device_array(self.flush_bytes // 4, dtype=np.float32)
        self._fill = cuda.jit(_fill)
        self._fill_grid = int(dev.MULTIPROCESSOR_COUNT) * 8
        self._k = 0
        self.flush()
        cuda.synchronize()
        self.fill_us = quantiles(self._time_fill())[0]  # how long each fill keeps the GPU busy
        self.last_host_us: list[float] = []

    def _time_fill(self, n: int = 5) -> list[float]:
        out = []
        for _ in range(n):
            s, e = cuda.event(), cuda.event()
            s.record()
            self.flush()
            e.record()
            e.synchronize()
            out.append(cuda.event_elapsed_time(s, e) * 1e3)
        return out

    def flush(self):
        self._k += 1
        self._fill[self._fill_grid, 256](self._buf, np.float32(self._k))

    def estimate_seconds(self, launch) -> float:
        """Wall time of one warm call including synchronization (for slow baselines)."""
        cuda.synchronize()
        t0 = time.perf_counter()
        launch()
        cuda.synchronize()
        return time.perf_counter() - t0

    def time(self, launch, repeats: int | None = None) -> list[float]:
        """Microseconds of ``repeats`` cold, GPU-side launches of ``launch()``."""
        for _ in range(self.warmup):
            launch()
        n = repeats or self.repeats
        n = repeats_for(self.estimate_seconds(launch), n)
        starts = [cuda.event() for _ in range(n)]
        ends = [cuda.event() for _ in range(n)]
        host = []
        cuda.synchronize()
        for s, e in zip(starts, ends):
            self.flush()
            t0 = time.perf_counter()
            s.record()
            launch()
            e.record()
            host.append((time.perf_counter() - t0) * 1e6)
        ends[-1].synchronize()
        # If enqueueing took longer than the fill keeps the GPU busy, the GPU idled between the
        # events and the row measured the host too: host_fields() flags it in the record.
        self.last_host_us = host
        return [cuda.event_elapsed_time(s, e) * 1e3 for s, e in zip(starts, ends)]


class Buffers:
    """Device inputs of one shape, allocated once and shared by every entry timed on it."""

    def __init__(self, shape: Shape, seed: int = 0):
        self.shape = shape
        self.positions = cuda.to_device(np.arange(shape.tokens, dtype=np.int32))
        if shape.fused:  # the fused kernel's hook allocates Q and K; these serve the copy only
            self._src = cuda.device_array(shape.copy_bytes, dtype=np.uint8)
            self._dst = cuda.device_array(shape.copy_bytes, dtype=np.uint8)
            self._bind_copy()
            return
        rng = np.random.default_rng(seed)
        self.x = cuda.to_device(rng.standard_normal(shape.tokens * shape.hidden, dtype=np.float32))
        self.out = cuda.device_array_like(self.x)
        self._src, self._dst = self.x, self.out
        self._bind_copy()

    def _bind_copy(self):
        if SIMULATED:  # the sweep's plumbing is tested on the simulator with a fake timer
            self._memcpy = lambda dst, src, n, stream: self._dst.copy_to_device(self._src)
            self._src_ptr = self._dst_ptr = self._nbytes = None
            return
        from numba.cuda.cudadrv.driver import device_pointer, driver

        self._memcpy = driver.cuMemcpyDtoDAsync
        self._src_ptr, self._dst_ptr = device_pointer(self._src), device_pointer(self._dst)
        self._nbytes = self._src.nbytes

    def copy(self):
        """Device-to-device copy of the shape's bytes: cuMemcpyDtoDAsync on the default stream.

        Called on the driver directly with pointers taken once: numba's ``copy_to_device``
        spends ~100 us of host time per call in checks (and without a stream it is the
        synchronous cuMemcpyDtoD), long enough for the GPU to idle inside the events.
        """
        self._memcpy(self._dst_ptr, self._src_ptr, self._nbytes, 0)

    def problem(self):
        from ..problem import RopeProblem

        s = self.shape
        return RopeProblem(tokens=s.tokens, heads=1, head_dim=s.hidden, rotary_dim=s.hidden)

    def user_arrays(self):
        """(x, out, positions) as a user holds them: PyTorch tensors over the same memory when
        PyTorch is installed (the review's case), else the numba device arrays."""
        s = self.shape
        plain = (self.x.reshape(s.tokens, s.hidden), self.out.reshape(s.tokens, s.hidden),
                 self.positions)
        if SIMULATED:
            return plain
        try:
            import torch
        except ImportError:
            return plain
        return (torch.as_tensor(self.x, device="cuda").view(s.tokens, s.hidden),
                torch.as_tensor(self.out, device="cuda").view(s.tokens, s.hidden),
                torch.as_tensor(self.positions, device="cuda"))


# Variant options timed besides the defaults (issue: the cos/sin cache, the vLLM / FlashInfer
# method, had never been timed); max_positions=None means "the shape's token count".
EXTRA_OPTIONS = {"freq_table": ({"cache": True, "max_positions": None},)}


def _options_label(options: dict) -> str:
    return ":cache" if options.get("cache") else ""


def _variant_entries(names=None, precise: bool = False) -> list[Entry]:
    """Two rows per variant (and option set): the public call and the kernel alone.

    ``<name>`` times ``ropelab.rope(x, variant=name, positions=pos, out=out)`` exactly as a user
    calls it, on PyTorch tensors when PyTorch is installed.  ``<name>:kernel`` fires the same
    compiled, pre-packed launch with fixed pointers: the GPU work of the call and nothing else.
    Their difference is what the public path costs on the GPU's timeline.
    """
    from .. import kernels

    entries = []
    for name, variant in kernels.VARIANTS.items():
        if names and name not in names:
            continue
        for options in ({},) + EXTRA_OPTIONS.get(name, ()):
            for fm in ((True, False) if precise else (True,)):
                label = name + _options_label(options) + ("" if fm else ":precise")
                entries.append(Entry(label, "ropelab", _public_maker(name, options, fm),
                                     fastmath=fm))
                entries.append(Entry(label + ":kernel", "kernel",
                                     _kernel_maker(variant, options, fm), fastmath=fm))
    return entries


def _resolved(options: dict, tokens: int) -> dict:
    return {k: (tokens if v is None and k == "max_positions" else v) for k, v in options.items()}


def _public_maker(name: str, options: dict, fastmath: bool):
    def make(buf: Buffers):
        import ropelab

        x, out, pos = buf.user_arrays()
        opts = _resolved(options, buf.shape.tokens)
        call = lambda: ropelab.rope(x, variant=name, positions=pos, out=out,  # noqa: E731
                                    fastmath=fastmath, **opts)
        call()  # validates and compiles once; every timed call takes the cached path
        return call
    return make


def _kernel_maker(variant, options: dict, fastmath: bool):
    def make(buf: Buffers):
        from ..kernels.launch import bind

        problem = buf.problem()
        plan = variant.plan(problem, _resolved(options, problem.tokens), fastmath=fastmath)
        if SIMULATED:  # the sweep's plumbing is tested on the simulator: no driver to bind to
            from ..kernels.launch import launch

            return lambda: launch(plan, (buf.x, buf.out, buf.positions))
        n = problem.elements
        bound = bind(plan, ((n, 4), (n, 4), (problem.tokens, 4)))
        ptrs = tuple(int(a.__cuda_array_interface__["data"][0])
                     for a in (buf.x, buf.out, buf.positions))
        return lambda: bound.fire(ptrs, 0)
    return make


def _fused_entries(names=None) -> list[Entry]:
    """The fused kernel through ``ropelab.fused_qknorm_rope`` (at its default and at each
    heads-per-warp setting), and its kernel alone."""
    from ..kernels import fused_qknorm_rope as kmod

    # "fused_qknorm_rope" is every fused row; "fused_qknorm_rope:default" the public call at
    # its defaults alone; any other row is picked by its name.
    picked = [("fused_qknorm_rope" if n == "fused_qknorm_rope:default" else n)
              for n in (names or ()) if n.startswith("fused_qknorm_rope")]
    if names and not picked:
        return []
    entries = [Entry("fused_qknorm_rope", "ropelab_fused", _fused_maker(None), fastmath=True,
                     fused=True),
               Entry("fused_qknorm_rope:kernel", "kernel_fused", _fused_maker(None, kernel=True),
                     fastmath=True, fused=True)]
    # The NeoX (half-split) layout: by default a lane holds both elements of its pairs (every
    # dim rotated, 16-bit storage); the controlled row keeps the partner shuffles.
    entries.append(Entry("fused_qknorm_rope:neox", "ropelab_fused", _fused_maker(None, neox=True),
                         fastmath=True, fused=True))
    entries.append(Entry("fused_qknorm_rope:neox_shuffle", "kernel_fused",
                         _fused_maker(None, neox=True, options={"neox_split": False}),
                         fastmath=True, fused=True))
    # Controlled: one token per block (blocks of 2 warps at zimage's 30 head pairs).
    entries.append(Entry("fused_qknorm_rope:1token_blocks", "kernel_fused",
                         _fused_maker(None, options={"tokens_per_block": 1}),
                         fastmath=True, fused=True))
    # The long-context path: cos/sin read from float32 tables instead of computed.
    entries.append(Entry("fused_qknorm_rope:cache", "ropelab_fused", _fused_maker(None, cache=True),
                         fastmath=True, fused=True))
    for hpw in kmod.HEADS_PER_WARP_CHOICES:
        entries.append(Entry(f"fused_qknorm_rope_{hpw}head{'s' if hpw > 1 else ''}",
                             "ropelab_fused", _fused_maker(hpw), fastmath=True, fused=True))
    if names and "fused_qknorm_rope" not in names:  # single rows by name (a short GPU call)
        entries = [e for e in entries if e.name in picked]
    return entries


def fused_user_arrays(shape: Shape, seed: int = 0):
    """(qkv, q_weight, k_weight, positions) on the device as a PyTorch user holds them
    (``torch.bfloat16`` for bfloat16) when PyTorch is installed, else numba arrays (bfloat16
    as uint16 bit patterns)."""
    heads = (shape.heads_q, shape.heads_k, shape.heads_v or 0)
    host = ropelab_check.random_inputs(np.random.default_rng(seed), shape.tokens, heads,
                                       shape.head_dim, shape.dtype)
    try:
        import torch
    except ImportError:
        torch = None
    if SIMULATED or torch is None or not torch.cuda.is_available():  # a CPU build is no GPU
        return tuple(cuda.to_device(a) for a in host)
    dev = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in host]
    if shape.dtype == "bfloat16":
        dev[:3] = [t.view(torch.bfloat16) for t in dev[:3]]
    return tuple(dev)


def _fused_kwargs(shape: Shape) -> dict:
    return dict(num_heads_q=shape.heads_q, num_heads_k=shape.heads_k,
                num_heads_v=shape.heads_v or 0, head_dim=shape.head_dim,
                rotary_dim=shape.rotary_dim)


def _fused_maker(heads_per_warp, kernel: bool = False, cache: bool = False, neox: bool = False,
                 options=None):
    """``options``: kernel options the public call does not take (controlled rows); they time
    the kernel alone (``kernel=True``)."""
    kernel = kernel or options is not None

    def make(buf: Buffers):
        import ropelab

        if not buf.shape.fused:
            return None
        qkv, wq, wk, pos = fused_user_arrays(buf.shape)
        kw = _fused_kwargs(buf.shape)
        if neox:
            kw.update(interleave=False)
        if cache:  # positions of fused_user_arrays are below 4096 (ropelab_check.random_inputs)
            kw.update(cache=True, max_positions=4096)
        # In place, so every repeat re-normalizes the previous output: values stay O(weight).
        call = lambda: ropelab.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk,  # noqa: E731
                                                 positions=pos, heads_per_warp=heads_per_warp, **kw)
        call()
        if not kernel:
            return call
        from ..ops import fused
        from ..ops.arrays import inspect_array
        from ..kernels import fused_qknorm_rope as kmod
        from ..kernels.launch import bind

        info = inspect_array(qkv, "qkv")
        problem = fused.build_problem(info, **kw)
        plan = kmod.VARIANT.plan(problem, dict(options or {}), aligned=info.ptr % 16 == 0)
        if SIMULATED:
            from ..ops.arrays import device_view
            from ..kernels.launch import launch

            words = np.uint32 if problem.storage == "bfloat16" else None
            views = [device_view(qkv, info, words)] + [
                device_view(a, inspect_array(a, "a")) for a in (wq, wk, pos)]
            return lambda: launch(plan, views)
        bound = bind(plan, fused.caller_sizes(problem))
        ptrs = tuple(_ptr(a) for a in (qkv, wq, wk, pos))
        return lambda: bound.fire(ptrs, 0)
    return make


def _ptr(a) -> int:
    return a.data_ptr() if hasattr(a, "data_ptr") else int(a.__cuda_array_interface__["data"][0])


def _copy_entry() -> Entry:
    return Entry("copy_d2d", "copy", lambda buf: buf.copy, fused=None)


def plan(variants=None, baselines: bool = True, precise: bool = False) -> list[Entry]:
    """Everything to time, in run order (most important first)."""
    entries = [_copy_entry()] + _variant_entries(variants, precise) + _fused_entries(variants)
    entries += bench_rows.entries(variants)  # h-rope16
    if baselines:
        entries += bl.entries()
    return sorted(entries, key=lambda e: e.group)  # stable: keeps the order inside a group


def _applies(entry: Entry, shape: Shape) -> bool:
    if entry.fused is None:
        return True
    return entry.fused == shape.fused


@dataclass
class SweepResult:
    rows: list
    skipped: list  # (entry, shape, reason)
    meta: dict


def sweep(shapes: list[Shape], entries: list[Entry], *, timer: Timer, budget_s: float | None = None,
          progress: bool = True, on_group_done=None) -> SweepResult:
    """Time every applicable (entry, shape); returns rows in the record's column order.

    The copy of each shape is timed first (its GB/s is every row's roof).  ``budget_s`` stops
    starting new entries once that many seconds have passed (skips are reported, not hidden).
    ``on_group_done(rows)`` runs after each group so partial results can be saved.
    """
    from tqdm import tqdm

    t0 = time.perf_counter()
    buffers: dict[Shape, Buffers] = {}
    copy_rate: dict[Shape, float] = {}
    copy_samples: dict[Shape, list] = {}
    copy_host: dict[Shape, dict] = {}
    rows, skipped = [], []
    work = [(e, s) for e in entries for s in shapes if _applies(e, s)]
    bar = tqdm(total=len(work), desc="bench", unit="row", disable=not progress)
    group = None
    for entry, shape in work:
        if group is not None and entry.group != group and on_group_done:
            on_group_done(rows)
        group = entry.group
        bar.set_postfix_str(f"{entry.name} {shape.label}", refresh=False)
        bar.update(1)
        if budget_s is not None and time.perf_counter() - t0 > budget_s:
            skipped.append((entry.name, shape.label, "time budget spent"))
            continue
        if shape not in buffers:
            buffers[shape] = Buffers(shape)
            copy_samples[shape] = timer.time(buffers[shape].copy)
            copy_host[shape] = host_fields(getattr(timer, "last_host_us", None),
                                           getattr(timer, "fill_us", None))
            copy_rate[shape] = gbps(shape.bytes_moved, quantiles(copy_samples[shape])[0])
        buf = buffers[shape]
        rate = copy_rate[shape]
        if entry.family == "copy":
            rows.append(make_row(entry.name, entry.family, shape, None,
                                 dict(summarize(copy_samples[shape], shape.bytes_moved, rate),
                                      **copy_host[shape])))
            continue
        try:
            launch = entry.make(buf)
        except Exception as exc:  # a baseline missing a feature must not stop the sweep
            skipped.append((entry.name, shape.label, f"{type(exc).__name__}: {exc}"))
            continue
        if launch is None:
            continue
        try:
            samples = timer.time(launch)
        except Exception as exc:
            skipped.append((entry.name, shape.label, f"{type(exc).__name__}: {exc}"))
            continue
        rows.append(make_row(entry.name, entry.family, shape, entry.fastmath,
                             dict(summarize(samples, shape.bytes_moved, rate),
                                  **host_fields(getattr(timer, "last_host_us", None),
                                                getattr(timer, "fill_us", None)))))
    bar.close()
    if on_group_done:
        on_group_done(rows)
    return SweepResult(rows, skipped, {})


# --------------------------------------------------------------------------------------------
# Host launch overhead
# --------------------------------------------------------------------------------------------

def _empty():
    pass


def launch_overhead(launches: int = 2000, warmup: int = 100, progress: bool = True) -> list[dict]:
    """Wall-clock host cost per launch over many back-to-back launches.

    ``us_per_launch`` stops the clock when the last launch is enqueued (what the host pays);
    ``us_per_launch_synced`` includes the final synchronize.  The GPU work of each kernel here
    is shorter than its host launch cost, so the queue never fills and the host never waits.
    """
    require_gpu()
    import ropelab

    from ..kernels import flat
    from ..kernels.launch import bind
    from ..kernels.plan import jitted

    # A small shape: each kernel runs shorter than the host needs to launch it, so the launch
    # queue never fills and the wall clock measures the host, not the GPU.
    tokens, hidden = OVERHEAD_SHAPE
    buf = Buffers(plain_shape(tokens, hidden))
    x, out, pos = buf.x, buf.out, buf.positions
    problem = buf.problem()
    empty = cuda.jit(_empty)
    plan = flat.VARIANT.plan(problem)
    flat_kernel = jitted(flat.KERNEL, True)
    n = problem.elements
    bound = bind(plan, ((n, 4), (n, 4), (tokens, 4)))
    ptrs = tuple(int(a.__cuda_array_interface__["data"][0]) for a in (x, out, pos))
    tx, tout, tpos = buf.user_arrays()
    x2, out2 = x.reshape(tokens, hidden), out.reshape(tokens, hidden)

    cases = [
        ("numba empty kernel", 0, lambda: empty[1, 32]()),
        (f"ropelab.rope(flat) {type(tx).__module__.split('.')[0]} arrays {tokens}x{hidden}", 6,
         lambda: ropelab.rope(tx, variant="flat", positions=tpos, out=tout)),
        (f"ropelab.rope(flat) numba arrays {tokens}x{hidden}", 6,
         lambda: ropelab.rope(x2, variant="flat", positions=pos, out=out2)),
        (f"ropelab.rope(flat) check_positions=True (syncs) {tokens}x{hidden}", 6,
         lambda: ropelab.rope(tx, variant="flat", positions=tpos, out=tout, check_positions=True)),
        (f"ropelab.rope(flat) positions=None, new out {tokens}x{hidden}", 6,
         lambda: ropelab.rope(tx, variant="flat")),
        (f"ropelab kernel path (bound launch) {tokens}x{hidden}", 6,
         lambda: bound.fire(ptrs, 0)),
        (f"numba flat dispatcher call {tokens}x{hidden}", 6,
         lambda: flat_kernel[plan.grid, plan.block](x, out, pos, *plan.scalars)),
    ]
    fshape = Shape("fused_64x(24+24+24)x128", 64, heads_q=24, heads_k=24, head_dim=128,
                   dtype="bfloat16", heads_v=24, rotary_dim=128)
    qkv, wq, wk, fpos = fused_user_arrays(fshape)
    kw = _fused_kwargs(fshape)
    cases.append((f"ropelab.fused_qknorm_rope {fshape.label} {fshape.dtype}", 12,
                  lambda: ropelab.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=fpos,
                                                    **kw)))
    cases += bl.overhead_cases(x, out, pos, tokens, hidden)

    from tqdm import tqdm

    rows = []
    for name, nargs, fn in tqdm(cases, desc="launch overhead", disable=not progress):
        for _ in range(warmup):
            fn()
        cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            fn()
        t1 = time.perf_counter()
        cuda.synchronize()
        t2 = time.perf_counter()
        rows.append({"launcher": name, "kernel_args": nargs, "launches": launches,
                     "us_per_launch": round(per_launch_us(t1 - t0, launches), 3),
                     "us_per_launch_synced": round(per_launch_us(t2 - t0, launches), 3)})
    return rows


OVERHEAD_METHOD = (
    "wall clock (time.perf_counter) around {launches} back-to-back launches after {warmup} "
    "warm-up launches; us_per_launch stops when the last launch is enqueued, "
    "us_per_launch_synced after the final synchronize; kernels are short enough that the GPU "
    "keeps up, so the numbers are host-side launch cost")


def format_overhead(rows: list[dict]) -> str:
    head = f"{'launcher':<44} {'args':>4} {'us/launch':>10} {'synced':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['launcher']:<44} {r['kernel_args']:>4} {r['us_per_launch']:>10.2f} "
                     f"{r['us_per_launch_synced']:>8.2f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line (python -m ropelab bench)
# --------------------------------------------------------------------------------------------

def _kind_dir(root, kind):
    from pathlib import Path

    return None if root is None else Path(root) / kind


def show_recorded(root=None, charts_dir=None) -> int:
    """Print the newest recorded bench (and launch-overhead) data; optionally draw charts."""

    try:
        rec = records.load("bench", _kind_dir(root, "bench"))
    except FileNotFoundError as exc:
        print(f"ropelab bench: {exc}", file=sys.stderr)
        return 1
    m = rec["meta"]
    print(f"recorded {m['date']} on {m['gpu']} (cc {m['compute_capability']}, driver "
          f"{m['driver']}, CUDA {m['cuda_driver_api']}), numba {m['numba']}, numba-cuda "
          f"{m['numba_cuda']}, numpy {m['numpy']}")
    print(f"method: {rec['method']}")
    print(format_rows(rec["rows"]))
    for line in target_summary(rec["rows"]):
        print(line)
    try:
        over = records.load("launch_overhead", _kind_dir(root, "launch_overhead"))
        print()
        print(format_overhead(over["rows"]))
    except FileNotFoundError:
        pass
    if charts_dir:

        for path in charts.save_all(rec, charts_dir):
            print(f"wrote {path}")
    return 0


def run_cli(args) -> int:
    """``python -m ropelab bench``: sweep, record, chart; refuse under the simulator."""

    if args.recorded:
        return show_recorded(args.out, args.charts_dir)
    try:
        require_gpu()
    except BenchError as exc:
        print(f"ropelab bench: {exc}", file=sys.stderr)
        return 2
    if args.overhead_only:
        over = launch_overhead()
        print(format_overhead(over))
        path = records.save("launch_overhead", over, method=OVERHEAD_METHOD.format(
            launches=over[0]["launches"], warmup=100), directory=_kind_dir(args.out, "launch_overhead"))
        print(f"recorded {path}")
        return 0

    groups = [g.strip() for g in args.shapes.split(",") if g.strip()]
    shapes = shapes_for(groups)
    timer = Timer(warmup=args.warmup, repeats=args.repeats)
    entries = plan(args.variant or None, baselines=not args.no_baselines, precise=args.precise)
    method = method_text(timer.l2_bytes, timer.flush_bytes, timer.warmup, timer.repeats)
    meta = records.metadata()
    meta.update(l2_bytes=timer.l2_bytes, flush_bytes=timer.flush_bytes,
                **{f"{k}_version": v for k, v in bl.available().items()})
    saved = {}

    def save(rows):
        if rows:
            saved["bench"] = records.save(args.kind, rows, method=method, meta=meta,
                                          directory=_kind_dir(args.out, args.kind))

    result = sweep(shapes, entries, timer=timer, budget_s=args.budget_s, on_group_done=save)
    print(format_rows(result.rows))
    for name, shape, reason in result.skipped:
        print(f"skipped {name} on {shape}: {reason}")
    if "bench" in saved:
        print(f"recorded {saved['bench']}")
    if not args.no_overhead:
        over = launch_overhead()
        print(format_overhead(over))
        path = records.save("launch_overhead", over, method=OVERHEAD_METHOD.format(
            launches=over[0]["launches"], warmup=100), meta=meta,
            directory=_kind_dir(args.out, "launch_overhead"))
        print(f"recorded {path}")
    if not args.no_charts and "bench" in saved:

        rec = records.load("bench", _kind_dir(args.out, "bench"))
        for path in charts.save_all(rec, args.charts_dir or saved["bench"].parent / "charts"):
            print(f"wrote {path}")
    return 0
