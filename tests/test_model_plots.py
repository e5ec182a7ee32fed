"""Notebook 09's charts on synthetic records (no GPU data, no model): what a learner reads off a
chart must be what the record holds."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from ropelab.lessons import model_plots

META = {"gpu": "Test GPU", "torch": "2.0", "date": "2026-01-02T03:04:05Z"}
TIMES = {("transformers", "eager", "forward"): 3000.0, ("qkv_gemm", "eager", "forward"): 3100.0,
         ("ropelab", "eager", "forward"): 2400.0, ("transformers", "compiled", "forward"): 2000.0,
         ("qkv_gemm", "compiled", "forward"): 1990.0, ("ropelab", "compiled", "forward"): 1980.0,
         ("transformers", "eager", "forward_backward"): 9000.0,
         ("qkv_gemm", "eager", "forward_backward"): 9100.0,
         ("ropelab", "eager", "forward_backward"): 8100.0,
         ("transformers", "compiled", "forward_backward"): 7000.0,
         ("qkv_gemm", "compiled", "forward_backward"): 7010.0}  # ropelab compiled f+b: not run


def _record(host_bound=False):
    rows = [{"model": m, "mode": mode, "pass": p, "tokens": 4096, "dtype": "bfloat16",
             "median_us": t, "p20_us": t * 0.99, "p80_us": t * 1.02, "host_bound": host_bound,
             "note": ""} for (m, mode, p), t in TIMES.items()]
    return {"meta": META, "rows": rows}


def test_layer_times_draw_each_recorded_median_with_its_range_and_ratio():
    fig = model_plots.plot_layer_times(_record())
    panels = fig.axes
    assert [ax.get_title() for ax in panels] == ["forward, eager", "forward, compiled",
                                                 "forward + backward, eager",
                                                 "forward + backward, compiled"]
    eager = panels[0]
    assert [p.get_width() for p in eager.patches] == pytest.approx([3.0, 3.1, 2.4])
    assert [p.get_facecolor()[:3] for p in eager.patches][2] == pytest.approx(
        matplotlib.colors.to_rgb("tab:blue"))
    texts = [t.get_text() for t in eager.texts]
    assert " 2.40 ms  0.800x" in texts and " 3.00 ms" in texts
    assert eager.get_xlim()[0] == 0  # a linear axis from zero: a small gain looks small
    # The row the run did not time is said, not drawn as zero.
    last = panels[3]
    assert len(last.patches) == 2 and " not run" in [t.get_text() for t in last.texts]
    assert "hatched" not in fig._suptitle.get_text()
    plt.close(fig)


def test_host_bound_rows_are_hatched_and_the_title_says_so():
    fig = model_plots.plot_layer_times(_record(host_bound=True))
    assert all(p.get_hatch() == "//" for p in fig.axes[0].patches)
    assert "hatched: host_bound" in fig._suptitle.get_text()
    plt.close(fig)


def test_loss_curves_draw_both_curves_and_their_gap_against_the_bound():
    original = [4.8, 2.9, 1.2, 0.57]
    patched = [4.8, 2.9 * (1 + 3e-7), 1.2, 0.57 * (1 - 2e-6)]
    fig = model_plots.plot_loss_curves(patched, original, 1e-4)
    left, right = fig.axes
    lines = {ln.get_label(): list(ln.get_ydata()) for ln in left.get_lines()}
    assert lines == {"original": original, "patched (ropelab)": patched}
    gaps = [p.get_height() for p in right.patches]
    assert gaps == pytest.approx([0.0, 3e-7, 0.0, 2e-6], abs=1e-12)
    (bound,) = [ln for ln in right.get_lines() if ln.get_linestyle() == "--"]
    assert bound.get_ydata()[0] == 1e-4 and right.get_ylim()[0] == 0
    plt.close(fig)
