"""``python -m ropelab.grader.predict --record``: fit, validate, and write ``data/predict/``.

The rows come from two kinds of H200 timings, both by the project's cold-L2 timer:

- the prediction's own GPU run (``scripts/gpu_predict_timings.sh``): ``data/predict/timings-
  training-*.csv``, every training entry (:mod:`.entries`) on its step's timing case through
  ``verdict.time()``'s GPU path; the features are recomputed here from the entries' sources
  (:mod:`.learner`), as a learner's prediction computes them;
- the bench's records (:mod:`.sources`): ropelab's variants and the controls, five and three
  shapes from 17 MB to 1 GB.

Each row's *family* is its step (``step:02.3``) or its recorded kernel (``records:flat``); the
validation (:func:`.model.cross_validate`) leaves one family out at a time.  The record holds the
constants fitted on all rows, the validation's summary (mean and worst error, per family, against
the trivial model) and its 80% interval, which every prediction prints as its error bar, and one
row per training row with its features.  The record's ``meta`` is the GPU run's (or the bench's,
before the prediction has a GPU run of its own), with ``date`` the newest source's: recomputing
from the same sources gives the same file.
"""

from __future__ import annotations

import csv
import json
import math
from functools import lru_cache
from pathlib import Path

from ...measure import records
from . import model, sources

KIND = "predict"
DATA_DIR = records.DATA_DIR / KIND
METHOD = ("computed from H200 timings, not measured: rows are the prediction's GPU run (each "
          "training kernel on its step's timing case through verdict.time()'s GPU path, cold "
          "L2, median of the repeats) and the bench's records (ropelab's variants and controls); "
          "features from each kernel's PTX (cc 9.0, compiled without a GPU) and launch; model = "
          "launch_us + smooth max of seven ceilings (ropelab.grader.predict.model), constants a "
          "least-squares fit of log(predicted / measured) with weak priors; validation = refit "
          "with each family (a step, or a recorded kernel) left out, error = predicted / "
          "measured - 1; trivial model = the copy of the step's bytes / a fixed fraction fitted "
          "on the same rows; interval_80 = the 10th and 90th percentiles of measured / "
          "predicted over the validation's rows")


def record_path() -> Path:
    """The newest ``data/predict/predict-*.json``: the model every prediction uses."""
    paths = sorted(DATA_DIR.glob(f"{KIND}-*.json"))
    if not paths:
        raise FileNotFoundError("no data/predict record: run python -m ropelab.grader.predict "
                                "--record")
    return paths[-1]


@lru_cache(maxsize=1)
def recorded_fit() -> dict:
    """The newest ``data/predict/`` record (its meta holds the constants and the error bar)."""
    return records.validate(json.loads(record_path().read_text()))


def copy_curve() -> list:
    return [[int(b), float(t)] for b, t in recorded_fit()["meta"]["copy_curve"]]


def predict_from_curve(curve, bytes_moved: int) -> float:
    """Copy time of ``bytes_moved``: log-log interpolation between measured copies, constant
    bandwidth beyond them."""
    pts = [(math.log(b), math.log(t)) for b, t in curve]
    x = math.log(bytes_moved)
    if x <= pts[0][0]:
        return math.exp(pts[0][1] + (x - pts[0][0]))
    if x >= pts[-1][0]:
        return math.exp(pts[-1][1] + (x - pts[-1][0]))
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    raise AssertionError("unreachable")


def copy_us(bytes_moved: int) -> float:
    """A device copy of ``bytes_moved`` bytes on the H200, from the record's copy curve."""
    return predict_from_curve(copy_curve(), int(bytes_moved))


