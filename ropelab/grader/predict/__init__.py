"""A predicted H200 time for a learner's kernel, from what a machine without a GPU can know.

``verdict.time()`` with no GPU calls :func:`explain_step`: the launches the step's timing
makes (:mod:`.learner`), each kernel's PTX counts and registers (:mod:`.compiled`, compiled
without a GPU), the launch's quantities (:mod:`.features`) and the roofline model
(:mod:`.model`) with the constants of the newest ``data/predict/`` record (:mod:`.record`).
Every figure comes with its error bar: the range that held the middle 80% of the measured
times of kernels the fit had not seen, in the record's cross-validation.

``python -m ropelab.grader.predict`` refits from the recorded timings (:mod:`.record`);
``python -m ropelab.grader.predict.timings`` is the GPU run that times the training and
held-out kernels (``scripts/gpu_predict_timings.sh``).
"""

from __future__ import annotations

from . import model
from .record import KIND, copy_us, recorded_fit


def constants() -> dict:
    return recorded_fit()["meta"]["constants"]


def interval() -> list:
    """``[low, high]`` of measured / predicted for the middle 80% of held-out kernels."""
    return recorded_fit()["meta"]["validation"]["interval_80"]


def explain_launches(launches: list[dict], c: dict | None = None) -> dict:
    """The prediction of a step's launches (feature dicts) taken apart: ``us``, ``low``,
    ``high`` (the error bar), and per launch its ceilings and the one that binds."""
    c = c or constants()
    us = model.predict(launches, c)
    low, high = interval()
    parts = [{"us": model.launch_us(f, c), "roofs": model.roofs(f, c),
              "binding": model.binding(f, c), "features": f} for f in launches]
    return {"us": us, "low": us * low, "high": us * high, "launches": parts}


def explain_step(step, fn, case=None, progress=None) -> dict:
    """:func:`explain_launches` of ``fn``'s launches on ``step``'s timing case, with the copy
    of the case's bytes (from the record's copy curve) beside it."""
    from .learner import step_features

    case = case or step.timing_case()
    why = explain_launches(step_features(step, fn, case, progress=progress))
    why["copy_us"] = copy_us(case.bytes_moved)
    why["case"] = case.label
    why["bytes_moved"] = case.bytes_moved
    return why


def figure(why: dict) -> str:
    """"21.4 us (80% range 18.9-24.8 us)": a prediction and its error bar."""
    return f"{why['us']:.1f} us (80% range {why['low']:.1f}-{why['high']:.1f} us)"


__all__ = ["KIND", "constants", "explain_launches", "explain_step", "figure", "interval",
           "recorded_fit"]
