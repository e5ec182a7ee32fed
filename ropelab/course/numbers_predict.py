"""Numbers the prose quotes about the predicted-H200-time model (notebook 07), each read from
the ``data/predict/`` record (:mod:`ropelab.measure.predict.record`).  See
:mod:`ropelab.course.numbers`."""

from __future__ import annotations

from .numbers_core import Rendered, newest, number, pct


def _count_word(n: int) -> str:
    return {0: "no", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}.get(n, str(n))


def _summary():
    path, rec = newest("predict")
    return path, rec["meta"]["summary"]


def _pct_of(key: str, digits: int = 1):
    path, s = _summary()
    return Rendered(pct(s[key], digits), path)


for _key in ("test_model_max", "test_model_mean", "test_trivial_max", "test_trivial_mean",
             "train_model_max"):
    number(f"predict.{_key}_pct")(lambda k=_key: _pct_of(k))


@number("predict.mean_ratio")
def _():
    """The model's mean held-out error over the trivial model's, e.g. ``0.30``."""
    path, s = _summary()
    return Rendered(f"{s['test_mean_ratio']:.2f}", path)


@number("predict.held_out_rows")
def _():
    path, s = _summary()
    return Rendered(str(s["test_rows"]), path)


@number("predict.train_rows")
def _():
    path, s = _summary()
    return Rendered(str(s["train_rows"]), path)


@number("predict.misses")
def _():
    """The held-out rows beyond the goal, named with their error ("none" when there are none)."""
    path, s = _summary()
    misses = [m.replace(":float32", "") for m in s["misses"]]
    return Rendered("; ".join(misses) if misses else "none", path)


@number("predict.miss_count")
def _():
    path, s = _summary()
    return Rendered(_count_word(len(s["misses"])), path)


@number("predict.train_worst")
def _():
    """The training row the model misses most: its error and where, e.g. ``14.3% (`k` on S)``."""
    path, rec = newest("predict")
    worst = max((r for r in rec["rows"] if r["split"] == "train"),
                key=lambda r: abs(r["model_error"]))
    return Rendered(f"{pct(abs(worst['model_error']), 1)} (`{worst['kernel']}` on "
                    f"{worst['shape']})", path)


@number("predict.swapped_ratio")
def _():
    """The mean-error ratio when the halves are swapped (the other half trains)."""
    path, rec = newest("predict")
    return Rendered(f"{rec['meta']['swapped_halves']['test_mean_ratio']:.2f}", path)


@number("predict.swapped_miss_count")
def _():
    path, rec = newest("predict")
    n = len(rec["meta"]["swapped_halves"]["misses"])
    return Rendered(_count_word(n), path)