def _curve(rows) -> list:
    by_size = {}
    for r in rows:
        by_size.setdefault(r["bytes_moved"], []).append(r["copy_us"])
    return [[size, sorted(t)[len(t) // 2]] for size, t in sorted(by_size.items())]


# --------------------------------------------------------------------------------------------
# Rows from the prediction's own GPU run
# --------------------------------------------------------------------------------------------

def timing_files(set_name: str = "training") -> list[Path]:
    return sorted(DATA_DIR.glob(f"timings-{set_name}-*.csv"))


def read_timings(path) -> dict:
    """The rows of one GPU-run CSV that were timed, by entry key."""
    with open(path, newline="") as fh:
        return {r["key"]: r for r in csv.DictReader(fh) if r["status"] == "ok"}


def entry_rows(entries, timings: dict, progress=None) -> tuple[list[dict], list[str]]:
    """Model rows of the timed ``entries``: features recomputed from their sources."""
    from .. import steps
    from . import compiled
    from .learner import NotPredictable, describe, features_of, step_launches

    cases, pending, skipped = {}, [], []
    for e in entries:
        t = timings.get(e.key)
        if t is None or e.error:
            continue
        step = steps.get(e.step_id)
        case = cases.get(e.step_id) or cases.setdefault(e.step_id, step.timing_case())
        if t.get("case") and t["case"] != case.label:
            # the step's timing case changed after this run: its time is of another problem
            skipped.append(f"{e.key}: timed on another case ({t['case']}, now {case.label})")
            continue
        try:
            launches = step_launches(step, case, e.fn)
            pending.append((e, t, case, launches, describe(launches)))
        except NotPredictable as exc:
            skipped.append(f"{e.key}: {exc}")
    built = compiled.compiled([x for p in pending for x in p[4]], progress=progress)
    rows, at = [], 0
    for e, t, case, launches, described in pending:
        mine, at = built[at:at + len(described)], at + len(described)
        try:
            feats = features_of(launches, mine)
        except NotPredictable as exc:
            skipped.append(f"{e.key}: {exc}")
            continue
        rows.append({"key": e.key, "family": f"step:{e.step_id}", "step": e.step_id,
                     "source": e.set, "label": e.label, "measured_us": float(t["median_us"]),
                     "spread": _spread(t),
                     "copy_us": float(t["copy_us"]), "bytes_moved": int(case.bytes_moved),
                     "launches": feats})
    return rows, skipped


def _spread(t: dict) -> float:
    try:
        return float(t["p80_us"]) / float(t["p20_us"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return 1.0


# A row whose repeats scatter this much (p80 / p20) is not one kernel's time: the GPU waited on
# the host between launches, or the run was disturbed.  Its median would teach the fit a time no
# feature can explain, so it is left out of the fit, and of a held-out set's check (a rule of
# the measurement, the same for both, blind to the prediction), and listed as skipped.
UNSTEADY = 1.5


def steady_rows(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """The rows whose timing is one kernel's time, and the reasons the others are left out."""
    kept, left = [], []
    for r in rows:
        if r.get("spread", 1.0) > UNSTEADY:
            left.append(f"{r['key']}: unsteady timing (p80/p20 {r['spread']:.2f})")
        else:
            kept.append(r)
    return kept, left


def timed_rows(entries, timings: dict, progress=None) -> tuple[list[dict], list[str]]:
    """:func:`entry_rows` less the unsteady ones (:func:`steady_rows`), and why each left out
    was: the rows of a GPU run that a fit or a check uses."""
    rows, skipped = entry_rows(entries, timings, progress=progress)
    rows, unsteady = steady_rows(rows)
    return rows, skipped + unsteady


def _stamp(path: Path) -> str:
    return path.stem.rsplit("-", 1)[-1]


def _gpu_meta(path: Path) -> dict | None:
    """The GPU run's metadata: ``timings-<stamp>.meta.json`` beside the CSV of each set."""
    stamp = _stamp(path)
    meta = path.with_name(f"timings-{stamp}.meta.json")
    return json.loads(meta.read_text()) if meta.is_file() else None


def evaluate(rows: list[dict], constants: dict, fraction: float) -> list[dict]:
    """Each row predicted with fixed constants (a held-out set): the lines of
    :func:`.model.summary`."""
    out = []
    for r in rows:
        us = model.predict(r["launches"], constants)
        trivial = r["copy_us"] / fraction
        out.append({"key": r["key"], "family": r["family"], "label": r.get("label", ""),
                    "measured_us": r["measured_us"], "model_us": round(us, 3),
                    "model_error": round(us / r["measured_us"] - 1, 4),
                    "trivial_us": round(trivial, 3),
                    "trivial_error": round(trivial / r["measured_us"] - 1, 4)})
    return out


def fit_on_run(training_csv, progress=None) -> dict:
    """The model's constants fitted on one GPU run's training rows alone (no bench record, no
    joined set: every row from the same GPU and the same run), for a check on a GPU the record
    was not fitted on.  The same model, priors and fit as :func:`compute`; what comes back
    stands in for the record's ``meta`` in :func:`check_set`."""
    from .entries import training_entries

    rows, _ = timed_rows(training_entries(), read_timings(training_csv), progress=progress)
    if not rows:
        raise ValueError(f"{training_csv}: no timed training rows to fit")
    return {"constants": model.fit(rows), "trivial_fraction_of_copy": model.trivial_fraction(rows),
            "fitted_rows": len(rows),
            "gpu": (_gpu_meta(Path(training_csv)) or {}).get("gpu") or "an unnamed GPU"}


def _shown(path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    shown = Path(path).resolve()
    root = records.DATA_DIR.parent.resolve()
    return str(shown.relative_to(root) if shown.is_relative_to(root) else shown)


def check_set(directory, csv_path=None, progress=None, fit_csv=None) -> dict:
    """A held-out set judged by the recorded model: its rows and summary.  The timings are
    ``csv_path`` or the newest ``data/predict/timings-<set>-*.csv``.  With ``fit_csv`` (the
    training CSV of the same GPU run), the constants are :func:`fit_on_run`'s instead of the
    record's: the model checked on another GPU, still blind to the set; ``csv_path`` must then
    be that run's (the same stamp)."""
    if fit_csv and (csv_path is None or _stamp(Path(csv_path)) != _stamp(Path(fit_csv))):
        raise ValueError(f"the set's timings ({csv_path}) are not of the run {fit_csv} is")
    from .entries import load_set

    entries = load_set(directory)
    set_name = entries[0].set if entries else Path(directory).name.lstrip(".")
    if csv_path is None:
        found = timing_files(set_name)
        if not found:
            raise FileNotFoundError(f"no data/predict/timings-{set_name}-*.csv")
        csv_path = found[-1]
    timings = read_timings(csv_path)
    rows, skipped = timed_rows(entries, timings, progress=progress)
    meta = fit_on_run(fit_csv, progress=progress) if fit_csv else recorded_fit()["meta"]
    lines = evaluate(rows, meta["constants"], meta["trivial_fraction_of_copy"])
    found = [registered(t, lines) for t in sorted(Path(directory).glob("predicted-*.tsv"))]
    used = (f"fitted on {_shown(fit_csv)} ({meta['fitted_rows']} rows, {meta['gpu']})" if fit_csv
            else f"data/{KIND}/{record_path().name}")
    return {"set": set_name, "timings": _shown(csv_path), "model": used,
            "constants": meta["constants"],
            "entries": len(entries),
            "timed": len(timings), "skipped": skipped, "summary": model.summary(lines),
            "registered": found, "rows": lines}


def registered(table: Path, lines: list[dict]) -> dict:
    """A check's rows beside the predictions registered before the set's first GPU run
    (``predicted-*.tsv``, ``scripts/preregister_predictions.py``): how many rows it has, how
    many equal this model's prediction (all of them when the model is the one registered), and
    how many measured times lie inside the registered 80% range."""
    text = table.read_text().splitlines()
    header = text[0].lstrip("# ").strip() if text and text[0].startswith("#") else ""
    by_module: dict = {}
    for line in text[2 if header else 1:]:
        cells = line.split("\t")
        if len(cells) >= 7:
            by_module.setdefault(cells[0].removesuffix(".py"), []).append(cells)
    compared = equal = inside = 0
    for x in lines:
        _, module, index = x["key"].rsplit("/", 2)
        cells = (by_module.get(module) or [])[int(index):int(index) + 1]
        if not cells or not cells[0][4] or cells[0][2] != x["label"]:
            continue
        predicted, low, high = (float(v) for v in cells[0][4:7])
        compared += 1
        equal += abs(predicted - x["model_us"]) <= 0.005 * predicted + 0.01
        inside += low <= x["measured_us"] <= high
    return {"file": table.name, "header": header, "rows": compared, "equal": equal,
            "inside_range": inside}


# Held-out sets whose blind check is on record (``data/predict/check-<set>-*.json``, made before
# they joined) and whose kernels now teach the fit: a set is checked once, blind, and then
# trains the model that the next blind set checks.
FIT_SETS = ("set_d", "set_e")


def fit_set_rows(progress=None) -> tuple[list[dict], list[str], dict]:
    """The rows of :data:`FIT_SETS` (each on its newest timings), what was left out, and the
    timings files used."""
    from .entries import load_set

    rows, skipped, used = [], [], {}
    for name in FIT_SETS:
        files, folder = timing_files(name), records.DATA_DIR / "heldout" / name
        if not files or not folder.is_dir():
            continue
        mine, more = timed_rows(load_set(folder, name), read_timings(files[-1]),
                                progress=progress)
        rows += mine
        skipped += more
        used[name] = f"data/{KIND}/{files[-1].name}"
    return rows, skipped, used


def compute(progress=None) -> dict:
    """Everything the record holds (compiles any kernel whose PTX is not cached)."""
    from .entries import training_entries

    rows, skipped, used = sources.recorded_rows(progress=progress)
    meta_source = used["bench"][0]
    files = timing_files()
    if files:
        timings = read_timings(files[-1])
        mine, more = timed_rows(training_entries(), timings, progress=progress)
        rows += mine
        skipped += more
        meta_source = _gpu_meta(files[-1]) or meta_source
    joined, more, joined_files = fit_set_rows(progress=progress)
    rows += joined
    skipped += more
    meta = {k: meta_source.get(k) for k in records.REQUIRED_META + ("target", "sm_count",
                                                                   "l2_bytes", "cuda_runtime")}
    meta["date"] = max([m["date"] for m, _ in used.values()] + [meta_source["date"]])
    meta["sources"] = {kind: {"file": f"data/{kind}/{name}", "date": m["date"]}
                       for kind, (m, name) in used.items()}
    if files:
        meta["sources"]["timings"] = {"file": f"data/{KIND}/{files[-1].name}",
                                      "date": meta_source["date"]}
    for name, path in joined_files.items():
        meta["sources"][f"timings:{name}"] = {"file": path, "date": meta_source["date"]}
    constants = model.fit(rows)
    lines = model.cross_validate(rows)
    meta.update({"constants": constants, "priors": dict(model.PRIORS),
                 "smooth": model.SMOOTH, "trivial_fraction_of_copy": model.trivial_fraction(rows),
                 "copy_curve": _curve(rows), "validation": model.summary(lines),
                 "skipped": skipped})
    held = {x["key"]: x for x in lines}
    out = []
    for r in rows:
        f = r["launches"]
        out.append({"key": r["key"], "family": r["family"], "step": r.get("step") or "",
                    "source": r["source"], "label": r.get("label", r["key"]),
                    "bytes_moved": r["bytes_moved"], "measured_us": r["measured_us"],
                    "copy_us": r["copy_us"],
                    "fit_us": round(model.predict(f, constants), 3),
                    "model_us": held[r["key"]]["model_us"],
                    "model_error": held[r["key"]]["model_error"],
                    "trivial_us": held[r["key"]]["trivial_us"],
                    "trivial_error": held[r["key"]]["trivial_error"],
                    "binding": "+".join(model.binding(x, constants) for x in f),
                    "launches": json.dumps(f, sort_keys=True)})
    return {"meta": meta, "rows": out}


# The solutions whose predictions notebook 07 and the tests print: their compiled PTX is
# committed (data/predict/kernels.json), so that a fresh clone predicts them without compiling.
COMMITTED_SOLUTIONS = ("03.4", "00.4")


def save_committed_kernels() -> Path:
    """Compile (or read) the kernels of :data:`COMMITTED_SOLUTIONS` and write them alone to
    ``data/predict/kernels.json``."""
    from .. import steps
    from ..verify import load_solution, solution_path
    from . import compiled
    from .learner import step_features

    compiled.USED.clear()
    for step_id in COMMITTED_SOLUTIONS:
        step = steps.get(step_id)
        step_features(step, load_solution(solution_path(step)).SOLUTIONS[step_id])
    return compiled.save_used()


def rows_for_fit(record: dict) -> list[dict]:
    """The model rows of a record (its features parsed back): a refit needs no compiler."""
    return [{"key": r["key"], "family": r["family"], "measured_us": r["measured_us"],
             "copy_us": r["copy_us"], "launches": json.loads(r["launches"])}
            for r in record["rows"]]


def save(doc: dict) -> Path:
    """Write the record, replacing earlier fits (the sources they name are kept)."""
    for old in DATA_DIR.glob(f"{KIND}-*"):
        old.unlink()
    return records.save(KIND, doc["rows"], method=METHOD, meta=doc["meta"], directory=DATA_DIR)


def format_report(doc: dict) -> str:
    v, c = doc["meta"]["validation"], doc["meta"]["constants"]
    lines = [f"predicted H200 time: {len(doc['rows'])} rows in {len(v['families'])} families",
             "constants: " + ", ".join(f"{k} {val:.4g}" for k, val in c.items()),
             f"leave-one-family-out: model mean {100 * v['model_mean']:.1f}% worst "
             f"{100 * v['model_max']:.1f}%; trivial mean {100 * v['trivial_mean']:.1f}% worst "
             f"{100 * v['trivial_max']:.1f}%",
             f"80% of held-out rows: measured / predicted in [{v['interval_80'][0]:.3f}, "
             f"{v['interval_80'][1]:.3f}]",
             "families where the model's mean error exceeds the trivial model's: "
             + (", ".join(v["families_worse_than_trivial"]) or "none")]
    for name, s in v["families"].items():
        lines.append(f"  {name:<34} {s['rows']:>3} rows  model {100 * s['model_mean']:5.1f}% "
                     f"(worst {100 * s['model_max']:5.1f}%)  "
                     f"trivial {100 * s['trivial_mean']:5.1f}%")
    return "\n".join(lines)
