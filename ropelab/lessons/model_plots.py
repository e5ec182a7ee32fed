"""Charts of notebook 09 (ropelab inside a real model): one decoder layer's times from the record
of ``python -m ropelab.models.bench --record`` (``data/real_model/``), and the loss curves of the
patched and the original model.

The style is :mod:`.plots`' and :mod:`ropelab.measure.charts`': linear axes from zero, each bar
labelled with its value, colour for who wrote the code (PyTorch red, ropelab blue), the record's
GPU and date in the title.  matplotlib is imported inside each function.
"""

from __future__ import annotations

# (record's model name, label, colour): transformers as shipped, the control (one qkv GEMM, then
# transformers' own norm and rotation: still PyTorch code), ropelab's fused op.
LAYER_MODELS = (("transformers", "transformers", "tab:red"),
                ("qkv_gemm", "one qkv GEMM\n(control)", "lightcoral"),
                ("ropelab", "ropelab", "tab:blue"))
PANELS = (("forward", "eager"), ("forward", "compiled"), ("forward_backward", "eager"),
          ("forward_backward", "compiled"))


def _row(record, model: str, mode: str, pass_name: str):
    found = [r for r in record["rows"] if (r["model"], r["mode"], r["pass"]) == (model, mode, pass_name)]
    return found[0] if found and found[0].get("median_us") is not None else None


def plot_layer_times(record):
    """One panel per pass and mode: the layer's median time per model in ms, with its p20-p80
    range and, for the two patched models, its ratio to transformers.  A row the run did not
    time says "not run"; a host_bound row is hatched (its events may include host time)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(13, 3.4), sharey=True)
    any_host_bound = False
    for ax, (pass_name, mode) in zip(axes, PANELS):
        base = _row(record, "transformers", mode, pass_name)
        top = 0.0
        for y, (model, _, colour) in enumerate(LAYER_MODELS):
            r = _row(record, model, mode, pass_name)
            if r is None:
                ax.text(0, y, " not run", va="center", fontsize=8)
                continue
            ms, lo, hi = r["median_us"] / 1e3, r["p20_us"] / 1e3, r["p80_us"] / 1e3
            hatched = bool(r.get("host_bound"))
            any_host_bound |= hatched
            ax.barh(y, ms, color=colour, hatch="//" if hatched else None, edgecolor="white",
                    xerr=[[ms - lo], [hi - ms]], error_kw={"ecolor": "black", "capsize": 3})
            ratio = "" if model == "transformers" or base is None else \
                f"  {r['median_us'] / base['median_us']:.3f}x"
            ax.text(hi, y, f" {ms:.2f} ms{ratio}", va="center", fontsize=8)
            top = max(top, hi)
        ax.set_xlim(0, top * 1.55 if top else 1)
        ax.set_title(f"{pass_name.replace('_', ' + ')}, {mode}", fontsize=9)
        ax.set_xlabel("ms per call (median, p20-p80)")
    axes[0].set_yticks(range(len(LAYER_MODELS)), [label for _, label, _ in LAYER_MODELS])
    axes[0].invert_yaxis()
    m = record["meta"]
    first = record["rows"][0]
    fig.suptitle(f"one Qwen3-8B decoder layer, {first['tokens']} tokens, {first['dtype']}: "
                 f"transformers, the control and ropelab\n{m['gpu']}, torch {m.get('torch')}, "
                 f"{m['date'][:10]}" + ("; hatched: host_bound" if any_host_bound else ""),
                 fontsize=9)
    fig.tight_layout()
    return fig


def plot_loss_curves(patched, original, rtol: float):
    """Left: the loss before each SGD step, original and patched.  Right: their difference
    relative to the original's loss at each step, on a linear axis up to the bound ``rtol``
    (``ropelab.models.training.CURVE_RTOL``) drawn as a line."""
    import matplotlib.pyplot as plt

    steps = list(range(len(original)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2))
    left.plot(steps, original, "-", color="tab:red", linewidth=4, alpha=0.5, label="original")
    left.plot(steps, patched, "o--", color="tab:blue", label="patched (ropelab)")
    left.set_xticks(steps)
    left.set_xlabel("SGD step")
    left.set_ylabel("loss")
    left.set_title("the loss before each step", fontsize=9)
    left.legend(fontsize=8)
    gaps = [abs(p - o) / abs(o) for p, o in zip(patched, original)]
    right.bar(steps, gaps, color="tab:blue", width=0.5)
    for s, g in zip(steps, gaps):
        right.text(s, g, f"{g:.1e}", ha="center", va="bottom", fontsize=8)
    right.axhline(rtol, color="black", linestyle="--", linewidth=1)
    right.text(steps[-1] + 0.3, rtol, f"bound {rtol:g}", va="bottom", ha="right", fontsize=8)
    right.set_ylim(0, max(gaps + [rtol]) * 1.25)
    right.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    right.set_xticks(steps)
    right.set_xlabel("SGD step")
    right.set_ylabel("|patched - original| / original")
    right.set_title("their difference, relative to the loss", fontsize=9)
    fig.tight_layout()
    return fig
