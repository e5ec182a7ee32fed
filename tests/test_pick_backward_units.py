"""scripts/pick_backward_units.py: the sweep's fastest units per pass, compared like with like."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pick_backward_units.py"


def _record(path, rows):
    path.write_text(json.dumps({"rows": [
        {"entry": e, "shape": s, "layout": "gptj", "dtype": "bfloat16", "median_us": t}
        for e, s, t in rows]}))
    return str(path)


def _pick(*paths):
    return subprocess.run([sys.executable, str(SCRIPT), "--table", *paths], capture_output=True,
                          text=True, timeout=60)


def test_the_least_geometric_mean_on_the_cases_every_build_was_timed_on_wins(tmp_path):
    rows = [("ropelab:bwd:kernel:u1", "a", 100.0), ("ropelab:bwd:kernel:u1", "b", 100.0),
            ("ropelab:bwd:kernel:u2", "a", 90.0), ("ropelab:bwd:kernel:u2", "b", 120.0),
            ("ropelab:bwd:kernel:u3", "a", 99.0),  # faster where timed, but b is missing
            ("ropelab:bwd:kernel:u1:blocks264", "a", 10.0),  # a cap: tabled, never picked
            ("ropelab:bwd:kernel", "a", 1.0)]  # not a sweep row
    done = _pick(_record(tmp_path / "r.json", rows))
    assert done.returncode == 0, done.stderr
    # on case a alone (the one every build has): u1 100, u2 90, u3 99
    assert done.stdout.strip() == "2"
    assert "u1 blocks264     10.00 us" in done.stderr
    rows[2] = ("ropelab:bwd:kernel:u2", "a", 101.0)
    assert _pick(_record(tmp_path / "s.json", rows)).stdout.strip() == "3"


def test_records_without_sweep_rows_or_own_grids_are_refused_with_the_reason(tmp_path):
    none = _pick(_record(tmp_path / "n.json", [("ropelab:bwd:kernel", "a", 1.0)]))
    assert none.returncode != 0 and "no ropelab:bwd:kernel:uU rows" in none.stderr
    capped = _pick(_record(tmp_path / "c.json", [("ropelab:bwd:kernel:u1:blocks264", "a", 1.0)]))
    assert capped.returncode != 0 and "only capped rows" in capped.stderr
    apart = _pick(_record(tmp_path / "p.json", [("ropelab:bwd:kernel:u1", "a", 1.0),
                                                ("ropelab:bwd:kernel:u2", "b", 1.0)]))
    assert apart.returncode != 0 and "timed for every build" in apart.stderr
