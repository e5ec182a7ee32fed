"""Helpers for the course notebooks: thread maps traced from the real kernels, checks, display.

Nothing here is a kernel.  The notebooks show kernels with ``inspect.getsource`` and run them
through :func:`ropelab.rope`; this module only adds what a lesson needs around them:

* :func:`trace_threads` runs a variant's own ``launch`` under the Numba CUDA simulator with
  arrays that remember which (block, thread) wrote each element, so a thread map is read off
  the real kernel rather than redrawn from a description of it.  On a GPU host the trace runs
  in a child process with the simulator forced (numba-cuda fixes its target per process).
* :func:`plot_thread_map` draws such a map: one cell per element, coloured by block, labelled
  with the thread index.
* :func:`check` compares a kernel's output with the float64 reference under a stated tolerance
  and returns a result whose ``line`` holds only deterministic facts (name, shape, tolerance,
  PASS/FAIL), so notebooks can store it as checked output; the raw error is kept apart.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass

import numpy as np

from . import kernels, reference
from .problem import RopeProblem
from .target import SIMULATED
from .tolerance import max_angle, rope_atol


# ---------------------------------------------------------------------------------------------
# Thread maps
# ---------------------------------------------------------------------------------------------


class _WatchedArray:
    """A flat array stand-in that records which simulated CUDA thread writes each element.

    The simulator hands non-NumPy kernel arguments to the kernel unchanged and runs every CUDA
    thread as a Python thread carrying its ``blockIdx`` and ``threadIdx``, so indexing through
    this object tells us who touched what.  Reads are recorded too (``reader``): in-place
    kernels read and write the same buffer.
    """

    def __init__(self, data: np.ndarray, writer: np.ndarray | None, reader: np.ndarray | None):
        self.data = data
        self.writer = writer
        self.reader = reader
        self.size = data.size
        self.shape = data.shape

    @property
    def _ary(self):
        # Launchers that check alignment (pack4) read a simulator array's host buffer here.
        return self.data

    def _who(self):
        t = threading.current_thread()
        block, thread = t.blockIdx, t.threadIdx
        return block.x, block.y, thread.x, thread.y

    def __getitem__(self, i):
        if self.reader is not None:
            self.reader[i] = self._who()
        return self.data[i]

    def __setitem__(self, i, value):
        if self.writer is not None:
            self.writer[i] = self._who()
        self.data[i] = value

    def __len__(self):
        return self.size


@dataclass
class ThreadMap:
    """Which thread of which block wrote each element of a ``[tokens, row]`` output.

    ``block`` and ``thread`` are int arrays of shape ``[tokens, row]`` holding ``blockIdx.x``
    and ``threadIdx.x`` of the writer (``-1``: nobody wrote it).  ``grid`` and ``block_dim``
    are the launch configuration the variant chose.
    """

    variant: str
    tokens: int
    row: int
    grid: tuple[int, int]  # (blocks in x, blocks in y)
    block_dim: tuple[int, int]  # (threads in x, threads in y)
    block: np.ndarray
    thread: np.ndarray

    @property
    def launched(self) -> int:
        """CUDA threads the launch created."""
        return self.grid[0] * self.grid[1] * self.block_dim[0] * self.block_dim[1]

    @property
    def busy(self) -> int:
        """Threads that wrote at least one element."""
        written = self.block >= 0
        pairs = set(zip(self.block[written].tolist(), self.thread[written].tolist()))
        return len(pairs)

    @property
    def elements_per_thread(self) -> float:
        return float((self.block >= 0).sum()) / max(self.busy, 1)

    def global_thread(self) -> np.ndarray:
        """``blockIdx.x * blockDim.x + threadIdx.x`` of each element's writer (1-D grids)."""
        g = self.block * self.block_dim[0] + self.thread
        return np.where(self.block >= 0, g, -1)

    def summary(self) -> str:
        blocks = self.grid[0] * self.grid[1]
        return (f"{self.variant}: {self.tokens} tokens x {self.row} floats, grid {self.grid[0]}"
                f"{'' if self.grid[1] == 1 else ' x ' + str(self.grid[1])} "
                f"block{'' if blocks == 1 else 's'} of "
                f"{self.block_dim[0]}{'' if self.block_dim[1] == 1 else ' x ' + str(self.block_dim[1])}"
                f" threads: {self.launched} launched, {self.busy} busy, "
                f"{self.elements_per_thread:g} floats per busy thread")


