"""ropelab.lessons: thread maps traced from the real kernels, and the notebook checks.

Budget: a few seconds on the simulator (a few hundred CUDA threads per trace).
"""

import numpy as np
import pytest

import ropelab
from ropelab import lessons, kernels, reference
from ropelab.lessons import tracing
from ropelab.problem import RopeProblem

SIM_ONLY = pytest.mark.skipif(not ropelab.SIMULATED, reason="in-process trace needs the simulator")


@pytest.mark.parametrize("variant", list(kernels.VARIANTS))
@pytest.mark.parametrize("tokens, hidden, tpb", [(3, 10, 8), (2, 14, None), (5, 6, 4)])
def test_every_float_is_written_by_exactly_one_launched_thread(variant, tokens, hidden, tpb):
    if variant == "block2d" and tpb is not None and tpb < hidden // 2:
        tpb = None  # fine either way, but keep block2d on its own default here
    tmap = lessons.trace_threads(variant, tokens, hidden, threads_per_block=tpb)
    assert tmap.block.shape == tmap.thread.shape == (tokens, hidden)
    assert (tmap.block >= 0).all(), "some float was never written"
    assert (tmap.block < tmap.grid[0]).all() and (tmap.thread < tmap.block_dim[0]).all()
    # Both floats of a pair come from the same thread: a pair is rotated as a unit.
    assert (tmap.block[:, 0::2] == tmap.block[:, 1::2]).all()
    assert (tmap.thread[:, 0::2] == tmap.thread[:, 1::2]).all()
    assert 0 < tmap.busy <= tmap.launched


def test_flat_map_is_the_row_major_pair_index():
    tmap = lessons.trace_threads("flat", 3, 10, threads_per_block=8)
    pair_number = np.arange(3 * 5).reshape(3, 5).repeat(2, axis=1)
    np.testing.assert_array_equal(tmap.global_thread(), pair_number)
    assert (tmap.grid, tmap.block_dim) == ((2, 1), (8, 1))
    assert (tmap.launched, tmap.busy, tmap.elements_per_thread) == (16, 15, 2.0)


def test_block2d_map_is_block_per_token_thread_per_pair():
    tmap = lessons.trace_threads("block2d", 4, 12)
    np.testing.assert_array_equal(tmap.block, np.arange(4)[:, None].repeat(12, axis=1))
    np.testing.assert_array_equal(tmap.thread, np.arange(6).repeat(2)[None].repeat(4, axis=0))
    assert tmap.block_dim == (32, 1)  # six pairs, rounded up to a warp
    assert tmap.busy == 24 and tmap.launched == 128


def test_block2d_strides_when_the_block_is_narrower_than_the_row():
    tmap = lessons.trace_threads("block2d", 2, 20, threads_per_block=4)
    # 10 pairs, 4 threads: thread t handles pairs t, t + 4, t + 8.
    np.testing.assert_array_equal(tmap.thread[0, 0::2], np.arange(10) % 4)
    assert tmap.elements_per_thread == 5.0


