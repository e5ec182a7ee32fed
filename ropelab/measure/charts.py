"""Charts of recorded benchmark runs (``records.load("bench")``), for the CLI and the notebooks.

Each function takes a loaded record (``{"meta", "method", "rows", ...}``), draws on a new
matplotlib figure and returns it; :func:`save_all` writes PNGs.  Nothing here times anything:
the numbers come from a GPU run recorded under ``data/``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .baselines import TWINS


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg")
        except Exception:
            pass
    import matplotlib.pyplot as plt

    return plt


def _label(row) -> str:
    return row["shape"] + ("" if row["dtype"] == "float32" else f"\n{row['dtype']}")


def _grid(rows, value, variants=None):
    """(shape labels, variant names, matrix [variant, shape] of value or nan).

    Only shapes where at least one of the variants has a row get a column: a chart of three
    variants never shows empty slots for shapes that only other variants were timed on.
    """
    names = variants or list(dict.fromkeys(r["variant"] for r in rows))
    shapes = list(dict.fromkeys(_label(r) for r in rows if r["variant"] in names))
    table = np.full((len(names), len(shapes)), np.nan)
    for r in rows:
        if r["variant"] in names:
            v = value(r)
            if v is not None:
                table[names.index(r["variant"]), shapes.index(_label(r))] = v
    return shapes, names, table


def copy_us(row) -> float:
    """The time the same run's device copy took for this row's bytes (``copy_gbps``)."""
    return row["bytes_moved"] / (row["copy_gbps"] * 1e3)


def _title(record, what: str) -> str:
    m = record["meta"]
    return f"{what}\n{m['gpu']}, numba-cuda {m['numba_cuda']}, {m['date'][:10]}"


KERNEL_ONLY = ("kernel", "kernel_fused")  # ":kernel" rows: the same launch as a public row
FUSED = ("ropelab_fused", "kernel_fused")


def _plain_variants(record) -> list[str]:
    """The public RoPE rows of a run (no ``:kernel`` twins of them, no fused kernel)."""
    return list(dict.fromkeys(r["variant"] for r in record["rows"]
                              if r["family"] not in KERNEL_ONLY + FUSED
                              and not r["variant"].startswith("cuda_fused")))


# Colour says who wrote the code (the names are on the axis): the copy, ropelab, CUDA C++, PyTorch.
FAMILY_COLOURS = {"copy": "tab:gray", "ropelab": "tab:blue", "kernel": "tab:blue",
                  "ropelab_fused": "tab:blue", "kernel_fused": "tab:blue", "numba": "tab:blue",
                  "cuda_cpp": "tab:orange", "torch": "tab:red"}
FAMILY_NAMES = {"tab:gray": "device copy", "tab:blue": "ropelab (Numba)",
                "tab:orange": "CUDA C++ twin", "tab:red": "PyTorch"}


def _colour(record, variant) -> str:
    family = next((r["family"] for r in record["rows"] if r["variant"] == variant), "ropelab")
    return "tab:gray" if variant == "torch_copy" else FAMILY_COLOURS.get(family, "tab:blue")


def _log_needed(values) -> bool:
    """A log axis only where the range demands it: the largest value over 10x the smallest."""
    values = [v for v in values if np.isfinite(v) and v > 0]
    return bool(values) and max(values) / min(values) > 10


def time_chart(record, variants=None):
    """How long does each variant take per call, on each shape, beside the copy?

    One panel per shape (only shapes some non-copy variant was timed on), horizontal bars so
    that every name is readable, the same variant order in every panel (slowest at the top on
    the largest shape).  Each panel has its own axis: linear from zero where its times are
    within 10x of each other (bar lengths then compare directly: a 17% gap is 17% of the bar),
    logarithmic where a row is more than 10x another (the seed's eager PyTorch reference takes
    over 200x the copy).  Whiskers are the 20th-80th percentiles of the launches; the dashed
    line is the device copy of the same bytes in the same run, the floor under every bar.
    Default variants: the public RoPE rows (``:kernel`` rows time the same launch).
    """
    plt = _plt()
    rows = record["rows"]
    names = list(variants) if variants is not None else _plain_variants(record)
    copies = {"copy_d2d", "torch_copy"}
    timed = [r for r in rows if r["variant"] in names and r["variant"] not in copies]
    keep = set(_label(r) for r in timed)
    shapes, names, med = _grid([r for r in rows if _label(r) in keep], lambda r: r["median_us"], names)
    _, _, p20 = _grid([r for r in rows if _label(r) in keep], lambda r: r["p20_us"], names)
    _, _, p80 = _grid([r for r in rows if _label(r) in keep], lambda r: r["p80_us"], names)
    _, _, copy = _grid([r for r in rows if _label(r) in keep], copy_us, names)
    if not shapes:  # e.g. a fused-only run: no plain RoPE row to draw
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.text(0.5, 0.5, "no timed rows of these variants in this record", ha="center")
        ax.set_axis_off()
        return fig
    # Order rows by the time on the largest shape (the last column), slowest at the top.
    order = sorted(range(len(names)), key=lambda i: np.nan_to_num(med[i, -1], nan=-1.0))
    cols = min(len(shapes), 5)
    nrows = -(-len(shapes) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.0 * cols + 1.6, 0.32 * len(names) * nrows + 1.6 * nrows),
                             squeeze=False, sharey=True)
    y = np.arange(len(order))
    for k, shape in enumerate(shapes):
        ax = axes[k // cols][k % cols]
        log = _log_needed(med[:, k])
        for pos, i in enumerate(order):
            t = med[i, k]
            if np.isnan(t):
                continue
            ax.barh(y[pos], t, 0.7, color=_colour(record, names[i]),
                    xerr=[[t - p20[i, k]], [p80[i, k] - t]], capsize=2)
            ax.text(t * (1.08 if log else 1.0) + (0 if log else np.nanmax(p80[:, k]) * 0.02),
                    y[pos], f"{t:,.1f}", va="center", fontsize=7)
        ax.axvline(np.nanmin(copy[:, k]), color="black", lw=1, ls="--")
        if log:
            ax.set_xscale("log")
            ax.set_xlim(np.nanmin(p20[:, k]) * 0.7, np.nanmax(p80[:, k]) * 4)
        else:
            ax.set_xlim(0, np.nanmax(p80[:, k]) * 1.25)
        ax.set_yticks(y, [names[i] for i in order], fontsize=7)
        ax.set_title(shape.replace("\n", " ") + (" (log axis)" if log else ""), fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("median us per call", fontsize=7)
    for k in range(len(shapes), nrows * cols):
        axes[k // cols][k % cols].set_axis_off()
    used = dict.fromkeys(_colour(record, n) for n in names)
    fig.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in used],
               labels=[FAMILY_NAMES[c] for c in used], fontsize=7, loc="lower center",
               ncol=len(used))
    fig.suptitle(_title(record, "How long does each call take? Median us (cold L2), 20-80% "
                                "whiskers; dashed = device copy of the same bytes"), fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))  # room for the colour legend below the panels
    return fig


def _largest_plain_shape(record, names) -> str | None:
    rows = [r for r in record["rows"] if r["variant"] in names and r["dtype"] == "float32"]
    return max(rows, key=lambda r: r["bytes_moved"])["shape"] if rows else None


def roof_chart(record, variants=None, shape=None):
    """How close to the copy of the same bytes does each kernel get?

    Left: every RoPE variant on one shape (default: the largest float32 shape, where launch
    and ramp-up costs vanish), sorted, as a share of the same run's copy of that shape's bytes.
    Right, when the run timed the fused kernel: its default setting beside its CUDA C++ twin on
    each production shape and storage.  The line at 1.0 is the copy.  Two series at most per
    panel: one question each, no legend of thirty entries.
    """
    plt = _plt()
    rows = record["rows"]
    names = list(variants) if variants is not None else [
        v for v in _plain_variants(record) if v not in ("copy_d2d", "torch_copy")]
    shape = shape or _largest_plain_shape(record, names)
    plain = {r["variant"]: r["frac_of_copy"] for r in rows
             if r["variant"] in names and r["shape"] == shape and r["dtype"] == "float32"}
    fused = [r for r in rows if r["variant"] == "fused_qknorm_rope"] if variants is None else []
    twin = {(_label(r)): r["frac_of_copy"] for r in rows if r["variant"] == "cuda_fused"}
    panels = 2 if fused else 1
    height = max(3.0, 0.3 * max(len(plain), len(fused)) + 1.5)
    fig, axes = plt.subplots(1, panels, figsize=(6.0 * panels + 1.0, height), squeeze=False)
    ax = axes[0][0]
    order = sorted(plain, key=plain.get)
    ax.barh(range(len(order)), [plain[v] for v in order], 0.7, color="tab:blue")
    for i, v in enumerate(order):
        ax.text(plain[v] + 0.01, i, f"{100 * plain[v]:.1f}%", va="center", fontsize=7)
    ax.set_yticks(range(len(order)), order, fontsize=8)
    ax.axvline(1.0, color="black", lw=1, label="copy of the same bytes")
    ax.set_xlim(0, max(1.15, max(plain.values(), default=1.0) * 1.1))
    ax.set_xlabel("share of the copy of the same bytes", fontsize=8)
    ax.set_title(f"RoPE variants on {shape} float32", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    if fused:
        ax = axes[0][1]
        fused.sort(key=lambda r: (r["dtype"], r["shape"]))
        labels = [f"{r['shape']} {r['dtype']}" for r in fused]
        y = np.arange(len(fused))
        ax.barh(y + 0.2, [r["frac_of_copy"] for r in fused], 0.4, color="tab:blue",
                label="ropelab.fused_qknorm_rope")
        ax.barh(y - 0.2, [twin.get(_label(r), np.nan) for r in fused], 0.4, color="tab:gray",
                label="CUDA C++ twin")
        ax.set_yticks(y, labels, fontsize=8)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xlim(0, 1.15)
        ax.set_xlabel("share of the copy of the same bytes", fontsize=8)
        ax.set_title("fused QK-norm + RoPE, production shapes", fontsize=9)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    fig.suptitle(_title(record, "How close to the copy does each kernel get? (1.0 = as fast as "
                                "copying the bytes)"), fontsize=9)
    fig.tight_layout()
    return fig


def twin_pairs(record) -> list[tuple[str, str]]:
    """(numba variant, CUDA C++ twin) pairs present in the record."""

    names = {r["variant"] for r in record["rows"]}
    return [(n, c) for n, c in TWINS.items() if n in names and c in names]


def twin_ratios(record) -> list[dict]:
    """Numba median / CUDA C++ median for each twin pair and shape (1.0 = equal speed)."""
    by = {(r["variant"], _label(r)): r["median_us"] for r in record["rows"]}
    out = []
    for numba_name, cpp_name in twin_pairs(record):
        for r in record["rows"]:
            if r["variant"] == numba_name and (cpp_name, _label(r)) in by:
                out.append({"numba": numba_name, "cuda_cpp": cpp_name, "shape": _label(r),
                            "ratio": r["median_us"] / by[(cpp_name, _label(r))]})
    return out


def twin_chart(record):
    """Is Numba as fast as CUDA C++ on the same algorithm?  Numba's time over its twin's, one
    horizontal bar per pair and shape (readable labels), 1.0 = equal, dashed 1.1 = 10% slower."""
    plt = _plt()
    ratios = twin_ratios(record)
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.28 * len(ratios) + 1.4)))
    if not ratios:
        ax.text(0.5, 0.5, "no numba / CUDA C++ twin pairs in this record", ha="center")
        ax.set_axis_off()
        return fig
    pairs = list(dict.fromkeys(f"{r['numba']} / {r['cuda_cpp']}" for r in ratios))
    colours = plt.get_cmap("tab10").colors
    labels = [r["shape"].replace("\n", " ") + ("" if "\n" in r["shape"] else " float32")
              for r in ratios]
    y = np.arange(len(ratios))[::-1]
    for pos, r in zip(y, ratios):
        k = pairs.index(f"{r['numba']} / {r['cuda_cpp']}")
        ax.barh(pos, r["ratio"], 0.7, color=colours[k % len(colours)])
        ax.text(r["ratio"] + 0.01, pos, f"{r['ratio']:.2f}", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    for k, pair in enumerate(pairs):  # one legend entry per pair, not per bar
        ax.barh([np.nan], [np.nan], color=colours[k % len(colours)], label=pair)
    ax.axvline(1.0, color="black", lw=1)
    ax.axvline(1.1, color="gray", lw=0.8, ls="--")
    ax.set_xlim(0, max(1.3, max(r["ratio"] for r in ratios) * 1.1))
    ax.set_xlabel("numba time / CUDA C++ time (1.0 = equal)", fontsize=8)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    ax.set_title(_title(record, "Is Numba as fast as nvcc (NVRTC) on the same algorithm?"), fontsize=9)
    fig.tight_layout()
    return fig


def save_all(record, directory) -> list[Path]:
    """Write the three charts as PNGs into ``directory``; return their paths."""
    plt = _plt()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, draw in (("time", time_chart), ("roof", roof_chart), ("twins", twin_chart)):
        fig = draw(record)
        path = directory / f"bench-{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