def _normalize_dims(value) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        dims = tuple(int(v) for v in value) + (1, 1)
        return dims[0], dims[1]
    return int(value), 1


def _trace_here(variant: str, tokens: int, hidden: int, threads_per_block: int | None,
                heads: int, layout: dict, options: dict) -> dict:
    if not SIMULATED:
        raise RuntimeError("tracing needs the simulator in this process")
    module = kernels.get(variant)
    head_dim = hidden // heads
    rotary_dim = layout.get("rotary_dim") or head_dim
    problem = RopeProblem(tokens, heads, head_dim, rotary_dim,
                          interleave=layout.get("interleave", True))
    n = problem.elements
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    who = np.full((n, 4), -1, dtype=np.int64)
    out = _WatchedArray(np.zeros(n, np.float32), who, None)
    dims = {}

    class _Positions(_WatchedArray):
        def __getitem__(self, i):
            # Any thread reads a position: note the launch shape the simulator is running.
            manager = threading.current_thread()._manager
            dims.setdefault("grid", manager._grid_dim)
            dims.setdefault("block", manager._block_dim)
            return self.data[i]

    positions = _Positions(np.arange(tokens, dtype=np.int32), None, None)
    kernels.launch_variant(module, problem, _WatchedArray(x, None, None), out, positions,
                           threads_per_block=threads_per_block, **options)
    if not dims:  # a kernel that reads no position: fall back to what the launcher says
        grid, block = module.launch_config(problem, threads_per_block)
        dims = {"grid": _normalize_dims(grid), "block": _normalize_dims(block)}
    return {
        "variant": variant, "tokens": tokens, "row": problem.row,
        "grid": list(_normalize_dims(tuple(dims["grid"]))),
        "block_dim": list(_normalize_dims(tuple(dims["block"]))),
        "block": who[:, 0].tolist(), "thread": who[:, 2].tolist(),
    }


def _on_simulator(name: str, args: list):
    """Call ``course.<name>(*args)`` on the simulator: here, or in a child process on a GPU host
    (numba-cuda picks the simulator or the GPU once per process).  Arguments and result are
    plain JSON."""
    if SIMULATED:
        return json.loads(json.dumps(globals()[name](*args)))
    env = dict(os.environ, ROPELAB_TARGET="simulator", ROPELAB_QUIET="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    code = ("import json, sys; from ropelab import course; "
            f"print(json.dumps(course.{name}(*json.loads(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(args)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed in the simulator child:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def trace_threads(variant: str, tokens: int, hidden: int, *, threads_per_block: int | None = None,
                  heads: int = 1, interleave: bool = True, rotary_dim: int | None = None,
                  **options) -> ThreadMap:
    """Run ``variant`` on a ``[tokens, hidden]`` input and record the writer of every element.

    Keep the shape small (a few hundred threads): the simulator runs one Python thread per
    CUDA thread.  ``hidden`` is split into ``heads`` heads of ``hidden // heads`` floats;
    ``options`` go to the variant's ``prepare`` (e.g. ``cache=True`` for ``freq_table``).
    """
    layout = {"interleave": bool(interleave), "rotary_dim": rotary_dim}
    raw = _on_simulator("_trace_here", [variant, tokens, hidden, threads_per_block, heads, layout,
                                        options])
    shape = (raw["tokens"], raw["row"])
    return ThreadMap(raw["variant"], raw["tokens"], raw["row"], tuple(raw["grid"]),
                     tuple(raw["block_dim"]), np.array(raw["block"]).reshape(shape),
                     np.array(raw["thread"]).reshape(shape))


