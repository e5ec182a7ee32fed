"""The predicted-H200-time model: reproducible from the records, honest about its error.

Reads the committed records and census caches only (no compile, no GPU).
"""

import json
import math

import pytest

from ropelab import resources
from ropelab.measure.predict import features, model, predict_h200, record, recorded_fit, sources


@pytest.fixture(scope="module")
def recomputed():
    return record.compute()


@pytest.fixture(scope="module")
def stored():
    return recorded_fit()


STALE = ("data/predict is stale (new records or census caches?): run "
         "python -m ropelab.measure.predict --record, then python scripts/notebooks/build.py 07")


def test_the_fit_is_reproducible_from_the_records(recomputed, stored):
    assert recomputed["meta"]["sources"] == stored["meta"]["sources"], STALE
    assert recomputed["rows"] == stored["rows"], STALE
    got, kept = recomputed["meta"]["constants"], stored["meta"]["constants"]
    assert got["train_kernels"] == kept["train_kernels"]
    assert got["intercept"] == pytest.approx(kept["intercept"], rel=1e-9, abs=1e-12)
    for name, weight in kept["weights"].items():
        assert got["weights"][name] == pytest.approx(weight, rel=1e-9, abs=1e-12)
    assert recomputed["meta"]["swapped_halves"] == stored["meta"]["swapped_halves"]


def test_the_records_errors_match_a_recomputation_from_its_rows(stored):
    rows = stored["rows"]
    for r in rows:  # each error is its prediction against the recorded time
        assert r["model_error"] == pytest.approx(r["model_us"] / r["recorded_us"] - 1, abs=2e-4)
        assert r["trivial_error"] == pytest.approx(r["trivial_us"] / r["recorded_us"] - 1,
                                                   abs=2e-4)
    summary = model.summary(rows)
    kept = stored["meta"]["summary"]
    for key in ("test_model_max", "test_model_mean", "test_trivial_max", "test_trivial_mean",
                "test_mean_ratio", "misses", "goal_max_met", "goal_mean_met"):
        assert summary[key] == kept[key], key


def test_training_uses_at_most_half_the_rows_and_whole_kernels(stored):
    rows = stored["rows"]
    train = [r for r in rows if r["split"] == "train"]
    assert 0 < len(train) <= len(rows) / 2
    split_of = {}
    for r in rows:  # a kernel is wholly in one half
        assert split_of.setdefault(r["kernel"], r["split"]) == r["split"]


def test_the_trivial_model_is_the_fixed_fraction_fitted_on_the_training_rows(stored):
    fraction = stored["meta"]["constants"]["trivial_fraction_of_copy"]
    train = [r for r in stored["rows"] if r["split"] == "train"]
    mean_log = sum(math.log(r["recorded_us"] / r["copy_us"]) for r in train) / len(train)
    assert fraction == pytest.approx(math.exp(-mean_log), rel=1e-9)


def test_a_model_that_ignores_access_width_fails_the_goal():
    rows, _, _ = sources.gather()
    planted = model.fit(rows, names=tuple(n for n in features.NAMES if n != "scalar"))
    real = model.fit(rows)
    planted_summary = model.summary(model.evaluate(rows, planted))
    real_summary = model.summary(model.evaluate(rows, real))
    assert not planted_summary["goal_mean_met"]
    assert planted_summary["test_model_mean"] > real_summary["test_model_mean"]
    assert len(planted_summary["misses"]) > len(real_summary["misses"])


def test_every_held_out_miss_is_listed(stored):
    listed = stored["meta"]["summary"]["misses"]
    beyond = [r for r in stored["rows"]
              if r["split"] == "test" and abs(r["model_error"]) > model.GOAL_MAX_ERROR]
    assert len(listed) == len(beyond)
    for r in beyond:
        assert any(m.startswith(f"{r['kernel']}@{r['shape']}") for m in listed)


def _learner_census():
    entries = json.loads((sources.CENSUS_DIR / "exercises.json").read_text())["entries"]
    return next(e for e in entries.values() if not e.get("error") and e.get("st_global"))


def test_prediction_works_on_a_learner_kernels_census():
    census = _learner_census()
    assert "sass_schedule" not in census  # a learner's census is PTX counts only
    bytes_moved = 67141632  # 8192 x 1024 float32, in and out, plus positions
    copy = record.predict_from_curve(recorded_fit()["meta"]["copy_curve"], bytes_moved)
    t = predict_h200(census, bytes_moved)
    assert copy < t < 2 * copy
    wide = dict(census, ld_global={"128": 1, "32": 1}, st_global={"128": 1})
    assert predict_h200(wide, bytes_moved) < t  # 128-bit accesses predict faster


def test_prediction_uses_the_launch_when_given():
    census = dict(_learner_census(), ld_global={"32": 3}, st_global={"32": 2},
                  sass_schedule={"max_loads_in_flight": 2})
    one_pass = predict_h200(census, 67141632, grid=(16384, 1, 1), block=(256, 1, 1))
    eight_passes = predict_h200(census, 67141632, grid=(2048, 1, 1), block=(256, 1, 1))
    assert eight_passes < one_pass  # the serial wait is paid once per thread, over more pairs


def test_a_census_without_memory_accesses_is_refused():
    with pytest.raises(ValueError, match="no global loads or stores"):
        predict_h200({"instructions": 10, "ld_global": {}, "st_global": {}}, 1000)
    with pytest.raises(ValueError, match="bytes_moved"):
        predict_h200(_learner_census(), 0)


def test_the_copy_curve_returns_the_recorded_copies_and_keeps_bandwidth_beyond():
    curve = recorded_fit()["meta"]["copy_curve"]
    for size, us in curve:
        assert record.predict_from_curve(curve, size) == pytest.approx(us)
    (size, us) = curve[-1]
    assert record.predict_from_curve(curve, 2 * size) == pytest.approx(2 * us)


def test_notebook_07_names_every_kernel_the_model_misses(stored):
    """07 explains each held-out miss by name: a new record with other misses fails this until
    the prose is rewritten (the numbers themselves are rendered from the record)."""
    import jupytext

    source = (resources.notebook_sources() / "07_measuring_honestly.py")
    prose = "\n".join(c.source for c in jupytext.read(source).cells if c.cell_type == "markdown")
    assert "{{ predict.misses }}" in prose
    for miss in stored["meta"]["summary"]["misses"]:
        kernel = miss.split("@", 1)[0]
        assert f"`{kernel}`" in prose, f"07 does not explain the miss {miss}"


def test_explain_takes_the_prediction_apart_exactly():
    from ropelab.measure.predict import explain_h200

    census = _learner_census()
    why = explain_h200(census, 33570816, grid=(16384, 1, 1), block=(64, 1, 1))
    assert why["us"] == pytest.approx(why["copy_us"] * math.prod(why["factors"].values()))
    assert why["us"] == pytest.approx(predict_h200(census, 33570816, grid=(16384, 1, 1),
                                                   block=(64, 1, 1)))
    assert set(why["factors"]) == {"base", *features.NAMES}
