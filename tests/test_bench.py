"""Benchmark arithmetic on synthetic timings, and the sweep's plumbing with a fake timer.

No test here times anything: under the simulator the bench must refuse, and speed is never
asserted.  The sweep runs real launchers on a tiny shape (the simulator executes them) with a
timer that returns made-up samples, so the row math can be checked exactly.
"""

import numpy as np
import pytest

import ropelab

from ropelab.measure import bench
from ropelab import kernels


def test_quantiles_interpolate_linearly():
    med, p20, p80 = bench.quantiles([10, 1, 9, 2, 8, 3, 7, 4, 6, 5])
    # sorted 1..10: rank q*(n-1) -> 20%: 1.8 -> 2.8, 50%: 4.5 -> 5.5, 80%: 7.2 -> 8.2
    assert (med, p20, p80) == pytest.approx((5.5, 2.8, 8.2))


@pytest.mark.parametrize("bad", [[], [1.0, -1.0], [float("nan"), 2.0], [0.0]])
def test_quantiles_refuse_impossible_samples(bad):
    # -1.0 is what the simulator's event_elapsed_time returns: it must never become a time.
    with pytest.raises(ValueError):
        bench.quantiles(bad)


def test_gbps_is_decimal_bytes_per_second():
    assert bench.gbps(2_000_000_000, 1000.0) == pytest.approx(2000.0)
    assert bench.gbps(4096 * 512 * 8, 8.0) == pytest.approx(4096 * 512 * 8 / 8e-6 / 1e9)
    with pytest.raises(ValueError):
        bench.gbps(1, 0.0)


def test_summarize_relates_rows_to_the_copy_roof():
    rng = np.random.default_rng(1)
    samples = list(100.0 + rng.random(51))
    s = bench.summarize(samples, bytes_moved=400_000_000, copy_gbps=5000.0)
    med = float(np.median(samples))
    assert s["median_us"] == pytest.approx(med, abs=1e-3)
    assert s["p20_us"] <= s["median_us"] <= s["p80_us"]
    assert s["gbps"] == pytest.approx(400_000_000 / (med * 1e-6) / 1e9, abs=0.01)
    assert s["frac_of_copy"] == pytest.approx(s["gbps"] / 5000.0, abs=1e-4)
    assert s["repeats"] == 51
    assert bench.summarize([1.0], 1000)["frac_of_copy"] is None


def test_repeats_shrink_for_slow_calls_only():
    assert bench.repeats_for(50e-6, 50) == 50
    assert bench.repeats_for(0.1, 50, budget_s=2.0) == 20
    assert bench.repeats_for(5.0, 50) == bench.MIN_REPEATS


def test_byte_counts():
    assert bench.rope_bytes(4096, 512) == 2 * 4096 * 512 * 4 + 4096 * 4
    assert bench.qk_bytes(4096, 24, 24, 128, 2) == 2 * 4096 * 48 * 128 * 2
    assert bench.flush_bytes(60 * 2**20) == 2**30
    assert bench.flush_bytes(300 * 2**20) == 1200 * 2**20
    assert bench.per_launch_us(0.05, 2000) == pytest.approx(25.0)


def test_the_sweep_covers_seed_gigabyte_and_production_shapes():
    shapes = bench.shapes_for(["all"])
    plain = [(s.tokens, s.hidden) for s in shapes if not s.fused]
    assert set(bench.SEED_SHAPES) <= set(plain)
    assert any(s.bytes_moved >= 1e9 for s in shapes)
    fused = {s.label for s in shapes if s.fused}
    assert {"flux_1024", "qwen_image_1024"} <= fused
    with pytest.raises(ValueError):
        bench.shapes_for(["huge"])


def test_rows_have_the_record_columns_in_order():
    shape = bench.plain_shape(4096, 512)
    row = bench.make_row("flat", "numba", shape, True, bench.summarize([8.0, 9.0], shape.bytes_moved, 2000.0))
    assert tuple(row) == bench.BENCH.columns
    assert row["shape"] == "4096x512" and row["hidden"] == 512 and row["heads_q"] is None


def test_host_fields_flag_launches_slower_to_enqueue_than_the_fill():
    ok = bench.host_fields([40.0, 50.0, 60.0], fill_us=300.0)
    assert ok == {"host_us": 50.0, "fill_us": 300.0, "host_bound": False}
    assert bench.host_fields([250.0, 260.0, 270.0], fill_us=300.0)["host_bound"] is True
    assert bench.host_fields([], fill_us=300.0)["host_bound"] is None


