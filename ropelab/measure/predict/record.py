"""``python -m ropelab.measure.predict --record``: fit, judge, and write ``data/predict/``.

The record is computed from other records, not measured: its ``meta`` carries the GPU fields of
the source runs (all one H200), the date of the newest source (so recomputing it from the same
records gives the same file), and ``sources``: each source record's file and date.  It also
holds the fitted constants, the split, the copy-time curve the no-GPU prediction uses, and the
summary; its rows are every recorded (kernel, shape) with both models' predictions and errors.
"""

from __future__ import annotations

import math

from .. import records
from . import model, sources

KIND = "predict"
GPU_FIELDS = ("target", "gpu", "compute_capability", "sm_count", "driver", "cuda_driver_api",
              "cuda_runtime", "numba", "numba_cuda", "numpy", "python", "l2_bytes")
METHOD = ("computed from GPU records, not measured: model time = copy time of the same bytes * "
          "exp(intercept + sum(weight * feature)), features from the census and launch "
          "(ropelab.measure.predict.features), constants a least-squares fit of "
          "log(time / copy time) on the training kernels only; trivial model = copy time / a "
          "fixed fraction fitted on the same rows (geometric mean); error = predicted / "
          "recorded - 1; the split is by kernel (meta.constants.train_kernels)")


def copy_curve(rows) -> list[list[float]]:
    """(bytes, median copy us) points, one per distinct size (the lowest-noise: the median of
    the runs' copies), for predictions where no copy of those bytes was timed."""
    by_size = {}
    for r in rows:
        by_size.setdefault(r.bytes_moved, set()).add(r.copy_us)
    out = []
    for size in sorted(by_size):
        times = sorted(by_size[size])
        out.append([size, times[len(times) // 2]])
    return out


def compute() -> dict:
    """Everything the record holds, from the records and census caches on disk."""
    rows, skipped, used = sources.gather()
    constants = model.fit(rows)
    lines = model.evaluate(rows, constants)
    first_meta = used["bench"][0]
    meta = {k: first_meta.get(k) for k in GPU_FIELDS}
    for kind, (m, _) in used.items():
        differs = [k for k in ("gpu", "driver", "numba_cuda") if m.get(k) != first_meta.get(k)]
        if differs:
            meta.setdefault("source_differences", {})[kind] = {k: m.get(k) for k in differs}
    meta["date"] = max(m["date"] for m, _ in used.values())
    meta["sources"] = {kind: {"file": f"data/{kind}/{name}", "date": m["date"]}
                       for kind, (m, name) in used.items()}
    meta["census"] = ["data/census/census-sass.json", "data/census/controls.json"]
    meta["constants"] = constants
    meta["copy_curve"] = copy_curve(rows)
    meta["skipped"] = skipped
    meta["summary"] = model.summary(lines)
    # A check of the split, not the model: the same features fitted on the other half.
    other = tuple(sorted({r.kernel for r in rows} - set(constants["train_kernels"])))
    swapped = model.summary(model.evaluate(rows, model.fit(rows, train=other)))
    meta["swapped_halves"] = {k: swapped[k] for k in ("train_rows", "test_rows", "test_model_max",
                                                      "test_model_mean", "test_trivial_mean",
                                                      "test_mean_ratio", "misses")}
    return {"meta": meta, "rows": lines}


def save(doc: dict):
    """Write the record, replacing an earlier fit of the same sources (same name)."""
    directory = records.DATA_DIR / KIND
    for old in directory.glob(f"{KIND}-*"):
        old.unlink()
    return records.save(KIND, doc["rows"], method=METHOD, meta=doc["meta"], directory=directory)


def predict_from_curve(curve, bytes_moved: int) -> float:
    """Copy time of ``bytes_moved``: log-log interpolation between the recorded copies, and
    constant bandwidth beyond them."""
    pts = [(math.log(b), math.log(t)) for b, t in curve]
    x = math.log(bytes_moved)
    if x <= pts[0][0]:
        return math.exp(pts[0][1] + (x - pts[0][0]))  # same bandwidth as the smallest copy
    if x >= pts[-1][0]:
        return math.exp(pts[-1][1] + (x - pts[-1][0]))
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    raise AssertionError("unreachable")


def format_report(doc: dict) -> str:
    s, c = doc["meta"]["summary"], doc["meta"]["constants"]
    kernels = ", ".join(c["train_kernels"])
    lines = [f"predicted H200 time: {s['train_rows']} training rows ({kernels}),"
             f" {s['test_rows']} held out",
             "constants: intercept {:.4f}; ".format(c["intercept"])
             + ", ".join(f"{k} {v:.4f}" for k, v in c["weights"].items())
             + f"; trivial fraction of copy {c['trivial_fraction_of_copy']:.4f}",
             f"held out: model max {100 * s['test_model_max']:.1f}% mean "
             f"{100 * s['test_model_mean']:.1f}%; trivial max {100 * s['test_trivial_max']:.1f}% "
             f"mean {100 * s['test_trivial_mean']:.1f}% "
             f"(ratio {s['test_mean_ratio']:.2f}, goal <= 0.33)",
             "held-out rows beyond 10%: " + ("; ".join(s["misses"]) or "none")]
    w = doc["meta"]["swapped_halves"]
    lines.append(f"check, halves swapped ({w['train_rows']} training rows): model max "
                 f"{100 * w['test_model_max']:.1f}% mean {100 * w['test_model_mean']:.1f}%, ratio "
                 f"{w['test_mean_ratio']:.2f}, {len(w['misses'])} rows beyond 10%")
    return "\n".join(lines)
