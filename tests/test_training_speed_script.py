"""scripts/gpu_training_speed.py's dry run (CPU tensors through the simulator): every loop it
times on the GPU runs end to end here, and each row says what it timed or why it could not."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_training_speed  # noqa: E402


def test_the_dry_run_times_the_fused_and_the_rope_loops(tmp_path):
    assert gpu_training_speed.main(["--dry-run", "--out", str(tmp_path), "--only", "training",
                                    "--only", "rope_training"]) == 0
    rows = json.loads((tmp_path / "training_speed-dry-run.json").read_text())["rows"]
    assert not [r for r in rows if r["error"]]
    got = {(r["part"], r["op"], r["impl"]) for r in rows}
    assert {("training", "fused_qknorm_rope", "ropelab"),
            ("training", "fused_qknorm_rope", "empty_function"),
            ("rope_training", "rope", "ropelab"),
            ("rope_training", "rope", "empty_function")} <= got
    rope = [r for r in rows if r["part"] == "rope_training" and r["impl"] == "ropelab"][0]
    assert rope["bytes"] == 4 * 4 * 2 * 64 * 2  # forward x -> y, backward dy -> dx, bfloat16
    assert rope["wall_us_per_iter"] >= rope["host_us_per_iter"] > 0
