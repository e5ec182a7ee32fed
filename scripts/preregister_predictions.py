"""Write down what ``verdict.time()`` predicts for every kernel of a held-out set before the set
is ever timed, so that the check after the GPU run cannot be steered by what it shows.

    python scripts/preregister_predictions.py data/heldout/set_d

For each ``(step, label, function)`` of the set's ``learner_*.py`` modules (``ENTRIES``, loaded by
path as ``ropelab.grader.heldout`` loads them): the step's grade on the simulator, then the
recorded model's prediction on the step's timing case (``ropelab.grader.predict.explain_step``,
what ``verdict.time()`` prints without a GPU), with its 80% range.  Writes
``predicted-<date>.tsv`` into the set's folder, headed by the model record and the commit it
was made with.  A later H200 run of ``scripts/gpu_predict_timings.sh`` on the set gives the
measured side; comparing the two is the blind check of issue 24's part 3.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import io
import subprocess
import sys
from pathlib import Path


def entries(folder: Path):
    for path in sorted(folder.glob("learner_*.py")):
        spec = importlib.util.spec_from_file_location(f"preregistered_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for step_id, label, fn in module.ENTRIES:
            yield path.name, step_id, label, fn


def earlier_runs(folder: Path, predict_dir: Path) -> list[str]:
    """The GPU timings of this set already recorded (``timings-<set>-<stamp>.csv`` under
    ``data/predict/`` and its per-card subfolders), as paths relative to ``predict_dir``'s
    parent's parent: the header must say whether the model could have seen them."""
    found = sorted(predict_dir.rglob(f"timings-{folder.name}-*.csv"))
    return [str(p.relative_to(predict_dir.parent.parent)) for p in found]


def provenance(folder: Path, predict_dir: Path) -> str:
    """The header's last clause: before any GPU run of the set, or after the runs on record."""
    runs = earlier_runs(folder, predict_dir)
    if not runs:
        return "before any GPU run of this set"
    return ("after the GPU runs of this set on record (" + ", ".join(runs)
            + "), whose timings the model may have seen; before any later run")


def _line(text) -> str:
    """One TSV cell: the text's first 160 characters on one line."""
    return " ".join(str(text).split())[:160]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    from ropelab.grader import predict, steps
    from ropelab.grader.predict import record

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    rows = []
    for module, step_id, label, fn in entries(args.folder):
        with contextlib.redirect_stdout(io.StringIO()):
            verdict = steps.check(fn, step_id)
            if not verdict.passed:
                rows.append((module, step_id, label, "refused", "", "", "", _line(verdict)))
                continue
            try:
                why = predict.explain_step(steps.get(step_id), fn)
            except Exception as exc:  # noqa: BLE001  (say what failed, in the row)
                rows.append((module, step_id, label, "pass", "", "", "",
                             _line(f"no prediction: {type(exc).__name__}: {exc}")))
                continue
        rows.append((module, step_id, label, "pass", f"{why['us']:.2f}", f"{why['low']:.2f}",
                     f"{why['high']:.2f}", why["case"]))
        print("\t".join(rows[-1]), flush=True)
    out = args.folder / f"predicted-{stamp}.tsv"
    with open(out, "w") as f:
        model = record.record_path().name
        when = provenance(args.folder, record.record_path().parent)
        f.write(f"# predicted by data/predict/{model} at commit {commit}, {stamp} UTC, {when}\n")
        f.write("module\tstep\tlabel\tgrade\tpredicted_us\tlow_us\thigh_us\tcase or note\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    print(f"wrote {out}: {sum(1 for r in rows if r[4])} predictions of {len(rows)} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