@dataclass
class FusedMap:
    """Who wrote each element of a fused ``qkv`` buffer ``[tokens, heads_total, head_dim]``.

    ``warp`` is the global warp number ``(blockIdx.y * warps_per_block + threadIdx.x // 32)``
    within the token's block column, ``lane`` is ``threadIdx.x % 32``; ``-1`` where nothing was
    written (the V heads).  ``token`` is the writer's ``blockIdx.x``.
    """

    heads: tuple[int, int, int]
    head_dim: int
    grid: tuple[int, int]
    block_dim: int
    token: np.ndarray
    warp: np.ndarray
    lane: np.ndarray
    heads_per_warp: int = 1

    def summary(self) -> str:
        hq, hk, hv = self.heads
        return (f"qkv of {self.token.shape[0]} tokens x ({hq} Q + {hk} K + {hv} V heads) x "
                f"{self.head_dim}: grid {self.grid[0]} x {self.grid[1]} blocks of {self.block_dim} "
                f"threads ({self.block_dim // 32} warps); each lane holds "
                f"{self.head_dim // 32} consecutive elements of "
                + ("one head" if self.heads_per_warp == 1
                   else f"each of its warp's {self.heads_per_warp} heads"))


def _trace_fused_here(tokens: int, heads: list, head_dim: int, interleave: bool,
                      rotary_dim, warps_per_block, heads_per_warp: int = 1) -> dict:
    if not SIMULATED:
        raise RuntimeError("tracing needs the simulator in this process")
    from . import fused
    from .arrays import inspect_array
    from .kernels import fused_qknorm_rope as kernel
    from .sim.warp import install

    install()
    hq, hk, hv = heads
    qkv = np.random.default_rng(0).standard_normal((tokens, (hq + hk + hv) * head_dim))
    qkv = qkv.astype(np.float32)
    problem = fused.build_problem(inspect_array(qkv, "qkv"), num_heads_q=hq, num_heads_k=hk,
                                  num_heads_v=hv, head_dim=head_dim, rotary_dim=rotary_dim,
                                  interleave=interleave)
    who = np.full((qkv.size, 4), -1, dtype=np.int64)
    buf = _WatchedArray(qkv.ravel().copy(), who, None)
    weights = np.ones(head_dim, np.float32)
    kernel.launch(problem, buf, _WatchedArray(weights, None, None),
                  _WatchedArray(weights.copy(), None, None),
                  _WatchedArray(np.arange(tokens, dtype=np.int32), None, None),
                  _WatchedArray(problem.inv_freq_f32(), None, None),
                  warps_per_block=warps_per_block, heads_per_warp=heads_per_warp)
    grid, threads = kernel.launch_config(problem, warps_per_block, heads_per_warp)
    return {"heads": list(heads), "head_dim": head_dim, "grid": list(grid), "block_dim": threads,
            "heads_per_warp": heads_per_warp, "who": who.tolist()}


