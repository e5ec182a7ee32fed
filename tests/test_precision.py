"""ropelab.measure.precision: buckets and aggregation (by hand), the measurement's structure on the
simulator (its numbers mean nothing there), and the refusal to record simulator data.

Budget: about 10 s (the CLI test starts one Python process).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import ropelab
from ropelab.measure import precision, records


def test_buckets_are_contiguous_powers_of_two_up_to_131072():
    b = precision.position_buckets(131072)
    assert b[:4] == [(0, 0), (1, 1), (2, 3), (4, 7)]
    assert b[-2:] == [(65536, 131071), (131072, 131072)]  # a power of two gets its own bucket
    assert all(hi + 1 == lo for (_, hi), (lo, _) in zip(b[:-1], b[1:]))
    assert precision.position_buckets(100)[-1] == (64, 100)
    assert precision.position_buckets(1) == [(0, 0), (1, 1)]


def test_sampled_positions_are_distinct_and_keep_both_ends():
    buckets = precision.position_buckets(5000)
    pos = precision.sample_positions(buckets, 6, np.random.default_rng(0))
    assert len(np.unique(pos)) == len(pos) and pos.dtype == np.int32
    for lo, hi in buckets:
        inside = pos[(pos >= lo) & (pos <= hi)]
        assert lo in inside and hi in inside and len(inside) == min(6, hi - lo + 1)


def test_bucket_errors_by_hand():
    pos = np.array([0, 1, 2, 3, 9])
    err = np.array([[0.0, 0.0], [1.0, 3.0], [2.0, 0.0], [4.0, 2.0], [5.0, 5.0]])
    rows = precision.bucket_errors(pos, err, [(0, 0), (1, 1), (2, 3), (4, 7), (8, 15)])
    assert [(r["pos_lo"], r["samples"], r["max_abs_err"], r["mean_abs_err"]) for r in rows] == [
        (0, 1, 0.0, 0.0), (1, 1, 3.0, 2.0), (2, 2, 4.0, 2.0), (8, 1, 5.0, 5.0)]  # (4,7) is empty


@pytest.mark.parametrize("variant, options", [("freq_table", {"cache": True}), ("pair_sincos", {}),
                                              ("flat", {})])
def test_position_error_rows(variant, options):
    rows = precision.position_error(variant, options=options, head_dim=8, max_position=64,
                                    samples_per_bucket=3)
    assert [(r["pos_lo"], r["pos_hi"]) for r in rows] == precision.position_buckets(64)
    for r in rows:
        assert r["variant"] == variant and r["fastmath"] is True
        assert 0 <= r["mean_abs_err"] <= r["max_abs_err"] < 1e-3 * r["max_abs_x"]
    assert rows[0]["max_abs_err"] == 0.0  # position 0 is the identity in every variant


def test_position_error_sees_a_wrong_kernel(monkeypatch):
    real = precision.rope
    monkeypatch.setattr(precision, "rope", lambda x, **kw: real(x, **kw) * np.float32(1.01))
    rows = precision.position_error("flat", head_dim=4, max_position=8, samples_per_bucket=2)
    assert min(r["max_abs_err"] for r in rows) > 1e-3


def test_verdict_names_the_first_failing_bucket_and_the_accurate_path():
    def row(lo, err, variant="flat"):
        return dict(variant=variant, options="-", scaling="-", fastmath=True, pos_lo=lo,
                    max_abs_err=err, max_abs_x=2.0)

    rows = [row(1, 1e-6), row(1024, 4e-3), row(64, 1e-4), row(1, 1e-7, "freq_table")]
    v = {r["variant"]: r for r in precision.long_context_verdict(rows, threshold=1e-3)}
    assert v["flat"]["fails_from"] == 1024 and v["flat"]["worst_rel_err"] == 2e-3
    assert "cache=True" in v["flat"]["advice"] and "reduce_angle=True" in v["flat"]["advice"]
    assert v["freq_table"]["fails_from"] is None


def test_default_cases_cover_every_variant_and_the_accurate_modes():
    cases = precision.default_cases()
    assert {c[0] for c in cases} == set(ropelab.kernels.VARIANTS)
    assert ("freq_table", {"cache": True}, None) in cases
    assert ("freq_table", {"reduce_angle": True}, None) in cases


def test_freq_drift_rows_structure():
    rows = precision.freq_drift(rotary_dim=16, chunks=(1, 4), position=1000)
    assert len(rows) == 2 * 8
    # 8 pairs, 4 per thread: 2 threads, thread t owns pairs t, t + 2, t + 4, t + 6
    assert [r["steps"] for r in rows if r["chunk"] == 4] == [0, 0, 1, 1, 2, 2, 3, 3]
    for r in rows:
        if r["chunk"] == 1:
            assert r["rel_err_recurrence"] == r["rel_err_pow"]
        assert r["angle_err_pow_rad"] == pytest.approx(r["rel_err_pow"] * r["inv_freq"] * 1000)


def test_sincos_error_rows_structure():
    rows = precision.sincos_error(max_exponent=2, per_decade=8)
    assert [r["angle_lo"] for r in rows] == pytest.approx([0.1, 1.0, 10.0])
    assert all(r["max_abs_err_sin"] >= r["mean_abs_err_sin"] >= 0 for r in rows)


@pytest.mark.skipif(not ropelab.SIMULATED, reason="the refusal is the simulator's")
def test_record_precision_refuses_the_simulator_before_measuring(tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "precision_by_position",
                        lambda **kw: pytest.fail("measured on the simulator"))
    with pytest.raises(records.RecordError, match="simulator"):
        precision.record_precision(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not ropelab.SIMULATED, reason="the refusal is the simulator's")
def test_cli_precision_refuses_the_simulator(tmp_path):
    env = dict(os.environ, ROPELAB_QUIET="1")
    r = subprocess.run([sys.executable, "-m", "ropelab", "precision", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "simulator" in r.stderr
    assert list(tmp_path.iterdir()) == []
