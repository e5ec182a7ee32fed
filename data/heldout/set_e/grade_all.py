"""Grade every entry of set_e's learner modules, at most two at a time.

    python set_e/grade_all.py                 # every module, writes set_e/verdicts.txt
    python set_e/grade_all.py learner_03 ...  # only these modules (their lines in
                                              # verdicts.txt are replaced, the rest kept)
    python set_e/grade_all.py --disputed      # grade set_e/disputed.py's DISPUTED list

Each worker is a separate process that grades its entries one after another with
ropelab.grader.steps.check (which itself runs each kernel in one child process), so at most
two kernels are graded at once.
"""
from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODULES = ["learner_ramp", "learner_00", "learner_01", "learner_02", "learner_03",
           "learner_04", "learner_05", "learner_06", "learner_08", "learner_10"]
WORKERS = 2
LIST_NAME = {"disputed": "DISPUTED"}


def _setup_path():
    for p in (str(ROOT), str(HERE)):
        if p not in sys.path:
            sys.path.insert(0, p)


def _module_of(step_id):
    """learner_ramp for ramp.N, learner_03 for 03.N."""
    prefix = step_id.split(".")[0]
    return "learner_ramp" if prefix == "ramp" else f"learner_{prefix}"


def _entries(module_name):
    _setup_path()
    mod = importlib.import_module(module_name)
    return getattr(mod, LIST_NAME.get(module_name, "ENTRIES"))


def _grade(task):
    module_name, index = task
    os.environ.setdefault("ROPELAB_QUIET", "1")
    _setup_path()
    import ropelab  # noqa: F401  (before numba.cuda)
    from ropelab.grader import steps
    entry = _entries(module_name)[index]
    step_id, label, fn = entry[0], entry[1], entry[2]
    try:
        verdict = steps.check(fn, step_id, timeout_s=120.0)
        passed = bool(verdict.passed)
        text = str(verdict)
    except Exception as exc:  # noqa: BLE001  (a bad entry, not a verdict)
        passed, text = False, f"grader raised {type(exc).__name__}: {exc}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return module_name, index, step_id, label, passed, first, text


def _init_worker():
    # each worker records progress in its own throwaway folder
    os.environ["ROPELAB_PROGRESS"] = tempfile.mkdtemp(prefix="set_e_progress_")
    os.environ["ROPELAB_QUIET"] = "1"


def main(argv):
    disputed = "--disputed" in argv
    names = [a for a in argv if not a.startswith("--")]
    modules = ["disputed"] if disputed else (names or MODULES)
    tasks = [(m, i) for m in modules for i in range(len(_entries(m)))]
    ctx = mp.get_context("spawn")
    results = {}
    with ctx.Pool(WORKERS, initializer=_init_worker) as pool:
        for res in pool.imap_unordered(_grade, tasks):
            module_name, index, step_id, label, passed, first, text = res
            results[(module_name, index)] = res
            mark = "PASS" if passed else "FAIL"
            print(f"{module_name} {step_id} {label} {mark}", flush=True)
            if not passed:
                print("    " + text.replace("\n", "\n    "), flush=True)
    lines_by_module = {m: [] for m in modules}
    for (m, i) in sorted(results, key=lambda k: (modules.index(k[0]), k[1])):
        _, _, step_id, label, passed, first, _ = results[(m, i)]
        lines_by_module[m].append(f"{step_id} {label} {'PASS' if passed else 'FAIL'} {first}")
    out_name = "verdicts_disputed.txt" if disputed else "verdicts.txt"
    out = HERE / out_name
    kept = {}
    if out.exists() and names and not disputed:
        # keep the other modules' lines (one line per entry; the module from the step id)
        for line in out.read_text().splitlines():
            if line.strip():
                kept.setdefault(_module_of(line.split()[0]), []).append(line)
    for m in modules:
        kept[m] = lines_by_module[m]
    order = ["disputed"] if disputed else MODULES
    text = [line for m in order for line in kept.get(m, [])]
    out.write_text("\n".join(text) + "\n")
    total = len(results)
    passed = sum(1 for r in results.values() if r[4])
    print(f"{passed}/{total} passed; wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