def trace_fused(tokens: int, heads=(2, 2, 1), head_dim: int = 64, *, interleave: bool = True,
                rotary_dim: int | None = None, warps_per_block: int | None = None,
                heads_per_warp: int = 1) -> FusedMap:
    """Run the fused QK-norm + RoPE kernel on a small float32 ``qkv`` and record every writer.

    ``heads`` is ``(heads_q, heads_k, heads_v)``.  ``heads_per_warp`` is passed to the launcher
    explicitly (1: one warp per (token, head), the mapping the course draws first), so the map
    does not follow the storage-dependent default.  Runs on the simulator (with ropelab's warp
    shuffle emulation); keep it to a few tokens and heads.
    """
    raw = _on_simulator("_trace_fused_here", [tokens, list(heads), head_dim, bool(interleave),
                                              rotary_dim, warps_per_block, int(heads_per_warp)])
    who = np.array(raw["who"]).reshape(tokens, sum(heads), head_dim, 4)
    warps_per = raw["block_dim"] // 32
    written = who[..., 0] >= 0
    warp = np.where(written, who[..., 1] * warps_per + who[..., 2] // 32, -1)
    lane = np.where(written, who[..., 2] % 32, -1)
    return FusedMap(tuple(raw["heads"]), head_dim, tuple(raw["grid"]), raw["block_dim"],
                    who[..., 0], warp, lane, raw["heads_per_warp"])


def plot_fused_map(fmap: FusedMap, token: int = 0, ax=None):
    """One token's row of ``qkv``: a line per head, colour = warp, number = lane (V: grey)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    heads_total, d = fmap.warp.shape[1], fmap.head_dim
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.2 * d + 1.5)), 0.45 * heads_total + 1.3))
    warps = int(fmap.warp.max()) + 1
    palette = plt.get_cmap("tab10").colors
    colours = ListedColormap(["#dddddd"] + [palette[i % len(palette)] for i in range(warps)])
    ax.imshow(fmap.warp[token] + 1, cmap=colours, vmin=0, vmax=warps, aspect="auto",
              interpolation="nearest")
    per_lane = d // 32
    for h in range(heads_total):
        for e in range(0, d, per_lane):  # one label per lane, at its first element
            lane = fmap.lane[token, h, e]
            if lane >= 0:
                ax.text(e + (per_lane - 1) / 2, h, str(lane), ha="center", va="center", fontsize=6)
    hq, hk, hv = fmap.heads
    names = [f"Q{i}" for i in range(hq)] + [f"K{i}" for i in range(hk)] + [f"V{i}" for i in range(hv)]
    ax.set_yticks(range(heads_total), names)
    ax.set_xlabel(f"element of the head (0 .. {d - 1})")
    ax.set_title(f"token {token}: colour = warp, number = lane; V heads (grey) are never touched",
                 fontsize=9)
    return ax


def plot_thread_map(tmap: ThreadMap, ax=None, *, label: str = "thread"):
    """Draw ``tmap``: one cell per float, colour = block, text = ``threadIdx.x`` (or the global
    thread number with ``label="global"``).  Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.42 * tmap.row + 1), 0.5 * tmap.tokens + 1.2))
    palette = plt.get_cmap("tab20").colors
    blocks = int(tmap.block.max()) + 1 if tmap.block.size else 1
    colours = ListedColormap(["#dddddd"] + [palette[i % len(palette)] for i in range(blocks)])
    ax.imshow(tmap.block + 1, cmap=colours, vmin=0, vmax=blocks, aspect="auto",
              interpolation="nearest")
    text = tmap.global_thread() if label == "global" else tmap.thread
    for (t, e), value in np.ndenumerate(text):
        ax.text(e, t, "-" if value < 0 else str(value), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(tmap.row))
    ax.set_xticklabels([str(i) if i % 2 == 0 else "" for i in range(tmap.row)], fontsize=7)
    ax.set_yticks(range(tmap.tokens))
    ax.set_xlabel("element of the row (pairs are 2i, 2i+1)")
    ax.set_ylabel("token")
    ax.set_title(f"{tmap.variant}: colour = block, number = "
                 f"{'global thread' if label == 'global' else 'threadIdx.x'}", fontsize=9)
    return ax


# ---------------------------------------------------------------------------------------------
# Correctness
# ---------------------------------------------------------------------------------------------


@dataclass
class Check:
    """One comparison against the float64 reference."""

    name: str
    shape: tuple
    max_error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.max_error) and self.max_error <= self.tolerance)

    @property
    def line(self) -> str:
        """Deterministic text: no raw error (it depends on the machine and the target)."""
        shape = "x".join(map(str, self.shape))
        return (f"{self.name:<10} shape {shape:<12} max|error| <= {self.tolerance:.1e}: "
                f"{'PASS' if self.passed else 'FAIL'}")


def check(name: str, x: np.ndarray, got: np.ndarray, positions=None, *, fastmath: bool = True,
          **reference_options) -> Check:
    """Compare ``got`` (a kernel's output for input ``x``) with :func:`ropelab.reference.rope`.

    The tolerance is :func:`ropelab.tolerance.rope_atol` for this input's magnitude and the
    largest angle it reaches, the same bound the test suite uses.
    """
    x = np.asarray(x)
    tokens = x.shape[0]
    pos = reference.default_positions(tokens) if positions is None else np.asarray(positions)
    want = reference.rope(x, pos, **reference_options)
    freqs = reference_options.get("freqs")
    if freqs is None:
        rotary = reference_options.get("rotary_dim") or x.shape[-1]
        freqs = reference.inv_freq(rotary, reference_options.get("base", reference.DEFAULT_BASE))
    tol = rope_atol(float(np.abs(x).max()), max_angle(pos, freqs), fastmath=fastmath,
                    attention_factor=reference_options.get("attention_factor", 1.0))
    err = float(np.abs(np.asarray(got, dtype=np.float64) - want).max())
    return Check(name, tuple(x.shape), err, tol)


# ---------------------------------------------------------------------------------------------
# Display
# ---------------------------------------------------------------------------------------------


