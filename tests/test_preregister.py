"""scripts/preregister_predictions.py writes a held-out set's predicted H200 times before the set
is timed: one row per entry, a prediction with its range for each kernel the grader passes, and
the refusal for one it does not (so a wrong kernel never gets a prediction to compare)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("preregister",
                                              ROOT / "scripts" / "preregister_predictions.py")
preregister = importlib.util.module_from_spec(spec)
spec.loader.exec_module(preregister)

LEARNER = '''
from numba import cuda


@cuda.jit
def copy_all(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


@cuda.jit
def copy_half(x, out):
    i = cuda.grid(1)
    if i < x.size // 2:
        out[i] = x[i]


ENTRIES = [("00.1", "copy_all", copy_all), ("00.1", "copy_half", copy_half)]
'''


def test_each_passing_kernel_gets_a_prediction_and_a_wrong_one_none(tmp_path, capsys):
    (tmp_path / "learner_00.py").write_text(LEARNER)
    assert preregister.main([str(tmp_path)]) == 0
    (table,) = tmp_path.glob("predicted-*.tsv")
    lines = table.read_text().splitlines()
    assert lines[0].startswith("# predicted by data/predict/predict-") and "before any GPU run" in lines[0]
    rows = {r.split("\t")[2]: r.split("\t") for r in lines[2:]}
    assert set(rows) == {"copy_all", "copy_half"}
    good, bad = rows["copy_all"], rows["copy_half"]
    assert good[3] == "pass" and 0 < float(good[5]) < float(good[4]) < float(good[6])
    assert bad[3] == "refused" and bad[4] == ""


def test_a_check_compares_its_rows_with_the_registered_predictions(tmp_path):
    from ropelab.grader.predict import record

    table = tmp_path / "predicted-20260101T000000.tsv"
    table.write_text("# predicted by data/predict/predict-x.json at commit abc, before any GPU "
                     "run\n"
                     "module\tstep\tlabel\tgrade\tpredicted_us\tlow_us\thigh_us\tcase or note\n"
                     "learner_00.py\t00.1\tcopy_all\tpass\t10.00\t9.00\t11.00\tcase\n"
                     "learner_00.py\t00.1\tcopy_half\trefused\t\t\t\twrong\n"
                     "learner_00.py\t00.2\tguarded\tpass\t20.00\t18.00\t22.00\tcase\n")
    lines = [{"key": "s/learner_00/0", "label": "copy_all", "model_us": 10.001,
              "measured_us": 10.5},
             {"key": "s/learner_00/2", "label": "guarded", "model_us": 25.0,
              "measured_us": 23.0}]
    got = record.registered(table, lines)
    assert got["rows"] == 2 and got["equal"] == 1 and got["inside_range"] == 1
    assert "commit abc" in got["header"]
    # a row whose label differs from the registered one at its place is not compared
    moved = [{**lines[0], "label": "other"}]
    assert record.registered(table, moved)["rows"] == 0


def test_the_header_names_the_gpu_runs_of_the_set_already_on_record(tmp_path):
    folder = tmp_path / "heldout" / "set_z"
    folder.mkdir(parents=True)
    predict_dir = tmp_path / "data" / "predict"
    (predict_dir / "h100").mkdir(parents=True)
    assert preregister.provenance(folder, predict_dir) == "before any GPU run of this set"
    (predict_dir / "h100" / "timings-set_z-20260101T000000.csv").write_text("")
    (predict_dir / "timings-set_zz-20260101T000000.csv").write_text("")  # another set's
    said = preregister.provenance(folder, predict_dir)
    assert said.startswith("after the GPU runs of this set on record")
    assert "data/predict/h100/timings-set_z-20260101T000000.csv" in said and "set_zz" not in said
