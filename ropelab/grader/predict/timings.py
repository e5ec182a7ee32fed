"""``python -m ropelab.grader.predict.timings [--dry-run] [DIR ...]``: the prediction's GPU run.

Times, through ``verdict.time()``'s own GPU path (:func:`ropelab.grader.learner_time.
measure_on_gpu`: the step's timing case, the project's cold-L2 timer, a device copy of the
same bytes), every entry of the training set (:func:`.entries.training_entries`) and of every
set directory given (``learner_*.py`` modules), and writes one CSV per set under ``--out``:
the measured median and p20/p80, the copy's, the launches the GPU saw (grid x block) and a
status.  Before timing, each entry runs once on the timing case and its output is compared
with the float64 reference: a wrong one is recorded as ``wrong`` and not timed.

Robustness: entries are timed in a child process; a kernel that faults poisons the CUDA
context, so the child stops, the parent records the entry's error and starts a new child for
the rest.  An entry past ``--deadline`` seconds is recorded as skipped.  Held-out sets run
before the training set.  ``--workers N`` first compiles every kernel in N processes with
numba's on-disk cache (the timing child then loads them): numba compiles about one kernel a
second, and the run has minutes.  ``--by-step`` times them step by step instead, every set's
entries of a step together: what the GPU's host does drifts within a run (a launch function's
one host copy took about 120 us in one run's training rows and 170-210 us in its held-out rows,
timed minutes apart), and a step's rows then share the drift.

``--dry-run`` (on the simulator, no GPU): walks the same sets, builds every case, finds every
launch, compiles every kernel's PTX and computes every feature (:mod:`.learner`), and prints
and writes the rows with the features (and the recorded model's prediction) instead of times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .rows import COLUMNS, Writer, dims_text, error_text, gather
from .rows import row as make_row

# --------------------------------------------------------------------------------------------
# Dry run: every feature, no GPU
# --------------------------------------------------------------------------------------------

def dry_run(entries, writer: Writer, show=print) -> int:
    """Features of every entry (simulator); returns how many failed."""
    from .. import steps
    from . import compiled, explain_launches, recorded_fit
    from .learner import describe, features_of, step_launches

    try:
        recorded_fit()
        have_model = True
    except FileNotFoundError:
        have_model = False
    cases, pending, failed = {}, [], 0
    for e in entries:
        step = steps.STEPS.get(e.step_id)
        if e.error or step is None:
            writer.write(make_row(e, step, status="error", error=e.error or "unknown step"))
            failed += 1
            continue
        try:
            case = cases.get(e.step_id) or cases.setdefault(e.step_id, step.timing_case())
            launches = step_launches(step, case, e.fn)
            pending.append((e, step, case, launches, describe(launches)))
        except Exception as exc:  # noqa: BLE001  (a learner's code: report, go on)
            writer.write(make_row(e, step, status="error", error=f"launches: {error_text(exc)}"))
            failed += 1
    tasks = [t for p in pending for t in p[4]]
    built = compiled.compiled(tasks, progress=lambda d, n: print(
        f"\r  compiled {d}/{n}", end="\n" if d == n else "", file=sys.stderr, flush=True))
    at = 0
    for e, step, case, launches, described in pending:
        mine, at = built[at:at + len(described)], at + len(described)
        try:
            feats = features_of(launches, mine)
            predicted = explain_launches(feats)["us"] if have_model else None
        except Exception as exc:  # noqa: BLE001
            writer.write(make_row(e, step, status="error", error=f"features: {error_text(exc)}"))
            failed += 1
            continue
        grids = ";".join(f"{dims_text(x.grid)}x{dims_text(x.block)}" for x in launches)
        writer.write(make_row(e, step, status="dry", case=case.label, bytes_moved=case.bytes_moved,
                          launches=grids, regs=";".join(str(b.get("regs")) for b in mine),
                          predicted_us="" if predicted is None else round(predicted, 3),
                          features=json.dumps(feats, sort_keys=True)))
        show(f"{e.key:<34} {e.step_id:<5} {e.label[:28]:<28} {grids:<24} "
             + ("" if predicted is None else f"predicted {predicted:8.1f} us"))
    return failed


def check_entries(entries, show=print) -> int:
    """Run every entry on its step's graded (small) cases on the simulator and compare with
    the reference, as the grader does before its census; returns how many failed."""
    from .. import steps, trial
    from ..grading import first_wrong

    failed = 0
    for e in entries:
        step = steps.STEPS.get(e.step_id)
        problem = e.error or (None if step else "unknown step")
        if problem is None:
            try:
                for case in step.cases():
                    got = trial.run(step, case, e.fn).out[:case.expected.size]
                    wrong = first_wrong(case, got)
                    if wrong is not None:
                        problem = f"wrong at element {wrong} of case {case.label}"
                        break
            except Exception as exc:  # noqa: BLE001
                problem = error_text(exc)
        failed += problem is not None
        show(f"{e.key:<34} {e.step_id:<5} {e.label[:34]:<34} {problem or 'ok'}")
    return failed


# --------------------------------------------------------------------------------------------
# The GPU run: a parent that restarts its timing child when a kernel poisons the context
# --------------------------------------------------------------------------------------------

CHILD = (sys.executable, "-m", "ropelab.grader.predict.gpu_child")
ROW_TIMEOUT_S = 120.0  # no row for this long: the child is stuck (a kernel that never ends)


def _lines(proc, timeout_s: float):
    """The child's stdout lines; the child is killed when none comes for ``timeout_s``."""
    import queue
    import threading

    lines: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=timeout_s)
        except queue.Empty:
            proc.kill()
            return
        if line is None:
            return
        yield line


