import sys, importlib, warnings
warnings.filterwarnings("ignore")
from ropelab.grader import steps
mod = importlib.import_module(sys.argv[1])
for sid, label, fn in mod.ENTRIES:
    try:
        v = steps.check(fn, sid)
        ok = v.passed
        msg = "" if ok else str(v)[:600]
    except Exception as e:
        ok = False; msg = repr(e)[:600]
    print(sid, label, "PASS" if ok else "FAIL", msg, flush=True)
