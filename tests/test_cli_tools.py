"""``python -m ropelab census`` and ``bench`` as a user runs them, on the simulator."""

import json
import os
import subprocess
import sys

from test_records import bench_rows, fake_meta

from ropelab.measure import records


def cli(*args, env=None):
    env = dict(os.environ, ROPELAB_QUIET="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "ropelab", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_census_prints_the_table_and_json(tmp_path, census_doc):
    # The user cache holds the session's census (conftest.census_doc), as the committed
    # data/census/census.json does whenever it is current: the CLI is served from it instead of
    # compiling every kernel again.  The compile itself is checked in test_ptx.
    (tmp_path / f"census-{census_doc['key']}.json").write_text(json.dumps(census_doc))
    env = {"ROPELAB_CACHE": str(tmp_path)}
    r = cli("census", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split()[:2] == ["variant", "kernel"]
    assert any(line.startswith("flat ") for line in lines)
    r = cli("census", "--json", "--save", str(tmp_path / "c.json"), env=env)  # served from cache
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["cc"] == "9.0" and doc["rows"]
    assert json.loads((tmp_path / "c.json").read_text())["key"] == doc["key"]


def test_bench_refuses_on_the_simulator_without_a_time():
    r = cli("bench", "--shapes", "seed")
    assert r.returncode == 2
    assert "simulator" in r.stderr
    assert r.stdout == ""


def test_bench_recorded_prints_and_plots_a_record(tmp_path):
    records.save("bench", bench_rows(), method="synthetic method", meta=fake_meta(),
                 directory=tmp_path / "bench")
    r = cli("bench", "--recorded", "--out", str(tmp_path), "--charts-dir", str(tmp_path / "png"))
    assert r.returncode == 0, r.stderr
    assert "NVIDIA H200" in r.stdout and "synthetic method" in r.stdout
    assert sum(line.startswith(("flat ", "block2d ")) for line in r.stdout.splitlines()) == 2
    pngs = sorted(p.name for p in (tmp_path / "png").glob("*.png"))
    assert pngs == ["bench-roof.png", "bench-time.png", "bench-twins.png"]
    assert all((tmp_path / "png" / p).stat().st_size > 5000 for p in pngs)


def test_bench_recorded_without_data_fails_clearly(tmp_path):
    r = cli("bench", "--recorded", "--out", str(tmp_path))
    assert r.returncode == 1
    assert "no recorded 'bench' data" in r.stderr
