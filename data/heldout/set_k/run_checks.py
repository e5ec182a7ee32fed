"""Check every ENTRIES item of set_k/learner_*.py one at a time; write verdicts.txt."""
import ropelab  # noqa: F401

import glob
import importlib
import os
import sys
import warnings

warnings.simplefilter("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from ropelab.grader import steps  # noqa: E402


def main(argv):
    files = sorted(glob.glob(os.path.join(HERE, "learner_*.py")))
    if argv:
        files = [f for f in files if any(a in os.path.basename(f) for a in argv)]
    lines = []
    n_pass = 0
    n_all = 0
    for f in files:
        name = os.path.splitext(os.path.basename(f))[0]
        mod = importlib.import_module(name)
        for idx, (step, label, fn) in enumerate(mod.ENTRIES):
            n_all += 1
            try:
                v = steps.check(fn, step)
                ok = str(v).startswith("PASS")
                detail = str(v).splitlines()[0] if str(v) else ""
            except Exception as e:  # noqa: BLE001
                ok = False
                detail = "EXC %r" % (e,)
            n_pass += ok
            line = "%s\t%d\t%s\t%s\t%s" % (os.path.basename(f), idx, step, label, "PASS" if ok else "FAIL")
            lines.append(line)
            print(line if ok else line + "\t" + detail, flush=True)
    if not argv:
        with open(os.path.join(HERE, "verdicts.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    print("%d / %d pass" % (n_pass, n_all))


if __name__ == "__main__":
    main(sys.argv[1:])
