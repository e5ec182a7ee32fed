"""Notebook 07's view of the predicted-H200-time model: its validation as a table and a chart.

The model and its record are :mod:`ropelab.grader.predict`'s; this module only shows them.
Every figure here is a *held-out* one: each row predicted by a fit that left its family (its
step, or its recorded kernel) out.
"""

from __future__ import annotations

from .tables import provenance


def _name(family: str) -> str:
    kind, _, name = family.partition(":")
    return f"step {name}" if kind == "step" else f"{name} (bench record)"


def validation_table(record) -> str:
    """One line per family: rows, the model's and the trivial model's mean and worst error."""
    v = record["meta"]["validation"]
    width = max(len(_name(f)) for f in v["families"])
    head = (f"{'family (left out of the fit)':<{width}}  {'rows':>4}  {'model mean':>10} "
            f"{'worst':>7}  {'trivial mean':>12} {'worst':>7}")
    lines = [head, "-" * len(head)]
    for family, s in v["families"].items():
        flag = "  <- the trivial model does better" if s["model_mean"] > s["trivial_mean"] else ""
        lines.append(f"{_name(family):<{width}}  {s['rows']:>4}  {100 * s['model_mean']:>9.1f}% "
                     f"{100 * s['model_max']:>6.1f}%  {100 * s['trivial_mean']:>11.1f}% "
                     f"{100 * s['trivial_max']:>6.1f}%{flag}")
    low, high = v["interval_80"]
    lines += ["", f"all {v['rows']} rows: model mean {100 * v['model_mean']:.1f}%, worst "
              f"{100 * v['model_max']:.1f}%; trivial mean {100 * v['trivial_mean']:.1f}%, worst "
              f"{100 * v['trivial_max']:.1f}%",
              f"error bar printed with a prediction: 80% of these rows measured between "
              f"{100 * (low - 1):+.0f}% and {100 * (high - 1):+.0f}% of it",
              f"source: {provenance(record)}"]
    return "\n".join(lines)


def plot_prediction_errors(record, ax=None):
    """Every row, predicted with its family left out: the model's error (dot) and the trivial
    model's (cross), families in order."""
    import matplotlib.pyplot as plt

    rows = sorted(record["rows"], key=lambda r: (r["family"], r["measured_us"]))
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.12 * len(rows) + 2.4))
    y = range(len(rows))
    low, high = record["meta"]["validation"]["interval_80"]
    ax.axvspan(100 * (1 / high - 1), 100 * (1 / low - 1), color="#e8f4e8", zorder=0,
               label="the printed error bar (80% of rows)")
    ax.axvline(0, color="grey", lw=0.8)
    ax.scatter([100 * r["trivial_error"] for r in rows], y, marker="x", s=12, color="#999999",
               label="trivial: a fixed fraction of the copy", zorder=2)
    ax.scatter([100 * r["model_error"] for r in rows], y, s=10, color="#1f77b4",
               label="model: the roofline", zorder=3)
    ticks, labels, last = [], [], None
    for k, r in enumerate(rows):
        if r["family"] != last:
            ticks.append(k)
            labels.append(_name(r["family"]))
            last = r["family"]
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("predicted / measured H200 time - 1 (%), each family left out of the fit")
    ax.set_title("Kernels the fit never saw: prediction against the measured time", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08 - 1.5 / max(len(rows), 1)),
              ncol=2, fontsize=8, frameon=False)
    ax.figure.tight_layout()
    return ax