@pytest.mark.skipif(not ropelab.SIMULATED, reason="checks the simulator refusal")
def test_timer_refuses_on_the_simulator():
    with pytest.raises(bench.BenchError, match="simulator"):
        bench.Timer()
    with pytest.raises(bench.BenchError, match="simulator"):
        bench.launch_overhead()


def test_method_text_names_the_protocol_then_what_the_bench_adds():
    from types import SimpleNamespace

    timer = SimpleNamespace(l2_bytes=60 * 2**20, flush_bytes=512 * 2**20, warmup=5, repeats=50)
    text = bench.method_text(timer)
    for word in ("CUDA events", "512 MiB", "60 MiB", "warm-up", "median", "copy", "50 timed"):
        assert word in text
    more = bench.method_text(timer, "vs_x = a / b", "c", repeats=7)
    assert more.startswith("CUDA events") and "up to 7 timed repeats" in more
    assert more.endswith("the GPU may have idled inside the events); vs_x = a / b; c")
    assert bench.method_text(None, "only this") == "only this"


class FakeTimer:
    """Runs each launcher once (on the simulator) and returns made-up samples."""

    def __init__(self, table):
        self.table = table  # launcher name -> samples
        self.calls = []

    def time(self, launch):
        launch()
        name = getattr(launch, "__self__", None)
        key = "copy" if name is not None else "kernel"
        self.calls.append(key)
        return self.table[key]


def test_sweep_times_every_variant_against_the_same_copy():
    shape = bench.Shape("tiny", 3, hidden=10)  # 15 pairs: no block size divides it
    timer = FakeTimer({"copy": [2.0, 2.0, 2.0], "kernel": [4.0, 5.0, 6.0]})
    entries = [bench.copy_entry()] + bench.variant_entries()
    result = bench.sweep([shape], entries, timer=timer, progress=False)
    assert not result.skipped, result.skipped
    names = [r["variant"] for r in result.rows]
    # Each variant twice: the public call (as a user calls it) and the kernel alone; the cos/sin
    # cache of freq_table too.
    want = ["copy_d2d"]
    for v in kernels.VARIANTS:
        for label in [v] + ([v + ":cache"] if v == "freq_table" else []):
            want += [label, label + ":kernel"]
    assert names == want
    assert [r["family"] for r in result.rows[1:3]] == ["ropelab", "kernel"]
    copy = result.rows[0]
    assert copy["frac_of_copy"] == pytest.approx(1.0)
    for r in result.rows[1:]:
        assert r["median_us"] == 5.0
        assert r["frac_of_copy"] == pytest.approx(0.4, abs=1e-3)
        assert r["copy_gbps"] == copy["gbps"]
    assert timer.calls[0] == "copy"


def test_sweep_launchers_compute_rope_on_premade_device_arrays():
    from ropelab import reference

    shape = bench.Shape("tiny", 3, hidden=10)
    buf = bench.Buffers(shape)
    want = reference.rope(buf.x.copy_to_host().reshape(3, 10), np.arange(3))
    entries = bench.variant_entries()
    assert len(entries) == 2 * len(kernels.VARIANTS) + 2
    for entry in entries:
        buf.out.copy_to_device(np.zeros(30, np.float32))
        entry.make(buf)()
        got = buf.out.copy_to_host().reshape(3, 10)
        assert np.abs(got - want).max() < 1e-5, entry.name


def test_sweep_reports_skips_instead_of_hiding_them():
    shape = bench.Shape("tiny", 3, hidden=10)
    timer = FakeTimer({"copy": [2.0], "kernel": [4.0]})

    def broken(buf):
        raise RuntimeError("no such feature")

    entries = [bench.copy_entry(), bench.Entry("broken", "numba", broken)]
    result = bench.sweep([shape], entries, timer=timer, progress=False)
    assert [r["variant"] for r in result.rows] == ["copy_d2d"]
    assert result.skipped == [("broken", "tiny", "RuntimeError: no such feature")]
    spent = bench.sweep([shape], entries, timer=timer, progress=False, budget_s=-1)
    assert spent.rows == [] and all(s[2] == "time budget spent" for s in spent.skipped)


