"""``python -m ropelab profile`` without a GPU: the raw-CSV parser on a synthetic ncu export, the
row summary, case matching, the ncu plumbing against a fake ncu, the record and its table."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ropelab import kernels
from ropelab.measure import records
from ropelab.measure import cases, profile

FLAT = ("_ZN7ropelab7kernels4flat9rope_flatB2v1B116cw51cXTLSUwv1sDUaKthqaNgoKmjgEhasCBDCg1bcEAD"
        "E5ArrayIfLi1E1C7mutable7alignedE5ArrayIfLi1E1C7mutable7alignedEyxf")
FUSED = ("_ZN7ropelab7kernels17fused_qknorm_rope36fused_qknorm_rope_d128_gptj_bfloat16B2v1B9cw51cXTLSE"
         "5ArrayIjLi1E1C7mutable7alignedEjjjjjff")

STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC",
          "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
          "dram__throughput.avg.pct_of_peak_sustained_elapsed",
          "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
          "launch__registers_per_thread", "launch__block_size", "launch__grid_size",
          "launch__occupancy_limit_blocks", "launch__occupancy_limit_registers",
          "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps",
          "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
          "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
          "smsp__issue_active.avg.pct_of_peak_sustained_active",
          "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
          STALL.format("long_scoreboard"), STALL.format("selected"), STALL.format("wait"),
          STALL.format("lg_throttle"), STALL.format("no_instruction")]
UNITS = ["", "", "", "", "", "", "", "", "", "", "", "usecond", "Mbyte", "byte", "%", "%", "%",
         "register/thread", "", "", "block", "block", "block", "block", "", "sector", "", "sector",
         "%", "%", "inst", "inst", "inst", "inst", "inst"]
# Second launch first: the parser orders by ID.  Thousands separators as ncu prints them.
ROWS = [
    ["1", "42", "python3", "h200", FUSED, "1", "7", "(256, 1, 1)", "(4096, 6, 1)", "0", "9.0",
     "40.5", "100.5", "100,663,296", "70.1", "80", "100", "40", "256", "24,576",
     "32", "6", "16", "8", "1000", "4000", "500", "2000", "20.5", "12.5",
     "30.5", "1.0", "2.0", "0.5", "n/a"],
    ["0", "42", "python3", "h200", FLAT, "1", "7", "(256, 1, 1)", "(16384, 1, 1)", "0", "9.0",
     "10", "8.4", "8,400,000", "81.25", "88.8", "100", "16", "256", "16,384",
     "32", "16", "32", "8", "3000", "17000", "2000", "16000", "12.5", "3.25",
     "12", "0.9", "1.5", "3.5", "0.1"],
]


def synthetic_csv() -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL)
    for r in [HEADER, UNITS] + ROWS:
        w.writerow(r)
    return "==PROF== Connected to process\n" + buf.getvalue()


def test_short_kernel_names_from_mangled_and_demangled():
    assert profile.short_kernel_name(FLAT) == "rope_flat"
    assert profile.short_kernel_name(FUSED) == "fused_qknorm_rope_d128_gptj_bfloat16"
    assert profile.short_kernel_name("ropelab::kernels::flat::rope_flat[abi:v1](Array<float>)") == "rope_flat"
    assert profile.short_kernel_name("void copy_kernel<float>(float*, int)") == "copy_kernel"
    assert profile.short_kernel_name("_Z6squarePfi") == "square"


def test_units_are_converted_to_bytes_and_nanoseconds():
    assert profile.to_base(8.4, "Mbyte") == pytest.approx(8.4e6)
    assert profile.to_base(10.0, "usecond") == 10_000.0
    assert profile.to_base(3.0, "Gbyte/second") == 3e9
    assert profile.to_base(81.25, "%") == 81.25
    assert profile.to_number("8,400,000") == 8.4e6 and profile.to_number("n/a") == "n/a"


def test_raw_csv_parses_one_result_per_launch_in_id_order():
    results = profile.parse_raw_csv(synthetic_csv())
    assert [r["id"] for r in results] == [0, 1]
    assert [r["kernel"] for r in results] == ["rope_flat", "fused_qknorm_rope_d128_gptj_bfloat16"]
    m = results[0]["metrics"]
    assert m["gpu__time_duration.sum"] == 10_000.0  # ns
    assert m["dram__bytes_read.sum"] == pytest.approx(8.4e6)
    assert m["dram__bytes_write.sum"] == 8.4e6
    assert m["Block Size"] == "(256, 1, 1)"
    with pytest.raises(profile.ProfileError):
        profile.parse_raw_csv("no,header\n1,2\n")


def _case(expect, min_bytes=16_793_600, **kw):
    c = {"id": "flat@seed_4096x512", "group": "plain", "family": "numba", "name": "flat",
         "options": {}, "shape": "seed_4096x512", "dtype": "float32", "layout": "gptj",
         "min_bytes": min_bytes, "expect": expect}
    c.update(kw)
    return c


def test_summary_of_one_kernel():
    res = profile.parse_raw_csv(synthetic_csv())[0]
    row = profile.summarize(_case(["rope_flat"]), res, {"rope_flat": {"ld": "32x3", "st": "32x2"}})
    assert list(row) == list(profile.COLUMNS)
    assert row["duration_us"] == 10.0
    assert row["dram_gbps"] == pytest.approx(16.8e6 / 10_000, abs=0.1)  # bytes per ns = GB/s
    assert row["traffic_over_min"] == pytest.approx(16.8e6 / 16_793_600, abs=1e-3)
    assert row["dram_pct"] == 81.25
    assert row["ld_sectors_per_request"] == pytest.approx(17000 / 3000, abs=0.01)
    assert row["st_sectors_per_request"] == 8.0
    assert (row["blocks_per_sm"], row["block_limit"]) == (8, "warps")
    assert (row["stall_1"], row["stall_2"], row["stall_3"]) == ("long_scoreboard", "lg_throttle", "wait")
    assert row["stall_1_cycles"] == 12.0
    assert (row["ld_bits"], row["st_bits"]) == ("32x3", "32x2")
    assert row["registers"] == 16 and row["grid"] == 16384 and row["xu_pct"] == 3.25
    assert row["warp_cycles_per_issue"] is None  # not in this export: a gap, not a guess


def test_block_limit_names_every_limiter_at_the_minimum():
    assert profile.block_limit({"launch__occupancy_limit_warps": 8.0,
                                "launch__occupancy_limit_registers": 8.0,
                                "launch__occupancy_limit_blocks": 32.0}) == (8.0, "registers+warps")
    assert profile.block_limit({}) == (None, None)


def test_match_pairs_cases_with_results_and_refuses_a_mismatch():
    results = profile.parse_raw_csv(synthetic_csv())
    flat_case, fused_case = _case(["rope_flat"]), _case(["fused_qknorm_rope*"], id="f")
    assert len(profile.match([flat_case, fused_case], results)) == 2
    with pytest.raises(profile.ProfileError, match="cannot tell"):
        profile.match([flat_case], results)
    with pytest.raises(profile.ProfileError, match="rope_flat"):
        profile.match([fused_case, flat_case], results)


def test_ncu_command_keeps_clocks_and_filters_to_the_cases():
    group = [c for c in cases.plan(["controls"])]
    cmd = profile.ncu_command("ncu", Path("r.ncu-rep"), group, Path("p.json"), Path("m.jsonl"))
    joined = " ".join(cmd)
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--launch-count") + 1] == str(len(group))
    assert "rope_pack4_scalar_unhoisted" in cmd[cmd.index("--kernel-name") + 1]
    assert cmd[cmd.index("--kernel-name") + 1].startswith("regex:")
    assert "--section WarpStateStats" in joined and "--metrics" in cmd
    assert cmd[-4:] == ["-m", "ropelab.measure.cases", "p.json", "m.jsonl"]
    imp = profile.import_command("ncu", Path("r.ncu-rep"))
    assert imp[imp.index("--page") + 1] == "raw" and "--csv" in imp
    assert imp[imp.index("--print-units") + 1] == "base"


def test_metrics_the_gpu_lacks_are_dropped_not_requested():
    keep, dropped = profile.usable_metrics({m.split(".")[0] for m in profile.METRICS[1:]})
    assert dropped == [profile.METRICS[0]] and profile.METRICS[0] not in keep
    assert profile.usable_metrics(None) == (list(profile.METRICS), [])


def test_plan_covers_every_variant_control_and_fused_case_once():
    from ropelab.measure import controls

    plan = cases.plan()
    ids = [c["id"] for c in plan]
    assert len(ids) == len(set(ids))
    shapes = {s.name for s in cases.plain_shapes()}
    assert shapes == {"large_32768x4096", "seed_4096x512"}
    for name in kernels.VARIANTS:
        assert {c["shape"] for c in plan if c["group"] == "plain" and c["name"] == name} == shapes
    assert {c["options"].get("cache", False) for c in plan if c["name"] == "freq_table"} == {True, False}
    for name, e in controls.KERNELS.items():
        want = 0 if e.role == "reference" else 2
        assert sum(c["name"] == name for c in plan if c["group"] == "controls") == want
    fused = [c for c in plan if c["group"] == "fused"]
    assert {(c["dtype"], c["layout"]) for c in fused} == {(d, lay) for d in cases.FUSED_DTYPES
                                                          for lay in ("gptj", "neox")}
    assert len(fused) == 4 * 3 * 2
    bf16 = next(c for c in fused if c["dtype"] == "bfloat16" and c["shape"] == "flux_1024")
    assert bf16["min_bytes"] == 2 * 4096 * 48 * 128 * 2
    assert cases.accepts(bf16, "fused_qknorm_rope_d128_gptj_bfloat16_h2")
    assert not cases.accepts(_case(["rope_pack4"]), "rope_pack4_scalar")


# --------------------------------------------------------------------------------------------
# The ncu plumbing against a fake ncu: profile run writes the manifest and a report, import
# prints a raw CSV naming each planned case's kernel.
# --------------------------------------------------------------------------------------------

FAKE_NCU = textwrap.dedent("""\
    #!{python}
    import csv, json, sys
    args = sys.argv[1:]
    if "--version" in args:
        print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2099.1.0.0 (build 1)")
        sys.exit(0)
    if "--import" in args:
        plan = json.load(open(args[args.index("--import") + 1] + ".plan"))
        w = csv.writer(sys.stdout, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum"])
        w.writerow(["", "", "nsecond", "byte"])
        for i, c in enumerate(plan):
            w.writerow([str(i), "_ZN3lib" + str(len(c["expect"][0].rstrip("*"))) + c["expect"][0].rstrip("*") + "B2v1E", "1000", "5"])
        sys.exit(0)
    if "{mode}" == "unknown-metric" and "--metrics" in args:
        print("==ERROR== Failed to find metric dram__bytes_read.sum")
        sys.exit(1)
    if "--query-metrics" in args:
        sys.exit(1)
    plan_path, manifest = args[-2], args[-1]
    report = args[args.index("--export") + 1]
    plan = json.load(open(plan_path))
    if "{mode}" == "fail-fused" and plan[0]["group"] == "fused":
        print("==ERROR== The application returned an error code (1).")
        sys.exit(1)
    open(report + ".plan", "w").write(json.dumps(plan))
    open(report, "w").write("fake report")
    with open(manifest, "w") as m:
        for c in plan:
            m.write(json.dumps({{"id": c["id"], "ok": True}}) + "\\n")
    """)


def _fake_ncu(tmp_path, mode="ok"):
    path = tmp_path / f"ncu-{mode}"
    path.write_text(FAKE_NCU.format(python=sys.executable, mode=mode))
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("mode, config", [("ok", "sections+metrics"), ("unknown-metric", "sections")])
def test_profile_group_runs_ncu_and_matches_every_case(tmp_path, mode, config):
    group = cases.plan(["controls"])
    logs = []
    pairs, used = profile.profile_group(_fake_ncu(tmp_path, mode), group, tmp_path / "reports",
                                        metrics=list(profile.METRICS), timeout_s=60, log=logs.append)
    assert used == config
    assert [c["id"] for c, _ in pairs] == [c["id"] for c in group]
    assert (tmp_path / "reports" / "controls.csv").exists()
    assert (tmp_path / "reports" / "controls.log").read_text().startswith(str(tmp_path))
    assert profile.ncu_version(_fake_ncu(tmp_path)) == "2099.1.0.0"


def test_record_profile_saves_each_group_and_reports_a_failed_one(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "metadata", _gpu_meta)
    monkeypatch.setattr(profile.ncu, "census_widths", lambda: ({}, {"ptx": "k"}))  # as record_profile sees it
    logs = []
    path = profile.record_profile(["controls", "fused"], ncu=_fake_ncu(tmp_path, "fail-fused"),
                                  reports=tmp_path / "reports", out=tmp_path, log=logs.append)
    assert path.parent == tmp_path / "profile"
    rec = profile.load(tmp_path / "profile")
    groups = rec["meta"]["groups"]
    assert groups["controls"]["profiled"] == len(cases.plan(["controls"]))
    assert groups["fused"]["profiled"] == 0 and "error code" in groups["fused"]["error"]
    assert {r["group"] for r in rec["rows"]} == {"controls"}
    assert rec["meta"]["clock_control"] == "none" and rec["meta"]["ncu"] == "2099.1.0.0"
    assert rec["meta"]["census_keys"] == {"ptx": "k"}
    assert len(list((tmp_path / "profile").glob("profile-*.json"))) == 1  # one file per run
    assert any("error code" in line for line in logs)


def _gpu_meta():
    return {"target": "gpu", "gpu": "NVIDIA H200", "compute_capability": "9.0",
            "driver": "580.1", "cuda_driver_api": "13.0", "numba": "0.68.0",
            "numba_cuda": "0.30.4", "numpy": "2.4.6", "python": "3.12.0",
            "date": "2026-12-01T10:11:12Z", "ncu": "2099.1"}


def test_record_is_saved_without_overwriting_and_renders_as_a_table(tmp_path):
    results = profile.parse_raw_csv(synthetic_csv())
    rows = [profile.summarize(_case(["rope_flat"]), results[0]),
            profile.summarize(_case(["fused_qknorm_rope*"], id="fused_qknorm_rope[bfloat16,gptj]@flux_1024",
                                    group="fused", dtype="bfloat16"), results[1])]
    first = records.save("profile", rows, method="synthetic", meta=_gpu_meta(), directory=tmp_path)
    second = records.save("profile", rows, method="synthetic", meta=_gpu_meta(), directory=tmp_path)
    assert first.name == "profile-nvidia-h200-20261201T101112.json"
    assert second.name == "profile-nvidia-h200-20261201T101112-2.json" and first.exists()
    rec = profile.load(tmp_path)
    table = profile.profile_table(rec)
    assert "flat@seed_4096x512" in table and "long_scoreboard 12.0" in table
    assert "81.2" in table.splitlines()[2]  # DRAM % of the flat row
    only = profile.profile_table(rec, "fused")
    assert "flat@" not in only and "fused_qknorm_rope[bfloat16" in only
    again = records.save("profile", rows[:1], method="synthetic", meta=_gpu_meta(), replace=second)
    assert again == second and len(json.loads(second.read_text())["rows"]) == 1
    with pytest.raises(records.RecordError):
        records.save("profile", rows, method="x", meta=dict(_gpu_meta(), target="simulator"),
                   directory=tmp_path)


def test_plot_profile_draws_one_bar_per_case(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    results = profile.parse_raw_csv(synthetic_csv())
    rows = [profile.summarize(_case(["rope_flat"]), results[0])]
    rec = {"meta": _gpu_meta(), "rows": rows}
    fig = profile.plot_profile(rec)
    assert len(fig.axes[0].patches) == 1


def _cli(*args):
    env = dict(os.environ, ROPELAB_QUIET="1")
    return subprocess.run([sys.executable, "-m", "ropelab", "profile", *args], capture_output=True,
                          text=True, env=env, cwd=Path(__file__).resolve().parents[1])


@pytest.mark.skipif(not __import__("ropelab").SIMULATED, reason="the refusal is for the simulator")
def test_cli_refuses_on_the_simulator_in_one_line():
    r = _cli()
    assert r.returncode == 2
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "simulator" in r.stderr


def test_cli_lists_the_cases_anywhere():
    r = _cli("--list", "--groups", "plain", "--only", "^flat@")
    assert r.returncode == 0
    assert r.stdout.split() == ["plain", "flat@large_32768x4096", "plain", "flat@seed_4096x512"]


def test_child_refuses_on_the_simulator(tmp_path):
    if not __import__("ropelab").SIMULATED:
        pytest.skip("on a GPU the child launches")
    (tmp_path / "plan.json").write_text(json.dumps(cases.plan(["controls"])[:1]))
    assert cases.run_child(str(tmp_path / "plan.json"), str(tmp_path / "m.jsonl")) == 2
