"""Grade every entry of set F's learner modules, at most 2 at a time, into verdicts.txt.

    python set_f/grade_all.py                 # every module
    python set_f/grade_all.py learner_03 ...  # only these (their lines in verdicts.txt are replaced)
    python set_f/grade_all.py --disputed      # also grade set_f/disputed.py's DISPUTED (printed only)

Each entry is graded in a worker process of its own pool (2 workers); each grading runs the
grader's own child process, so at most 2 gradings run at once.
"""
import importlib
import os
import sys
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODULES = ["learner_ramp", "learner_00", "learner_01", "learner_02", "learner_03",
           "learner_04", "learner_05", "learner_06", "learner_08", "learner_10"]
OUT = os.path.join(HERE, "verdicts.txt")
CACHE = os.path.join(HERE, ".verdicts_by_module.json")


def _setup():
    os.environ.setdefault("ROPELAB_QUIET", "1")
    for p in (ROOT, HERE):
        if p not in sys.path:
            sys.path.insert(0, p)
    import ropelab  # noqa: F401  (before numba.cuda)


def _grade(task):
    module, index, listname = task
    _setup()
    import contextlib
    import io
    from ropelab.grader import steps
    mod = importlib.import_module(module)
    step, label, fn = getattr(mod, listname)[index]
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            verdict = steps.check(fn, step)
        passed = bool(verdict.passed)
        text = str(verdict)
    except Exception as e:  # noqa: BLE001
        passed, text = False, f"grading raised {type(e).__name__}: {e}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return module, step, label, passed, first, text


def main(argv):
    disputed = "--disputed" in argv
    names = [a for a in argv if not a.startswith("--")] or MODULES
    _setup()
    tasks = []
    for name in names:
        mod = importlib.import_module(name)
        listname = "DISPUTED" if name == "disputed" else "ENTRIES"
        tasks += [(name, i, listname) for i in range(len(getattr(mod, listname)))]
    if disputed and "disputed" not in names:
        mod = importlib.import_module("disputed")
        tasks += [("disputed", i, "DISPUTED") for i in range(len(mod.DISPUTED))]
    with ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("spawn")) as pool:
        results = list(pool.map(_grade, tasks))
    # verdicts of modules not graded this time come from the previous run (a json cache)
    import json
    cache = json.load(open(CACHE)) if os.path.exists(CACHE) else {}
    fresh = {}
    for module, step, label, passed, first, text in results:
        line = f"{step} {label} {'PASS' if passed else 'FAIL'} {first}"
        print(line)
        if not passed:
            print("    " + text.replace("\n", "\n    "))
        if module != "disputed":
            fresh.setdefault(module, []).append(line)
    cache.update(fresh)
    json.dump(cache, open(CACHE, "w"), indent=1)
    with open(OUT, "w") as f:
        for name in MODULES:
            for line in cache.get(name, []):
                f.write(line + "\n")
    n_pass = sum(r[3] for r in results)
    print(f"{n_pass}/{len(results)} passed")


if __name__ == "__main__":
    main(sys.argv[1:])
