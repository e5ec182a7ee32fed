"""The schema of recorded data: what records.save writes, what load accepts, and the files
committed under data/."""

import csv
import json
from pathlib import Path

import pytest

from ropelab.measure import bench, census as ptx, records

DATA = Path(records.DATA_DIR)


def fake_meta(**extra):
    # A hand-made GPU provenance block: tests may write records to tmp dirs, never to data/.
    meta = {"target": "gpu", "reason": "test", "gpu": "NVIDIA H200", "compute_capability": "9.0",
            "driver": "580.00", "cuda_driver_api": "13.0", "numba": "0.68.1",
            "numba_cuda": "0.30.4", "numpy": "2.4.6", "python": "3.12", "date": "2026-01-02T03:04:05Z"}
    meta.update(extra)
    return meta


def bench_rows():
    shape = bench.plain_shape(4096, 512)
    return [bench.make_row(n, "numba", shape, True, bench.summarize([8.0, 9.0, 10.0], shape.bytes_moved, 2500.0))
            for n in ("flat", "block2d")]


def test_save_and_load_round_trip(tmp_path):
    path = records.save("bench", bench_rows(), method="synthetic", meta=fake_meta(), directory=tmp_path)
    assert path.name == "bench-nvidia-h200-20260102T030405.json"
    later = records.save("bench", bench_rows(), method="later", directory=tmp_path,
                         meta=fake_meta(date="2026-01-02T09:00:00Z"))
    assert later != path and path.exists()  # a second run on the same day keeps the first
    assert records.load("bench", tmp_path)["method"] == "later"
    later.unlink()
    later.with_suffix(".csv").unlink()
    rec = records.load("bench", tmp_path)
    assert rec["schema"] == records.SCHEMA and rec["method"] == "synthetic"
    assert tuple(rec["columns"]) == bench.BENCH.columns
    assert rec["rows"] == bench_rows()
    with open(path.with_suffix(".csv")) as fh:
        assert tuple(next(csv.reader(fh))) == bench.BENCH.columns


def test_simulator_measurements_are_refused():
    with pytest.raises(records.RecordError, match="simulator"):
        records.metadata()
    with pytest.raises(records.RecordError):
        records.validate_meta(fake_meta(target="simulator"))


def test_load_rejects_broken_records(tmp_path):
    path = records.save("bench", bench_rows(), method="m", meta=fake_meta(), directory=tmp_path)
    rec = json.loads(path.read_text())
    rec["rows"][1].pop("median_us")
    path.write_text(json.dumps(rec))
    with pytest.raises(records.RecordError, match="row 1"):
        records.load("bench", tmp_path)
    rec = json.loads(path.read_text())
    del rec["meta"]["driver"]
    with pytest.raises(records.RecordError, match="driver"):
        records.validate(rec)


def _committed(kind):
    return sorted((DATA / kind).glob(f"{kind}-*.json"))


@pytest.mark.parametrize("path", _committed("bench"), ids=lambda p: p.name)
def test_committed_bench_records_follow_the_schema(path):
    rec = records.validate(json.loads(path.read_text()))
    assert tuple(rec["columns"]) == bench.BENCH.columns
    assert "L2" in rec["method"] and "events" in rec["method"]
    for row in rec["rows"]:
        assert row["p20_us"] <= row["median_us"] <= row["p80_us"]
        assert row["gbps"] == pytest.approx(bench.gbps(row["bytes_moved"], row["median_us"]), rel=1e-3)


@pytest.mark.parametrize("path", _committed("launch_overhead"), ids=lambda p: p.name)
def test_committed_overhead_records_follow_the_schema(path):
    rec = records.validate(json.loads(path.read_text()))
    assert rec["columns"] == ["launcher", "kernel_args", "launches", "us_per_launch",
                              "us_per_launch_synced"]


def test_committed_census_if_any_has_rows_and_versions():
    if not ptx.DATA_FILE.exists():
        pytest.skip("no committed census yet")
    doc = json.loads(ptx.DATA_FILE.read_text())
    assert {"key", "cc", "versions", "rows"} <= set(doc)
    for r in doc["rows"]:
        assert {"variant", "kernel", "fastmath", "shipped", "error"} <= set(r)
