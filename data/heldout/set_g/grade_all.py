"""Grade every entry of every set_g module, at most two at a time; write verdicts.txt.

python set_g/grade_all.py            # every module, writes set_g/verdicts.txt
python set_g/grade_all.py 03 ramp    # only those modules, prints (no file written)
"""
import ropelab  # noqa: F401

import contextlib
import importlib
import io
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ropelab.grader import steps  # noqa: E402

MODULES = ["ramp", "00", "01", "02", "03", "04", "05", "06", "08", "10"]
_lock = threading.Lock()


def grade(entry):
    step_id, label, fn = entry
    try:
        verdict = steps.check(fn, step_id)
        text = str(verdict).strip()
        passed = bool(verdict.passed)
    except Exception as exc:  # noqa: BLE001
        text, passed = f"grader raised {type(exc).__name__}: {exc}", False
    first = text.splitlines()[0] if text else ""
    line = f"{step_id} {label} {'PASS' if passed else 'FAIL'} {first}"
    with _lock:
        print(line, file=sys.__stdout__, flush=True)
        if not passed:
            print("    " + text.replace("\n", "\n    ")[:3000], file=sys.__stdout__, flush=True)
    return line


def main(argv):
    wanted = argv or MODULES
    entries = []
    for name in wanted:
        mod = importlib.import_module(f"learner_{name}")
        entries += list(mod.ENTRIES)
    with contextlib.redirect_stdout(io.StringIO()):
        with ThreadPoolExecutor(max_workers=2) as pool:
            lines = list(pool.map(grade, entries))
    if not argv:
        (HERE / "verdicts.txt").write_text("\n".join(lines) + "\n")
    n_pass = sum(" PASS " in l for l in lines)
    print(f"{n_pass}/{len(lines)} PASS", file=sys.__stdout__)


if __name__ == "__main__":
    main(sys.argv[1:])
