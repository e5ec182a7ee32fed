"""Charts and noise helpers on synthetic records (no GPU data needed): what a learner reads off
a chart must hold whatever the record holds."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from ropelab.measure import charts
from ropelab import lessons

META = {"gpu": "Test GPU", "driver": "1.0", "numba_cuda": "0.30.4", "date": "2026-01-02T03:04:05Z"}


def _row(variant, shape, t, *, copy_t, nbytes=16_000_000, dtype="float32", spread=0.02):
    return {"variant": variant, "family": "copy" if "copy" in variant else "numba",
            "shape": shape, "dtype": dtype, "bytes_moved": nbytes, "median_us": t,
            "p20_us": t * (1 - spread), "p80_us": t * (1 + spread), "gbps": nbytes / (t * 1e3),
            "copy_gbps": nbytes / (copy_t * 1e3), "frac_of_copy": copy_t / t}


def _record():
    rows = []
    for shape, copy_t, nbytes in (("small", 9.0, 16_000_000), ("big", 250.0, 1_000_000_000)):
        rows += [_row("copy_d2d", shape, copy_t, copy_t=copy_t, nbytes=nbytes),
                 _row("flat", shape, copy_t * 1.17, copy_t=copy_t, nbytes=nbytes),
                 _row("pack4", shape, copy_t * 1.01, copy_t=copy_t, nbytes=nbytes)]
    rows.append(_row("fused", "flux_1024", 40.0, copy_t=30.0, dtype="bfloat16"))  # other variant
    return {"meta": META, "rows": rows}


def test_time_chart_has_no_empty_slots_and_a_linear_axis_per_shape():
    fig = charts.time_chart(_record(), variants=["copy_d2d", "flat", "pack4"])
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["small", "big"]  # no flux_1024 slot
    for ax in panels:
        assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
        lengths = [p.get_width() for p in ax.patches]
        # The 17% gap between flat and the copy is 17% of the bar: no log axis squeezes it.
        assert max(lengths) / min(lengths) == pytest.approx(1.17)
        # The dashed copy line sits at the copy of this shape's bytes.
        (line,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert line.get_xdata()[0] == pytest.approx(min(lengths))
    # Every name readable: one y label per variant, the slowest on the largest shape on top.
    names = [t.get_text() for t in panels[0].get_yticklabels()]
    assert sorted(names) == ["copy_d2d", "flat", "pack4"] and names[-1] == "flat"
    plt.close(fig)


def test_time_chart_takes_a_log_axis_only_where_the_range_demands_it():
    """The recorded run's eager PyTorch row is 260x the copy: on a linear axis it flattens
    every other bar."""
    rec = _record()
    rec["rows"].append(_row("torch_slow", "big", 250.0 * 260, copy_t=250.0, nbytes=1_000_000_000))
    fig = charts.time_chart(rec, variants=["copy_d2d", "flat", "pack4", "torch_slow"])
    small, big = [ax for ax in fig.axes if ax.axison]
    assert small.get_xscale() == "linear" and big.get_xscale() == "log"
    assert big.get_title() == "big (log axis)"
    # each bar carries its value, so the log axis hides no number
    assert "65,000.0" in [t.get_text() for t in big.texts]
    plt.close(fig)


def test_time_chart_default_leaves_out_kernel_rows_and_the_fused_kernel():
    rec = _record()
    rec["rows"].append(dict(_row("flat:kernel", "big", 290.0, copy_t=250.0), family="kernel"))
    rec["rows"][-2]["family"] = "ropelab_fused"  # the fused row of _record()
    fig = charts.time_chart(rec)
    labels = {t.get_text() for ax in fig.axes for t in ax.get_yticklabels()}
    assert labels == {"copy_d2d", "flat", "pack4"}
    plt.close(fig)


def test_roof_chart_answers_one_question_per_panel_with_a_short_legend():
    fig = charts.roof_chart(_record(), variants=["flat", "pack4"])
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["copy of the same bytes"]
    # the variants on the largest shape, sorted: the fastest at the top
    assert [t.get_text() for t in ax.get_yticklabels()] == ["flat", "pack4"]
    assert "big" in ax.get_title()
    assert [p.get_width() for p in ax.patches] == pytest.approx([1 / 1.17, 1 / 1.01])
    plt.close(fig)


def test_roof_chart_puts_the_fused_kernel_beside_its_twin_in_its_own_panel():
    rec = _record()
    for variant, family, t in (("fused_qknorm_rope", "ropelab_fused", 40.0), ("cuda_fused", "cuda_cpp", 38.0)):
        rec["rows"].append(dict(_row(variant, "flux_1024", t, copy_t=30.0, dtype="float16"), family=family))
    for r in rec["rows"]:
        r.setdefault("family", "numba")
    fig = charts.roof_chart(rec)
    assert len(fig.axes) == 2
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert legend == ["ropelab.fused_qknorm_rope", "CUDA C++ twin"]
    assert "flux_1024 float16" in [t.get_text() for t in fig.axes[1].get_yticklabels()]
    plt.close(fig)


def test_all_variants_chart_is_linear_and_labels_rows_off_its_scale():
    rec = _record()
    rec["rows"].append(_row("torch_slow", "big", 250.0 * 40, copy_t=250.0, nbytes=1_000_000_000))
    ax = lessons.plot_all_variants(rec, "big")
    assert ax.get_xscale() == "linear"
    assert ax.get_xlim()[1] == pytest.approx(2 * 250.0)
    off = [t.get_text() for t in ax.texts]
    assert len(off) == 1 and "10,000 us (40x the roof)" in off[0]
    plt.close(ax.figure)


def test_precision_buckets_skip_position_zero_and_fold_a_lone_last_position():
    rows = [{"pos_lo": lo, "pos_hi": hi, "max_abs_err": err, "max_abs_x": 1.0}
            for lo, hi, err in ((0, 0, 0.0), (1, 1, 1e-7), (2, 3, 2e-7), (4, 7, 4e-7),
                                (8, 8, 1e-7))]
    rec = {"meta": META, "rows": [dict(r, variant="flat", options="-", fastmath=True) for r in rows]}
    ax = lessons.plot_precision(rec, [dict(variant="flat")])
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "flat"]
    drawn = [(int(x), float(y)) for x, y in zip(line.get_xdata(), line.get_ydata())]
    assert drawn == [(1, 1e-7), (3, 2e-7), (8, 4e-7)]  # position 0 left out, not clamped
    plt.close(ax.figure)


def test_noise_table_compares_the_spread_with_the_repeat_gap():
    rows = []
    for shape, (a, b, twin) in {"s1": (100.0, 101.0, 100.5), "s2": (100.0, 110.0, 100.2)}.items():
        for variant, t in (("k_1", a), ("k_2", b), ("k_default", twin)):
            rows.append(_row(variant, shape, t, copy_t=50.0))
    rec = {"meta": META, "rows": rows}
    gaps = lessons.repeat_gaps(rec, ("k_default", "k_1"))
    assert gaps == {"s1": pytest.approx(0.005), "s2": pytest.approx(0.002)}
    lines = lessons.noise_table(rec, ["k_1", "k_2"], ("k_default", "k_1")).splitlines()
    assert "up to 0.5% (s1)" in lines[0]
    assert lines[3].endswith("above noise by 0.5 points")  # 1.0% spread, 0.5% floor
    assert lines[4].endswith("above noise by 9.5 points")
    with pytest.raises(KeyError):
        lessons.noise_table(rec, ["k_1"], ("k_default", "nope"))


def test_run_to_run_takes_the_largest_change_per_shape():
    before = {"meta": META, "rows": [_row("a", "s", 10.0, copy_t=5), _row("b", "s", 20.0, copy_t=5)]}
    after = {"meta": META, "rows": [_row("a", "s", 10.5, copy_t=5), _row("b", "s", 19.0, copy_t=5),
                                    _row("c", "s", 99.0, copy_t=5)]}
    assert lessons.run_to_run(after, before, ["a", "b", "c"]) == {"s": pytest.approx(0.05)}


def test_recorded_runs_are_oldest_first():
    runs = lessons.recorded_runs("bench")
    dates = [r["meta"]["date"] for r in runs]
    assert dates == sorted(dates) and runs[-1]["meta"]["date"] == lessons.recorded("bench")["meta"]["date"]


def test_spread_prints_the_20_80_range():
    assert lessons.spread({"p20_us": 310.74, "p80_us": 312.39}) == "310.7-312.4"
