"""Grade every entry of set_h's learner modules, at most 2 at a time.

Usage (from /work/blind_h):  python set_h/grade_all.py [module ...]
With no arguments every module is graded and set_h/verdicts.txt is rewritten; with module
names (e.g. learner_03) only those are graded and their lines replaced in verdicts.txt.
"""
import importlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ropelab  # noqa: E402,F401
from ropelab.grader import steps  # noqa: E402

MODULES = ["learner_ramp", "learner_00", "learner_01", "learner_02", "learner_03",
           "learner_04", "learner_05", "learner_06", "learner_08", "learner_10"]
OUT = os.path.join(HERE, "verdicts.txt")


def grade(job):
    module, step, label, fn = job
    try:
        v = steps.check(fn, step)
        ok = bool(v.passed)
        first = str(v).strip().splitlines()[0] if str(v).strip() else ""
    except Exception as e:  # a crash is a failure, with its reason
        ok, first = False, "grader raised %s: %s" % (type(e).__name__, e)
    return module, step, label, ok, first


def main(argv):
    wanted = argv or MODULES
    jobs = []
    for name in wanted:
        mod = importlib.import_module(name)
        for step, label, fn in mod.ENTRIES:
            jobs.append((name, step, label, fn))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(grade, jobs))
    lines = {}
    if argv and os.path.exists(OUT):  # keep the other modules' lines
        with open(OUT) as f:
            for line in f:
                if line.strip():
                    prefix = line.split(".", 1)[0]
                    lines.setdefault("learner_" + prefix, []).append(
                        "learner_%s\t%s" % (prefix, line.rstrip("\n")))
    for name in wanted:
        lines[name] = []
    for module, step, label, ok, first in results:
        lines[module].append("%s\t%s %s %s %s" % (module, step, label,
                                                  "PASS" if ok else "FAIL", first))
        print(step, label, "PASS" if ok else "FAIL", first if not ok else "", flush=True)
    with open(OUT, "w") as f:
        for name in MODULES:
            for line in lines.get(name, []):
                # the file's format: step label PASS|FAIL first-line (module tag dropped)
                f.write(line.split("\t", 1)[1] + "\n")
    n_pass = sum(r[3] for r in results)
    print("%d / %d pass" % (n_pass, len(results)))


if __name__ == "__main__":
    main(sys.argv[1:])