def source(obj) -> str:
    """The source text of a kernel (or any function or module), exactly as ropelab has it."""
    return inspect.getsource(obj)


def show_source(obj) -> None:
    """Print :func:`source` of ``obj``; notebooks use it so kernels are never pasted."""
    print(source(obj).rstrip("\n"))


# ---------------------------------------------------------------------------------------------
# Recorded GPU data and live measurements
# ---------------------------------------------------------------------------------------------


def recorded(kind: str):
    """The newest record of ``kind`` under ``data/`` (see :mod:`ropelab.records`), or None.

    None is printed as a TODO line: the notebooks are meant to ship with recorded data, and a
    missing record means the GPU run has not been committed yet.
    """
    from . import records

    try:
        return records.load(kind)
    except FileNotFoundError:
        print(f"TODO(GPU data): no recorded {kind!r} run under data/{kind}/ yet; "
              f"the chart appears once the GPU run is committed")
        return None


def provenance(record) -> str:
    """One line saying where and how a record was measured."""
    m = record["meta"]
    return (f"recorded {m['date'][:10]} on {m['gpu']} (driver {m['driver']}), "
            f"numba-cuda {m['numba_cuda']}")


COPY_ROWS = ("torch_copy", "copy_d2d")  # device copies of the same bytes, when timed


def roof_gbps(record) -> float:
    """The fastest device copy in the record (GB/s): the bandwidth a RoPE kernel cannot beat.

    RoPE reads and writes every byte once, like a copy.  The fastest copy of the run (usually
    the largest shape, where launch and ramp-up costs vanish) is the roof for every row.
    """
    rates = [r["gbps"] for r in record["rows"] if r["variant"] in COPY_ROWS]
    if not rates:
        raise ValueError("the record has no copy rows to take a roof from")
    return max(rates)


def bench_row(record, variant: str, shape: str, dtype: str = "float32") -> dict:
    """The one row of ``variant`` on ``shape`` and ``dtype``; KeyError if the run has none.

    Notebooks quote recorded numbers through this (``row["median_us"]``, ``row["gbps"]``)
    instead of typing them into the prose.
    """
    found = [r for r in record["rows"] if r["variant"] == variant and r["shape"] == shape
             and r.get("dtype", "float32") == dtype]
    if len(found) != 1:
        raise KeyError(f"{len(found)} rows for {variant} on {shape} {dtype} in the record")
    return found[0]


def share_of_roof(record, variant: str, shape: str, dtype: str = "float32") -> float:
    """``gbps`` of one row over :func:`roof_gbps` (the fastest copy of the whole run)."""
    return bench_row(record, variant, shape, dtype)["gbps"] / roof_gbps(record)