def run_gpu(entries, writer: Writer, *, repeats: int, deadline_s: float, workers: int,
            directories, training: bool, meta_path: Path, show=print, child=CHILD) -> int:
    """Time ``entries`` in a child process (``child``: its command), restarted after a fault;
    returns how many times it was restarted."""
    t0 = time.monotonic()
    if workers > 0:
        from .gpu_child import precompile

        ran = precompile(directories, training, workers, deadline_s=min(120.0, deadline_s / 3))
        show(f"== {'precompiled' if ran else 'numba disk cache did not serve a kernel: no'} "
             f"precompile ({time.monotonic() - t0:.0f} s)")
    todo = [e for e in entries]
    failures = broken = 0
    while todo:
        left = deadline_s - (time.monotonic() - t0)
        if left <= 5:
            for e in todo:
                writer.write(make_row(e, status="skipped", error="past the run's deadline"))
            break
        payload = {"directories": [str(d) for d in directories], "training": training,
                   "keys": [e.key for e in todo], "repeats": repeats, "deadline_s": left}
        proc = subprocess.Popen(list(child), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        proc.stdin.write(json.dumps(payload))
        proc.stdin.close()
        done, started = set(), False
        for line in _lines(proc, ROW_TIMEOUT_S):
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if "meta" in row:  # the child's first line: the device and versions
                meta_path.write_text(json.dumps(row["meta"], indent=1) + "\n")
                started = True
                continue
            done.add(row["key"])
            writer.write({c: row.get(c, "") for c in COLUMNS})
            show(f"{row['key']:<34} {row['step']:<5} {row['status']:<8} "
                 f"{row.get('median_us', '')!s:>10} us  copy {row.get('copy_us', '')!s:>8}"
                 f"  {row.get('error', '')[:60]}")
        if not started:
            broken += 1
            if broken >= 2:  # it cannot even start: no point in trying entry by entry
                for e in todo:
                    writer.write(make_row(e, status="error", error="the timing process did not "
                                      f"start (exit {proc.returncode})"))
                break
        proc.wait()
        remaining = [e for e in todo if e.key not in done]
        if proc.returncode == 0:
            for e in remaining:  # it ended on its own (its deadline): say so for each
                writer.write(make_row(e, status="skipped", error="the timing process ended "
                                  "before this entry"))
            break
        failures += 1
        if len(remaining) == len(todo):  # died on the first entry: drop it, go on
            writer.write(make_row(remaining[0], status="fault", error=f"the timing process died "
                              f"(exit {proc.returncode}) on this entry"))
            remaining = remaining[1:]
        todo = remaining
    return failures


def by_step(entries) -> list:
    """``entries`` in the course's order of steps, each step's entries in their given order."""
    from .. import steps

    place = {step_id: at for at, step_id in enumerate(steps.STEPS)}
    return sorted(entries, key=lambda e: place.get(e.step_id, len(place)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.grader.predict.timings")
    parser.add_argument("sets", nargs="*", help="directories of learner_*.py modules")
    parser.add_argument("--dry-run", action="store_true", help="simulator: features, no times")
    parser.add_argument("--check", action="store_true", help="simulator: run each entry on "
                        "its step's small cases and compare with the reference")
    parser.add_argument("--no-training", action="store_true", help="only the given sets")
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--deadline", type=float, default=390.0, help="seconds for the run")
    parser.add_argument("--workers", type=int, default=0, help="processes that compile first")
    parser.add_argument("--by-step", action="store_true", help="time every set's entries of a "
                        "step together (the steps in the course's order)")
    args = parser.parse_args(argv)
    directories = []
    for d in map(Path, args.sets):
        if d.is_dir():
            directories.append(d)
        else:  # a set not carried along: time the others rather than nothing
            print(f"WARNING: {d} is not a directory: that set is skipped", flush=True)
    entries = gather(directories, not args.no_training)
    if args.by_step:
        entries = by_step(entries)
    sets = dict.fromkeys(e.set for e in entries)
    print(f"{len(entries)} entries: " + ", ".join(
        f"{s} {sum(1 for e in entries if e.set == s)}" for s in sets))
    if args.check:
        failed = check_entries(entries)
        print(f"check: {len(entries) - failed} entries right, {failed} not")
        return 1 if failed else 0
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    writer = Writer(Path(args.out), "features" if args.dry_run else "timings", stamp)
    try:
        if args.dry_run:
            failed = dry_run(entries, writer)
            print(f"dry run: {len(entries) - failed} entries described, {failed} failed")
        else:
            restarts = run_gpu(entries, writer, repeats=args.repeats, deadline_s=args.deadline,
                               workers=args.workers, directories=directories,
                               training=not args.no_training,
                               meta_path=Path(args.out) / f"timings-{stamp}.meta.json")
            print(f"GPU run done ({restarts} restarts of the timing process)")
        print(f"rows: {writer.summary()}")
    finally:
        writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
