"""Notebook 07's view of the predicted-H200-time model: its record as a table and a chart.

The model and its record are :mod:`ropelab.measure.predict`'s; this module only shows them.
"""

from __future__ import annotations

from .tables import provenance


def _label(row) -> str:
    fused = row["source"] == "bench_fused"  # the plain kernels are all float32
    return f"{row['kernel']} @ {row['shape']}" + (f" {row['dtype']}" if fused else "")


def prediction_table(record, split: str = "test") -> str:
    """One line per row of ``split`` (held out: ``"test"``): recorded time, both predictions."""
    rows = [r for r in record["rows"] if r["split"] == split]
    rows.sort(key=lambda r: (r["source"], r["kernel"], r["bytes_moved"], r["dtype"]))
    width = max(len(_label(r)) for r in rows)
    head = (f"{'kernel @ shape':<{width}}  {'record':<11} {'H200 us':>8}  {'model us':>8} "
            f"{'error':>7}  {'trivial':>8} {'error':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        flag = "  <- beyond a tenth" if abs(r["model_error"]) > 0.10 else ""
        lines.append(f"{_label(r):<{width}}  {r['source']:<11} {r['recorded_us']:>8.1f}  "
                     f"{r['model_us']:>8.1f} {100 * r['model_error']:>+6.1f}%  "
                     f"{r['trivial_us']:>8.1f} {100 * r['trivial_error']:>+6.1f}%{flag}")
    s = record["meta"]["summary"]
    def max_mean(model):
        return (f"{100 * s[f'{split}_{model}_max']:.1f}% / "
                f"{100 * s[f'{split}_{model}_mean']:.1f}%")

    lines += ["", f"{split} rows: {s[f'{split}_rows']}; |error| max / mean: model "
              f"{max_mean('model')}, trivial {max_mean('trivial')}",
              f"source: {provenance(record)}"]
    return "\n".join(lines)


def plot_prediction_errors(record, ax=None):
    """Held-out rows, one line each: the model's error (dot) and the trivial model's (cross)."""
    import matplotlib.pyplot as plt

    rows = [r for r in record["rows"] if r["split"] == "test"]
    rows.sort(key=lambda r: (r["kernel"], r["bytes_moved"], r["dtype"]))
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.22 * len(rows) + 2.2))
    y = range(len(rows))
    ax.axvspan(-10, 10, color="#e8f4e8", zorder=0, label="the goal: within a tenth")
    ax.axvline(0, color="grey", lw=0.8)
    ax.scatter([100 * r["trivial_error"] for r in rows], y, marker="x", color="#999999",
               label="trivial: a fixed fraction of the copy", zorder=2)
    ax.scatter([100 * r["model_error"] for r in rows], y, color="#1f77b4",
               label="model: copy time x features", zorder=3)
    ax.set_yticks(list(y), [f"{_label(r)} ({r['source']})" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("predicted / recorded H200 time - 1 (%)")
    ax.set_title("Held-out rows: prediction against the recorded H200 time", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06 - 1.2 / len(rows)), ncol=2,
              fontsize=8, frameon=False)
    ax.figure.tight_layout()
    return ax