@pytest.mark.parametrize("variant", ["pack4", "pack4_scalar"])
def test_pack4_gives_each_thread_four_floats_and_a_tail(variant):
    if variant not in kernels.VARIANTS:
        pytest.skip(f"{variant} not registered")
    tmap = lessons.trace_threads(variant, 2, 10, threads_per_block=8)  # 5 pairs: odd, a tail
    g = tmap.global_thread()
    np.testing.assert_array_equal(g[0], [0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(g[1], [3, 3, 3, 3, 4, 4, 4, 4, 5, 5])


def test_trace_does_not_change_what_the_kernel_computes(rng):
    # The watched arrays are a recording layer only: the same launch on them gives the reference.
    problem = RopeProblem(3, 1, 10, 10)
    x = rng.standard_normal(30).astype(np.float32)
    out = tracing._WatchedArray(np.zeros(30, np.float32), np.full((30, 4), -1), None)
    if not ropelab.SIMULATED:
        pytest.skip("needs the simulator in this process")
    kernels.launch.launch(kernels.get("flat").plan(problem),
                          (tracing._WatchedArray(x, None, None), out,
                           tracing._WatchedArray(np.arange(3, dtype=np.int32), None, None)))
    want = reference.rope(x.reshape(3, 10))
    assert np.abs(out.data.reshape(3, 10) - want).max() < 1e-5


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown variant"):
        lessons.trace_threads("nope", 2, 4)


def test_check_passes_a_correct_result_and_fails_a_wrong_one(rng):
    x = rng.standard_normal((4, 12)).astype(np.float32)
    pos = np.array([0, 3, 9, 100])
    good = lessons.check("ref", x, reference.rope(x, pos).astype(np.float32), pos)
    assert good.passed and good.line.endswith("PASS") and "4x12" in good.line
    assert "e-" in good.line and str(good.max_error) not in good.line  # no raw error in the line
    wrong = reference.rope(x, pos + 1)
    bad = lessons.check("shifted", x, wrong, pos)
    assert not bad.passed and bad.line.endswith("FAIL")
    nan = lessons.check("nan", x, np.full_like(x, np.nan), pos)
    assert not nan.passed


def test_check_uses_reference_options(rng):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    pos = np.array([1, 2])
    neox = reference.rope(x, pos, interleave=False)
    assert lessons.check("neox", x, neox, pos, interleave=False).passed
    assert not lessons.check("neox", x, neox, pos).passed


def test_plot_thread_map_labels_every_float():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tmap = lessons.trace_threads("flat", 2, 6, threads_per_block=4)
    ax = lessons.plot_thread_map(tmap, label="global")
    labels = [t.get_text() for t in ax.texts]
    assert labels == [str(v) for v in tmap.global_thread().ravel()]
    plt.close(ax.figure)


def test_source_is_the_kernel_text():
    text = lessons.source(kernels.get("flat").kernel)
    assert text.startswith("def rope_flat(") and "cuda.grid(1)" in text


# --- recorded-data helpers, on synthetic records (no GPU data needed) ------------------------

META = {"gpu": "Test GPU", "driver": "1.0", "numba_cuda": "0.30.4", "date": "2026-01-02T03:04:05Z"}


def _bench_record():
    rows = []
    for shape, nbytes, times in (("4096x512", 16_000_000, {"torch_copy": 8.0, "flat": 10.0,
                                                           "block2d": 8.0}),
                                 ("8192x1024", 64_000_000, {"copy_d2d": 20.0, "flat": 32.0})):
        for variant, t in times.items():
            family = "copy" if "copy" in variant else "numba"
            rows.append({"variant": variant, "family": family, "shape": shape, "dtype": "float32",
                         "bytes_moved": nbytes, "median_us": t, "p20_us": t * 0.9,
                         "p80_us": t * 1.1, "gbps": nbytes / (t * 1e3),
                         "copy_gbps": nbytes / (times.get("torch_copy", times.get("copy_d2d")) * 1e3)})
    return {"meta": META, "rows": rows}


def test_bench_table_and_relative_times_read_the_record():
    rec = _bench_record()
    assert lessons.roof_gbps(rec) == 3200.0  # 64 MB in 20 us beats 16 MB in 8 us
    table = lessons.bench_table(rec, ["torch_copy", "copy_d2d", "flat", "block2d"])
    lines = table.splitlines()
    assert "3,200 GB/s" in lines[0]
    body = lines[3:]
    assert [ln.split()[2] for ln in body] == ["torch_copy", "flat", "block2d", "copy_d2d", "flat"]
    assert body[1].split()[3:] == ["10.0", "9.0-11.0", "1600", "50%"]  # median, p20-p80, ...
    rel = lessons.relative_times(rec, "flat", ["block2d"]).splitlines()
    assert rel[2].split() == ["4096x512", "0.80"] and rel[3].split() == ["8192x1024", "-"]
    assert lessons.provenance(rec).startswith("recorded 2026-01-02 on Test GPU")


def test_bench_plots_draw_what_the_record_holds():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = _bench_record()
    ax = lessons.plot_roof(rec, ["flat", "block2d"])
    heights = sorted(round(p.get_height(), 3) for p in ax.patches if np.isfinite(p.get_height()))
    assert heights == [0.5, 0.625, 0.625]
    # One copy marker per shape, at the share of the roof its own copy reached.
    (markers,) = [c for c in ax.collections if c.get_label() == "copy of the same bytes"]
    assert sorted(round(seg[0][1], 3) for seg in markers.get_segments()) == [0.625, 1.0]
    plt.close(ax.figure)
    ax = lessons.plot_all_variants(rec, "4096x512")
    assert len(ax.patches) == 3
    plt.close(ax.figure)
    over = {"meta": META, "rows": [{"launcher": "a", "us_per_launch": 5.0},
                                   {"launcher": "b", "us_per_launch": 2.0}]}
    ax = lessons.plot_launch_overhead(over)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["b", "a"]
    plt.close(ax.figure)


def test_recorded_returns_none_and_says_todo_when_missing(tmp_path, monkeypatch, capsys):
    from ropelab.measure import records

    monkeypatch.setattr(records, "DATA_DIR", tmp_path)
    assert lessons.recorded("bench") is None
    assert "TODO(GPU data)" in capsys.readouterr().out


def _precision_record():
    rows = []
    for variant, options, fastmath, slope in (("flat", "-", True, 1e-7), ("freq_table", "cache=True", True, 0.0)):
        for lo, hi in ((0, 0), (1, 1), (2, 3), (4, 7), (8, 15)):
            rows.append({"variant": variant, "options": options, "scaling": "-", "fastmath": fastmath,
                         "pos_lo": lo, "pos_hi": hi, "max_abs_x": 4.0,
                         "max_abs_err": 4.0 * (1e-7 + slope * hi), "mean_abs_err": 1e-8})
    return {"meta": META, "rows": rows}


def test_precision_table_takes_the_worst_bucket_below_each_limit():
    rec = _precision_record()
    cases = [dict(variant="flat"), dict(variant="freq_table", options="cache=True"),
             dict(variant="flat", fastmath=False)]
    lines = lessons.precision_table(rec, cases, limits=(3, 15)).splitlines()[2:]
    assert lines[0].split()[-2:] == ["4.0e-07", "1.6e-06"]
    assert lines[1].split()[-2:] == ["1.0e-07", "1.0e-07"]
    assert lines[2].split()[-2:] == ["-", "-"]  # no rows for that case


def test_precision_plots_draw_one_line_per_case():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = lessons.plot_precision(_precision_record(), [dict(variant="flat"),
                                                     dict(variant="freq_table", options="cache=True")])
    assert len(ax.get_lines()) == 2 + 1  # two cases and the bf16 guide line
    plt.close(ax.figure)
    sc = {"meta": META, "rows": [
        {"fastmath": fm, "angle_lo": lo, "angle_hi": lo * 10, "max_abs_err_sin": 1e-7,
         "max_abs_err_cos": 2e-7} for fm in (True, False) for lo in (0.1, 1.0, 10.0)]}
    ax = lessons.plot_sincos_error(sc)
    assert len(ax.get_lines()) == 4
    plt.close(ax.figure)
    drift = {"meta": META, "rows": [
        {"fastmath": True, "chunk": c, "pair": j, "rel_err_pow": 1e-7, "rel_err_recurrence": 1e-7 * (j % c + 1),
         "angle_err_pow_rad": 1e-3, "angle_err_recurrence_rad": 1e-3 * (j % c + 1)}
        for c in (1, 4) for j in range(8)]}
    ax = lessons.plot_freq_drift(drift, chunks=(1, 4))
    assert len(ax.get_lines()) == 2
    plt.close(ax.figure)
    table = lessons.drift_table(drift, chunks=(1, 4)).splitlines()[2:]
    assert table[0].split() == ["1", "1.0e-07", "1.0e-03"]
    assert table[1].split() == ["4", "4.0e-07", "4.0e-03"]


def test_fused_trace_gives_one_warp_per_token_and_head():
    fmap = lessons.trace_fused(2, (2, 1, 1), 64)
    tokens, heads, d = fmap.warp.shape
    assert (tokens, heads, d) == (2, 4, 64)
    # Q and K heads: every element written by the block of its own token, one warp per head,
    # lane l holding elements 2l and 2l+1 (E = 64 / 32 = 2).
    np.testing.assert_array_equal(fmap.token[:, :3], np.arange(2)[:, None, None].repeat(3, 1).repeat(64, 2))
    for h in range(3):
        assert set(fmap.warp[:, h].ravel().tolist()) == {h}
    np.testing.assert_array_equal(fmap.lane[0, 0], np.arange(64) // 2)
    assert (fmap.warp[:, 3] == -1).all() and (fmap.lane[:, 3] == -1).all()  # V is never written
    assert "2 elements" not in fmap.summary() and "2 consecutive elements" in fmap.summary()


def test_fused_trace_half_split_keeps_the_same_ownership():
    fmap = lessons.trace_fused(1, (1, 1, 0), 64, interleave=False)
    np.testing.assert_array_equal(fmap.lane[0, 1], np.arange(64) // 2)


def test_bench_row_and_share_of_roof_read_one_row():
    rec = _bench_record()
    assert lessons.bench_row(rec, "flat", "8192x1024")["median_us"] == 32.0
    assert lessons.share_of_roof(rec, "flat", "4096x512") == 0.5  # 1600 of 3200 GB/s
    with pytest.raises(KeyError):
        lessons.bench_row(rec, "block2d", "8192x1024")
    with pytest.raises(KeyError):
        lessons.bench_row(rec, "flat", "4096x512", dtype="bfloat16")


def test_sincos_table_keeps_the_worse_of_sin_and_cos_per_decade():
    sc = {"meta": META, "rows": [
        {"fastmath": True, "angle_lo": 10.0, "angle_hi": 100.0, "max_abs_err_sin": 1e-5,
         "max_abs_err_cos": 3e-5},
        {"fastmath": False, "angle_lo": 10.0, "angle_hi": 100.0, "max_abs_err_sin": 8e-8,
         "max_abs_err_cos": 2e-8},
        {"fastmath": True, "angle_lo": 1.0, "angle_hi": 10.0, "max_abs_err_sin": 2e-6,
         "max_abs_err_cos": 1e-6}]}
    lines = lessons.sincos_table(sc).splitlines()[2:]
    assert lines[0].split() == ["[1,", "10)", "2.0e-06", "-"]
    assert lines[1].split() == ["[10,", "100)", "3.0e-05", "8.0e-08"]


def test_fused_trace_with_two_heads_per_warp_shares_a_warp_between_heads():
    fmap = lessons.trace_fused(1, (2, 2, 0), 64, heads_per_warp=2)
    assert fmap.heads_per_warp == 2
    assert [set(fmap.warp[0, h].tolist()) for h in range(4)] == [{0}, {0}, {1}, {1}]
    np.testing.assert_array_equal(fmap.lane[0, 3], np.arange(64) // 2)
    assert "each of its warp's 2 heads" in fmap.summary()


def test_copy_table_divides_by_the_same_shapes_copy():
    rows = [{"variant": v, "shape": "flux_1024", "dtype": dt, "bytes_moved": 100_000_000,
             "median_us": t, "p20_us": t - 5, "p80_us": t + 5,
             "gbps": 1e5 / t, "copy_gbps": 4000.0 if dt == "float32" else 3000.0,
             "frac_of_copy": (1e5 / t) / (4000.0 if dt == "float32" else 3000.0)}
            for v, dt, t in (("fused_a", "bfloat16", 50.0), ("fused_a", "float32", 25.0),
                             ("fused_b", "bfloat16", 40.0))]
    lines = lessons.copy_table({"meta": META, "rows": rows}, ["fused_a", "fused_b"]).splitlines()[2:]
    assert [ln.split()[1:4] for ln in lines] == [["bfloat16", "100", "fused_a"],
                                                 ["bfloat16", "100", "fused_b"],
                                                 ["float32", "100", "fused_a"]]
    assert lines[0].split()[-4:] == ["50.0", "45.0-55.0", "33.3", "66.7%"]
    assert lines[2].split()[-4:] == ["25.0", "20.0-30.0", "25.0", "100.0%"]
