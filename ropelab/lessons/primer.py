"""The pictures of notebook 00's CUDA primer, drawn with matplotlib (no image is pasted).

:func:`plot_execution_model` draws what a launch creates (grid, blocks, warps, threads), where
it runs (an SM with its schedulers, FP32 lanes, special function units, registers and shared
memory, then L2 and HBM), and what coalescing means (a warp's 32 loads in 32-byte sectors).
:func:`plot_compile_pipeline` draws how a Numba kernel becomes machine code and is launched.
The hardware numbers are arguments, so the notebook passes the ones its GPU record holds.
"""

from __future__ import annotations

import numpy as np

from ..kernels._device import WARP  # noqa: E402  (one WARP for the package)
SECTOR_BYTES = 32
# NVIDIA H100/H200 SM (compute capability 9.0): 4 partitions, each with one warp scheduler,
# 32 FP32 lanes, 4 special function units and 16K 32-bit registers (CUDA C++ Programming
# Guide, throughput table: 128 FP32 and 16 sin/cos/ex2/lg2/rsqrt results per clock per SM).
PARTITIONS = 4
FP32_PER_PARTITION = 32
SFU_PER_PARTITION = 4


def _box(ax, x, y, w, h, text="", *, face="white", edge="black", fontsize=8, lw=1.0, **kw):
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), w, h, facecolor=face, edgecolor=edge, lw=lw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, **kw)