def copy_table(record, variants, shapes=None, dtypes=("bfloat16", "float32")) -> str:
    """Median time of ``variants`` against the device copy of the *same shape's* bytes, timed in
    the same run (the record's ``frac_of_copy``), per shape and dtype.

    Use it where shapes are small enough that even a copy stays below the run's fastest copy
    (the production shapes of the fused kernel): the share of that shape's own copy is then the
    figure of merit.  Numbers come from the record file.
    """
    rows = [r for r in record["rows"] if r["variant"] in variants
            and (shapes is None or r["shape"] in shapes) and r.get("dtype", "float32") in dtypes]
    rows.sort(key=lambda r: (r["bytes_moved"], r["shape"], list(dtypes).index(r.get("dtype", "float32")),
                             list(variants).index(r["variant"])))
    head = (f"{'shape':<20} {'dtype':<9} {'MB moved':>8}  {'variant':<26} {'median us':>10} "
            f"{'copy us':>8} {'of copy':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        copy_us = r["bytes_moved"] / (r["copy_gbps"] * 1e3)
        lines.append(f"{r['shape']:<20} {r.get('dtype', 'float32'):<9} {r['bytes_moved'] / 1e6:>8.0f}  "
                     f"{r['variant']:<26} {r['median_us']:>10.1f} {copy_us:>8.1f} "
                     f"{100 * r['frac_of_copy']:>7.1f}%")
    return "\n".join(lines)


def bench_table(record, variants, shapes=None, dtypes=("float32",)) -> str:
    """Median time, effective bandwidth and share of :func:`roof_gbps` of ``variants`` (in that
    order), per shape.  Numbers come from the record file, the same on every machine."""
    roof = roof_gbps(record)
    rows = [r for r in record["rows"] if r["variant"] in variants
            and (shapes is None or r["shape"] in shapes) and r.get("dtype", "float32") in dtypes]
    rows.sort(key=lambda r: (r["bytes_moved"], r["shape"], r.get("dtype", ""),
                             list(variants).index(r["variant"])))
    width = max([12] + [len(r["shape"]) + (0 if len(dtypes) == 1 else 9) for r in rows])
    head = (f"{'shape':<{width}} {'MB moved':>8}  {'variant':<20} {'median us':>10} "
            f"{'GB/s':>6} {'of roof':>8}")
    lines = [f"roof: the fastest device copy in this run, {roof:,.0f} GB/s", head, "-" * len(head)]
    for r in rows:
        label = r["shape"] if len(dtypes) == 1 else f"{r['shape']} {r.get('dtype', '')}"
        lines.append(f"{label:<{width}} {r['bytes_moved'] / 1e6:>8.0f}  {r['variant']:<20} "
                     f"{r['median_us']:>10.1f} {r['gbps']:>6.0f} {100 * r['gbps'] / roof:>7.0f}%")
    return "\n".join(lines)


def plot_roof(record, variants, shapes=None, dtypes=("float32",), ax=None):
    """Share of :func:`roof_gbps` per shape (bars), one colour per variant."""
    import matplotlib.pyplot as plt

    roof = roof_gbps(record)
    rows = [r for r in record["rows"] if r["variant"] in variants
            and (shapes is None or r["shape"] in shapes) and r.get("dtype", "float32") in dtypes]
    rows.sort(key=lambda r: r["bytes_moved"])
    labels = list(dict.fromkeys(r["shape"] + ("" if len(dtypes) == 1 else f"\n{r['dtype']}")
                                for r in rows))
    if ax is None:
        _, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(labels)), 4.2))
    width = 0.8 / max(len(variants), 1)
    x = np.arange(len(labels))
    for i, v in enumerate(variants):
        share = np.full(len(labels), np.nan)
        for r in rows:
            if r["variant"] == v:
                label = r["shape"] + ("" if len(dtypes) == 1 else f"\n{r['dtype']}")
                share[labels.index(label)] = r["gbps"] / roof
        ax.bar(x + (i - (len(variants) - 1) / 2) * width, share, width, label=v)
    ax.axhline(1.0, color="black", lw=1)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(f"share of the roof ({roof:,.0f} GB/s)")
    ax.set_title(f"Effective bandwidth as a share of the fastest copy\n{provenance(record)}",
                 fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    ax.figure.tight_layout()
    return ax


def plot_all_variants(record, shape: str, ax=None):
    """Every row of one shape: median time (bars, sorted) with the roof's time as a line."""
    import matplotlib.pyplot as plt

    rows = sorted((r for r in record["rows"] if r["shape"] == shape
                   and r.get("dtype", "float32") == "float32"), key=lambda r: r["median_us"])
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.32 * len(rows) + 1.5))
    colours = {"numba": "tab:blue", "cuda_cpp": "tab:orange", "torch": "tab:green",
               "copy": "tab:gray", "numba_fused": "tab:purple"}
    y = np.arange(len(rows))
    ax.barh(y, [r["median_us"] for r in rows],
            color=[colours.get(r["family"], "tab:red") for r in rows],
            xerr=[[r["median_us"] - r["p20_us"] for r in rows], [r["p80_us"] - r["median_us"] for r in rows]],
            capsize=2)
    ax.set_yticks(y, [f"{r['variant']} ({r['family']})" for r in rows], fontsize=8)
    ax.invert_yaxis()
    roof_us = rows[0]["bytes_moved"] / (roof_gbps(record) * 1e3) if rows else 0.0
    ax.axvline(roof_us, color="black", lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("median time per call, us (log scale; dashed: the bytes at the roof)")
    ax.set_title(f"Every variant and baseline on {shape}\n{provenance(record)}", fontsize=9)
    ax.figure.tight_layout()
    return ax


def plot_launch_overhead(record, ax=None):
    """Host cost per launch of each launcher in a ``launch_overhead`` record."""
    import matplotlib.pyplot as plt

    rows = sorted(record["rows"], key=lambda r: r["us_per_launch"])
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.4))
    y = np.arange(len(rows))
    ax.barh(y, [r["us_per_launch"] for r in rows], color="tab:blue")
    ax.set_yticks(y, [r["launcher"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("host time per launch, us")
    ax.set_title(f"Launch overhead (back-to-back launches)\n{provenance(record)}", fontsize=9)
    ax.figure.tight_layout()
    return ax


def live_bench(variants, shapes=((4096, 1024), (32768, 4096)), repeats: int = 20) -> str:
    """Time ``variants`` (and a device copy) now, on this machine's GPU, with ropelab.bench.

    On the simulator this returns a sentence instead: a simulated kernel has no meaningful
    time.  Notebooks print the result in a cell whose output nbval ignores.
    """
    if SIMULATED:
        return ("no GPU in this process: nothing is timed live (the simulator's times would "
                "describe Python threads); the chart above is the recorded GPU run")
    from . import bench

    timer = bench.Timer(repeats=repeats)
    entries = bench.plan(list(variants), baselines=False)
    result = bench.sweep([bench.plain_shape(t, h) for t, h in shapes], entries, timer=timer,
                         progress=False)
    return bench.format_rows(result.rows)


def relative_times(record, baseline: str, variants) -> str:
    """Median time of each of ``variants`` divided by ``baseline``'s, per float32 shape."""
    rows = [r for r in record["rows"] if r.get("dtype", "float32") == "float32"]
    by = {(r["variant"], r["shape"]): r["median_us"] for r in rows}
    shapes = list(dict.fromkeys(r["shape"] for r in sorted(rows, key=lambda r: r["bytes_moved"])
                                if r["variant"] == baseline))
    head = f"{'shape':<12} " + " ".join(f"{v + ' / ' + baseline:>22}" for v in variants)
    lines = [head, "-" * len(head)]
    for s in shapes:
        cells = []
        for v in variants:
            t = by.get((v, s))
            cells.append(f"{t / by[(baseline, s)]:>22.2f}" if t is not None else f"{'-':>22}")
        lines.append(f"{s:<12} " + " ".join(cells))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Precision records (kinds "precision", "sincos_error", "freq_drift"; see ropelab.precision)
# ---------------------------------------------------------------------------------------------


def _case_rows(record, variant: str, options: str = "-", fastmath: bool = True,
               scaling: str = "-") -> list[dict]:
    rows = [r for r in record["rows"] if r["variant"] == variant and r["options"] == options
            and bool(r["fastmath"]) == bool(fastmath) and r.get("scaling", "-") == scaling]
    return sorted(rows, key=lambda r: r["pos_lo"])


def case_label(variant: str, options: str = "-", fastmath: bool = True, scaling: str = "-") -> str:
    parts = [variant] + ([options] if options != "-" else []) + ([scaling] if scaling != "-" else [])
    return " ".join(parts) + ("" if fastmath else " (precise)")


def precision_table(record, cases, limits=(4095, 32767, 131072)) -> str:
    """Worst error relative to ``max|x|`` of each case over positions ``0 .. limit``.

    ``cases`` are dicts with ``variant`` and optionally ``options``, ``fastmath``, ``scaling``
    (as stored in the record).  Numbers come from the record file.
    """
    head = f"{'case':<34}" + "".join(f"{'pos <= ' + str(lim):>16}" for lim in limits)
    lines = [head, "-" * len(head)]
    for case in cases:
        rows = _case_rows(record, **case)
        cells = []
        for lim in limits:
            rel = [r["max_abs_err"] / r["max_abs_x"] for r in rows if r["pos_hi"] <= lim]
            cells.append(f"{max(rel):>16.1e}" if rel else f"{'-':>16}")
        lines.append(f"{case_label(**case):<34}" + "".join(cells))
    return "\n".join(lines)


def plot_precision(record, cases, ax=None):
    """Max error relative to ``max|x|`` per position bucket (log-log), one line per case."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.2))
    for case in cases:
        rows = _case_rows(record, **case)
        if not rows:
            continue
        hi = np.array([max(r["pos_hi"], 1) for r in rows])
        rel = np.array([max(r["max_abs_err"] / r["max_abs_x"], 1e-10) for r in rows])
        ax.loglog(hi, rel, ".-", label=case_label(**case))
    ax.axhline(2.0**-8, color="gray", lw=0.8, ls="--")
    ax.text(1.2, 2.0**-8 * 1.15, "half a bf16 ulp at 1.0", fontsize=7, color="gray")
    ax.set_xlabel("position (upper end of each power-of-two bucket)")
    ax.set_ylabel("max |error| / max |x|")
    ax.set_title(f"Error against the float64 reference by position\n{provenance(record)}",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax


def plot_sincos_error(record, ax=None):
    """Max absolute error of float32 sin and cos by decade of angle, fast-math and precise."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for fastmath in (True, False):
        rows = sorted((r for r in record["rows"] if bool(r["fastmath"]) == fastmath),
                      key=lambda r: r["angle_lo"])
        if not rows:
            continue
        hi = [r["angle_hi"] for r in rows]
        name = "fast-math (sin.approx)" if fastmath else "precise (libdevice)"
        ax.loglog(hi, [max(r["max_abs_err_sin"], 1e-10) for r in rows], "o-", label=f"sin, {name}")
        ax.loglog(hi, [max(r["max_abs_err_cos"], 1e-10) for r in rows], "s--", label=f"cos, {name}")
    ax.set_xlabel("angle (upper end of each decade, radians)")
    ax.set_ylabel("max |error| of the function")
    ax.set_title(f"float32 sin/cos on exact float32 angles\n{provenance(record)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax


def sincos_table(record) -> str:
    """Worst absolute error of float32 sin and cos (the larger of the two) per decade of angle,
    fast-math against precise, from a ``sincos_error`` record."""
    worst = {}
    for r in record["rows"]:
        key = (r["angle_lo"], r["angle_hi"])
        err = max(r["max_abs_err_sin"], r["max_abs_err_cos"])
        worst.setdefault(key, {})[bool(r["fastmath"])] = err
    head = f"{'angles (rad)':<22} {'fast-math':>10} {'precise':>10}"
    lines = [head, "-" * len(head)]
    for (lo, hi), by in sorted(worst.items()):
        cells = [f"{by[fm]:>10.1e}" if fm in by else f"{'-':>10}" for fm in (True, False)]
        lines.append(f"{f'[{lo:g}, {hi:g})':<22} " + " ".join(cells))
    return "\n".join(lines)


def plot_freq_drift(record, chunks=(1, 4, 16, 64), fastmath: bool = True, ax=None):
    """Angle error at the record's position caused by the frequency, per pair and chunk length."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for chunk in chunks:
        rows = sorted((r for r in record["rows"] if r["chunk"] == chunk
                       and bool(r["fastmath"]) == fastmath), key=lambda r: r["pair"])
        if not rows:
            continue
        key = "angle_err_pow_rad" if chunk == 1 else "angle_err_recurrence_rad"
        label = "pow for every pair" if chunk == 1 else f"pow + recurrence, {chunk} pairs/thread"
        ax.semilogy([r["pair"] for r in rows], [max(r[key], 1e-12) for r in rows], ".-", label=label)
    ax.set_xlabel("pair index")
    ax.set_ylabel("angle error (radians)")
    ax.set_title(f"Frequency error as angle error{' (fast-math)' if fastmath else ' (precise)'}"
                 f"\n{provenance(record)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax


def drift_table(record, chunks=(1, 2, 4, 8, 16, 32, 64), fastmath: bool = True) -> str:
    """Worst relative frequency error and worst angle error per chunk length, from the record."""
    head = f"{'pairs/thread':>12} {'max rel. freq error':>20} {'max angle error (rad)':>22}"
    lines = [head, "-" * len(head)]
    for chunk in chunks:
        rows = [r for r in record["rows"] if r["chunk"] == chunk and bool(r["fastmath"]) == fastmath]
        if not rows:
            continue
        rel_key, ang_key = (("rel_err_pow", "angle_err_pow_rad") if chunk == 1 else
                            ("rel_err_recurrence", "angle_err_recurrence_rad"))
        lines.append(f"{chunk:>12} {max(r[rel_key] for r in rows):>20.1e} "
                     f"{max(r[ang_key] for r in rows):>22.1e}")
    return "\n".join(lines)