def test_plan_lists_copy_variants_and_only_importable_baselines():
    from ropelab.measure import baselines

    names = [e.name for e in bench.plan(baselines=True)]
    assert names[0] == "copy_d2d"
    assert set(kernels.VARIANTS) <= set(names)
    have = baselines.available()
    assert ("cuda_flat" in names) == bool(have["cupy"])
    assert ("torch_compile" in names) == bool(have["torch"])
    groups = [e.group for e in bench.plan(baselines=True)]
    assert groups == sorted(groups)


def test_format_rows_prints_one_line_per_row():
    shape = bench.plain_shape(4096, 512)
    rows = [bench.make_row(n, "numba", shape, True, bench.summarize([8.0], shape.bytes_moved, 2000.0))
            for n in ("flat", "block2d")]
    text = bench.format_rows(rows)
    assert len(text.splitlines()) == 4 and "4096x512" in text


def test_fused_entry_runs_the_fused_kernel_on_a_tiny_qkv():
    if not getattr(kernels, "FUSED", None):
        pytest.skip("no fused kernel registered")
    shape = bench.Shape("tiny_fused", 2, heads_q=1, heads_k=1, head_dim=64, dtype="float32",
                        heads_v=1, rotary_dim=64)
    timer = FakeTimer({"copy": [2.0], "kernel": [3.0]})
    result = bench.sweep([shape], [bench.copy_entry()] + bench.fused_entries(), timer=timer,
                         progress=False)
    assert not result.skipped, result.skipped
    fused_rows = [r for r in result.rows if r["family"] in ("ropelab_fused", "kernel_fused")]
    # The public call at its default, the kernel alone, the NeoX layout, the two controlled
    # kernel rows, the cache path, and the public call at every heads-per-warp setting.
    assert [r["variant"] for r in fused_rows] == [
        "fused_qknorm_rope", "fused_qknorm_rope:kernel", "fused_qknorm_rope:neox",
        "fused_qknorm_rope:neox_shuffle", "fused_qknorm_rope:1token_blocks",
        "fused_qknorm_rope:cache", "fused_qknorm_rope_1head",
        "fused_qknorm_rope_2heads", "fused_qknorm_rope_4heads"]
    assert fused_rows[0]["bytes_moved"] == bench.qk_bytes(2, 1, 1, 64, 4)
    assert fused_rows[0]["frac_of_copy"] == pytest.approx(2 / 3, abs=1e-3)


def test_target_summary_reads_the_targets_off_the_rows():
    big, seed = bench.plain_shape(32768, 4096), bench.plain_shape(4096, 512)
    fused = bench.Shape("flux_1024", 4096, heads_q=24, heads_k=24, head_dim=128, dtype="bfloat16")

    def row(name, family, shape, us, copy_gbps):
        return bench.make_row(name, family, shape, True, bench.summarize([us], shape.bytes_moved, copy_gbps))

    copy_big = bench.gbps(big.bytes_moved, 250.0)
    rows = [row("flat", "numba", big, 300.0, copy_big), row("pack4", "numba", big, 260.0, copy_big),
            row("cuda_float4", "cuda_cpp", big, 250.0, copy_big),
            row("pack4", "numba", seed, 9.0, 3000.0), row("cuda_float4", "cuda_cpp", seed, 6.0, 3000.0),
            row("fused_qknorm_rope", "numba_fused", fused, 40.0, bench.gbps(fused.bytes_moved, 30.0))]
    text = "\n".join(bench.target_summary(rows))
    assert "best plain RoPE at 32768x4096: pack4 96.2% of copy" in text
    assert "pack4 / cuda_float4: worst time ratio 1.500 at 4096x512" in text
    assert "fused_qknorm_rope flux_1024 bfloat16: 75.0% of copy" in text


def test_fused_rows_can_be_picked_by_name():
    # A short GPU call times a few rows and the twins; "fused_qknorm_rope" still means all.
    everything = [e.name for e in bench.fused_entries(["fused_qknorm_rope"])]
    assert len(everything) > 3 and everything[0] == "fused_qknorm_rope"
    picked = [e.name for e in bench.fused_entries(["fused_qknorm_rope:default",
                                                    "fused_qknorm_rope:neox"])]
    assert picked == ["fused_qknorm_rope", "fused_qknorm_rope:neox"]
    assert bench.fused_entries(["flat"]) == []
    names = [e.name for e in bench.plan(["fused_qknorm_rope:neox"], baselines=False)]
    assert names == ["copy_d2d", "fused_qknorm_rope:neox"]