def _launch_panel(ax, blocks: int, threads: int):
    """Blocks side by side; inside each, one row of 32 cells per warp."""
    import matplotlib.pyplot as plt

    warps = -(-threads // WARP)
    colours = plt.get_cmap("tab10").colors
    cell, gap = 1.0, 3.0
    width = WARP * cell
    for b in range(blocks):
        x0 = b * (width + gap)
        _box(ax, x0 - 0.8, -0.8, width + 1.6, warps * 2.0 + 1.8, face="#f4f4f4", edge="gray")
        ax.text(x0 + width / 2, warps * 2.0 + 1.6, f"block {b}  (blockIdx.x = {b})", ha="center",
                fontsize=8)
        for w in range(warps):
            y = (warps - 1 - w) * 2.0
            for t in range(WARP):
                tid = w * WARP + t
                face = colours[w % len(colours)] if tid < threads else "white"
                _box(ax, x0 + t * cell, y, cell, 1.2, face=face, edge="white", lw=0.3)
            if b == 0:
                ax.text(x0 - 1.2, y + 0.6, f"warp {w}", ha="right", va="center", fontsize=7)
    ax.text(0, -2.4, "threadIdx.x = 0", fontsize=7, ha="left")
    ax.text(width, -2.4, f"{WARP - 1}", fontsize=7, ha="right")
    ax.text((blocks * (width + gap) - gap) / 2, -4.6,
            f"kernel[{blocks}, {threads}](...): a grid of {blocks} blocks x {threads} threads\n"
            f"= {blocks * warps} warps of {WARP} threads ({warps * WARP - threads} lanes of each "
            f"block's last warp idle: white)\ncuda.grid(1) = blockIdx.x * {threads} + threadIdx.x",
            ha="center", va="top", fontsize=8)
    ax.set_xlim(-8, blocks * (width + gap))
    ax.set_ylim(-8.5, warps * 2.0 + 3.5)
    ax.set_axis_off()
    ax.set_title("1. What a launch creates: grid > block > warp > thread", fontsize=9)


def _gpu_panel(ax, sm_count: int, l2_mib: float, hbm_gb: float, hbm_tbs: float):
    """One SM in detail, marked x sm_count, above the L2 and the HBM."""
    _box(ax, 0, 40, 100, 58, face="#eef3fb", edge="tab:blue", lw=1.5)
    ax.text(2, 97, f"one SM (streaming multiprocessor), x {sm_count} on this GPU; it holds up to\n"
            "2048 threads (64 warps) of up to 32 blocks at once", fontsize=8, va="top",
            color="tab:blue")
    part_w = 23.0
    for p in range(PARTITIONS):
        x0 = 2 + p * (part_w + 1.5)
        _box(ax, x0, 55, part_w, 34, face="white", edge="gray")
        _box(ax, x0 + 1, 83, part_w - 2, 5, "warp scheduler", face="#ffe9c7", fontsize=6)
        for k in range(FP32_PER_PARTITION):  # 32 FP32 lanes: 4 rows of 8
            _box(ax, x0 + 1 + (k % 8) * 2.6, 70 + (k // 8) * 3, 2.4, 2.6, face="#cfe8cf",
                 edge="white", lw=0.3)
        ax.text(x0 + part_w / 2, 68.5, "32 FP32 lanes", ha="center", va="top", fontsize=6)
        for k in range(SFU_PER_PARTITION):
            _box(ax, x0 + 1 + k * 5.3, 60, 5.0, 3, face="#f6c7c7", edge="white", lw=0.3)
        ax.text(x0 + part_w / 2, 59.5, f"{SFU_PER_PARTITION} SFU", ha="center", va="top", fontsize=6)
        _box(ax, x0 + 1, 55.5, part_w - 2, 2.8, "16K registers", face="#e6e6e6", fontsize=5.5)
    _box(ax, 2, 42, 96, 10, "shared memory / L1: 256 KB per SM, on chip; threads of one block\n"
         "share it (up to 228 KB), the rest caches global memory", face="#fff6d6", fontsize=7)
    _box(ax, 0, 22, 100, 12, f"L2 cache: {l2_mib:.0f} MiB, shared by all {sm_count} SMs",
         face="#e8e0f3", fontsize=8)
    _box(ax, 0, 2, 100, 14, f"HBM (global memory): {hbm_gb:.0f} GB at about {hbm_tbs:.1f} TB/s\n"
         "every x[i] and out[i] of a kernel lives here", face="#dfeee9", fontsize=8)
    for y0, y1 in ((40, 34), (22, 16)):
        ax.annotate("", xy=(50, y1), xytext=(50, y0), arrowprops=dict(arrowstyle="<->", lw=1))
    ax.set_xlim(-2, 102)
    ax.set_ylim(0, 100)
    ax.set_axis_off()
    ax.set_title("2. Where it runs: each block on one SM, a warp per scheduler slot", fontsize=9)


def _coalescing_panel(ax):
    """A warp's 32 four-byte loads: consecutive (4 sectors) against 32 bytes apart (32 sectors)."""
    floats_per_sector = SECTOR_BYTES // 4
    total = WARP * floats_per_sector  # floats drawn: enough for the strided case
    for row, (stride, label) in enumerate(((1, "lane k reads x[k]: 128 bytes in 4 sectors"),
                                           (floats_per_sector,
                                            f"lane k reads x[{floats_per_sector}k]: "
                                            f"32 sectors, 4 of each 32 bytes used"))):
        y_mem = 10 - row * 9
        y_lane = y_mem + 4.2
        touched = {(k * stride) // floats_per_sector for k in range(WARP)}
        for s in range(WARP):  # one box per 32-byte sector
            face = "#9ecae1" if s in touched else "white"
            _box(ax, s * floats_per_sector, y_mem, floats_per_sector, 1.6, face=face, edge="gray",
                 lw=0.5)
        for k in range(WARP):
            x_lane = k * total / WARP + total / WARP / 2
            x_word = k * stride + 0.5
            ax.plot([x_lane, x_word], [y_lane, y_mem + 1.6], lw=0.5, color="tab:red")
            ax.plot([x_lane], [y_lane], "v", ms=3, color="tab:red")
        ax.text(0, y_lane + 1.0, label, fontsize=8)
    ax.text(total / 2, -0.8, f"memory in {SECTOR_BYTES}-byte sectors (blue: fetched for this one "
            "warp instruction)", ha="center", fontsize=7)
    ax.set_xlim(-2, total + 2)
    ax.set_ylim(-2, 17)
    ax.set_axis_off()
    ax.set_title("3. Coalescing: one warp load instruction, counted in 32-byte sectors",
                 fontsize=9)


def plot_execution_model(sm_count: int = 132, l2_mib: float = 60, hbm_gb: float = 141,
                         hbm_tbs: float = 4.8, blocks: int = 3, threads: int = 80):
    """The primer's picture in three panels (see the module docstring); returns the Figure."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(15, 9.5))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.0, 0.85], width_ratios=[1.1, 1.0])
    _launch_panel(fig.add_subplot(grid[0, 0]), blocks, threads)
    _gpu_panel(fig.add_subplot(grid[:, 1]), sm_count, l2_mib, hbm_gb, hbm_tbs)
    _coalescing_panel(fig.add_subplot(grid[1, 0]))
    fig.tight_layout()
    return fig


PIPELINE = (
    ("Python function", "def rope_flat(x, out, ...)\nmade a kernel by cuda.jit\n(ropelab applies it at launch)",
     "you write it"),
    ("Numba IR, typed", "bytecode analysed; every\nvariable gets a type from\nthe launch's arguments",
     "numba: once per\nargument types"),
    ("NVVM IR", "LLVM IR for the GPU;\nmath.sin -> a libdevice call\nor sin.approx (fast-math)",
     "numba lowering"),
    ("PTX", "virtual instruction set,\nportable across GPUs\n(the census counts here)",
     "libNVVM"),
    ("SASS", "machine code of one GPU\ngeneration (cc 9.0: H100,\nH200), in a cubin",
     "ptxas (driver JIT\nor nvJitLink)"),
    ("launch", "cuLaunchKernel(grid, block,\nargs) on a stream; returns\nbefore the kernel ends",
     "CUDA driver"),
)


def plot_compile_pipeline(counts: dict | None = None):
    """Python -> Numba IR -> NVVM IR -> PTX -> SASS -> launch, as boxes and arrows.

    ``counts`` may map a stage name (``"PTX"``, ``"SASS"``) to a line printed under its box,
    e.g. the census's instruction count for one kernel.  Returns the Figure.
    """
    import matplotlib.pyplot as plt

    counts = counts or {}
    fig, ax = plt.subplots(figsize=(15, 3.4))
    width, gap = 14.0, 3.0
    for i, (stage, what, who) in enumerate(PIPELINE):
        x0 = i * (width + gap)
        face = "#fde0c5" if stage == "launch" else "#e3edf7"
        _box(ax, x0, 4, width, 6, face=face, edge="gray")
        ax.text(x0 + width / 2, 9.3, stage, ha="center", va="top", fontsize=9, weight="bold")
        ax.text(x0 + width / 2, 7.6, what, ha="center", va="top", fontsize=7)
        ax.text(x0 + width / 2, 3.4, who, ha="center", va="top", fontsize=7, style="italic",
                color="dimgray")
        if stage in counts:
            ax.text(x0 + width / 2, 11.0, counts[stage], ha="center", fontsize=7, color="tab:blue")
        if i:
            ax.annotate("", xy=(x0, 7), xytext=(x0 - gap, 7), arrowprops=dict(arrowstyle="->"))
    ax.set_xlim(-1, len(PIPELINE) * (width + gap))
    ax.set_ylim(0, 12.5)
    ax.set_axis_off()
    ax.set_title("How a Numba kernel becomes GPU code and runs (compiled on first launch with "
                 "new argument types, then cached)", fontsize=9)
    fig.tight_layout()
    return fig


def sectors_touched(stride_floats: int, lanes: int = WARP, first: int = 0) -> int:
    """32-byte sectors one warp load instruction touches when lane ``k`` reads the float32 at
    ``first + k * stride_floats`` (what the memory system must fetch for that instruction)."""
    words = first + np.arange(lanes, dtype=np.int64) * stride_floats
    return len(np.unique(words * 4 // SECTOR_BYTES))


# Spec-sheet numbers of an NVIDIA H200 SXM (not measured here): boost clock and HBM3e bandwidth.
# The SM count and L2 size of the GPU that recorded data/ are in each record's metadata.
H200_BOOST_GHZ = 1.98
H200_HBM_TBS = 4.8
H200_HBM_GB = 141


def paper_budget(sm_count: int, clock_ghz: float = H200_BOOST_GHZ, hbm_tbs: float = H200_HBM_TBS,
                 bytes_per_pair: int = 16) -> dict:
    """Per rotated pair, how many FP32 and SFU instructions the GPU could issue (summed over
    all SMs, at the boost clock) in the time HBM needs to move the pair's bytes.

    A paper bound, not a measurement: if a kernel needs far fewer instructions per pair than
    this, memory and not arithmetic is what can limit it.
    """
    pairs_per_s = hbm_tbs * 1e12 / bytes_per_pair
    clocks = sm_count * clock_ghz * 1e9
    return {"pairs_per_s": pairs_per_s,
            "fp32_per_pair": clocks * PARTITIONS * FP32_PER_PARTITION / pairs_per_s,
            "sfu_per_pair": clocks * PARTITIONS * SFU_PER_PARTITION / pairs_per_s}
