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


def _bars(ax, shapes, names, table, log=False):
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(shapes))
    for i, name in enumerate(names):
        ax.bar(x + (i - (len(names) - 1) / 2) * width, table[i], width, label=name)
    ax.set_xticks(x, shapes, fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=7, ncol=2)


def time_chart(record, variants=None):
    """Median time per variant, one panel per shape on its own linear axis from zero.

    Shapes differ in time by a factor of 30 or more, so a shared axis would need a log scale,
    and a log scale squeezes the differences the chart is for (17% between two bars looks like
    a few pixels).  Each panel instead starts at zero: bar heights compare directly.  Whiskers
    are the 20th-80th percentiles of the launches; the dashed line is the device copy of the
    same bytes in the same run, the floor under every bar.
    """
    plt = _plt()
    rows = record["rows"]
    shapes, names, med = _grid(rows, lambda r: r["median_us"], variants)
    _, _, p20 = _grid(rows, lambda r: r["p20_us"], names)
    _, _, p80 = _grid(rows, lambda r: r["p80_us"], names)
    _, _, copy = _grid(rows, copy_us, names)
    cols = min(len(shapes), 5)
    nrows = -(-len(shapes) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(2.6 * cols + 0.6, 3.3 * nrows + 0.7),
                             squeeze=False)
    colours = plt.get_cmap("tab10").colors
    x = np.arange(len(names))
    for k, shape in enumerate(shapes):
        ax = axes[k // cols][k % cols]
        for i, name in enumerate(names):
            if np.isnan(med[i, k]):
                continue
            ax.bar(x[i], med[i, k], 0.7, color=colours[i % len(colours)],
                   yerr=[[med[i, k] - p20[i, k]], [p80[i, k] - med[i, k]]], capsize=2,
                   label=name)
            ax.text(x[i], med[i, k] * 0.5, f"{med[i, k]:,.1f}", ha="center", va="center",
                    rotation=90, fontsize=7, color="white")
        floor = np.nanmin(copy[:, k])
        ax.axhline(floor, color="black", lw=1, ls="--")
        ax.set_xticks(x, names, fontsize=7, rotation=30, ha="right")
        ax.set_ylim(0, np.nanmax(p80[:, k]) * 1.12)
        ax.set_title(shape.replace("\n", " "), fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        if k % cols == 0:
            ax.set_ylabel("median us per call")
    for k in range(len(shapes), nrows * cols):
        axes[k // cols][k % cols].set_axis_off()
    fig.suptitle(_title(record, "Time per call (cold L2): 20-80% whiskers, dashed = device copy "
                                "of the same bytes"), fontsize=9)
    fig.tight_layout()
    return fig


def roof_chart(record, variants=None):
    """Effective bandwidth as a fraction of the same run's device copy of the same bytes."""
    plt = _plt()
    rows = [r for r in record["rows"] if r["family"] != "copy"]
    shapes, names, frac = _grid(rows, lambda r: r["frac_of_copy"], variants)
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(shapes)), 4.5))
    _bars(ax, shapes, names, frac)
    # Each bar is divided by the copy of its own shape's bytes: the line at 1.0 is every
    # shape's copy marker.
    ax.axhline(1.0, color="black", lw=1, label="copy of the same bytes")
    ax.axhline(0.95, color="gray", lw=0.8, ls="--")
    ax.legend(fontsize=7, ncol=2)
    ax.set_ylabel("fraction of device copy bandwidth")
    ax.set_ylim(0, max(1.1, float(np.nanmax(frac)) * 1.05) if np.isfinite(frac).any() else 1.1)
    ax.set_title(_title(record, "Share of the copy roof (1.0 = as fast as copying the bytes)"),
                 fontsize=9)
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
    """Numba kernel time over its CUDA C++ twin's time, per shape (below 1.1 = within 10%)."""
    plt = _plt()
    ratios = twin_ratios(record)
    fig, ax = plt.subplots(figsize=(7, 4))
    if not ratios:
        ax.text(0.5, 0.5, "no numba / CUDA C++ twin pairs in this record", ha="center")
        ax.set_axis_off()
        return fig
    pairs = list(dict.fromkeys(f"{r['numba']} / {r['cuda_cpp']}" for r in ratios))
    shapes = list(dict.fromkeys(r["shape"] for r in ratios))
    table = np.full((len(pairs), len(shapes)), np.nan)
    for r in ratios:
        table[pairs.index(f"{r['numba']} / {r['cuda_cpp']}"), shapes.index(r["shape"])] = r["ratio"]
    _bars(ax, shapes, pairs, table)
    ax.axhline(1.0, color="black", lw=1)
    ax.axhline(1.1, color="gray", lw=0.8, ls="--")
    ax.set_ylabel("numba time / CUDA C++ time")
    ax.set_title(_title(record, "Numba beside nvcc (NVRTC) on the same algorithm"), fontsize=9)
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
