"""Grade every entry of every learner_*.py in this folder and write verdicts.txt.

Usage: python grade_all.py [module_stem ...]   (default: all modules; verdicts.txt is
written only when all modules are graded)
"""
import importlib.util
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("ROPELAB_QUIET", "1")

from ropelab.grader import steps  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDER = ["ramp", "00", "01", "02", "03", "04", "05", "06", "08", "10"]


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def grade(entry):
    step, label, fn = entry
    try:
        v = steps.check(fn, step)
        passed = bool(v.passed)
        text = str(v)
    except Exception as e:  # a crash is a failure
        passed = False
        text = f"grader raised {type(e).__name__}: {e}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return step, label, passed, first, text


def main(argv):
    wanted = argv[1:]
    paths = [HERE / f"learner_{k}.py" for k in ORDER if (HERE / f"learner_{k}.py").exists()]
    if wanted:
        paths = [p for p in paths if p.stem.replace("learner_", "") in wanted]
    entries = []
    for p in paths:
        mod = load(p)
        entries.extend(mod.ENTRIES)
    workers = int(os.environ.get("GRADE_WORKERS", "6"))
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(grade, entries))
    lines = []
    bad = 0
    for step, label, passed, first, text in results:
        status = "PASS" if passed else "FAIL"
        lines.append(f"{step}\t{label}\t{status}\t{first}")
        if not passed:
            bad += 1
            print(f"---- FAIL {step} {label}\n{text}\n", flush=True)
    for l in lines:
        print(l)
    print(f"{len(results) - bad}/{len(results)} passed")
    if not wanted:
        (HERE / "verdicts.txt").write_text("\n".join(lines) + "\n")
        print("wrote", HERE / "verdicts.txt")


if __name__ == "__main__":
    main(sys.argv)
