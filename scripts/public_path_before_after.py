"""What a caller pays: the public functions before and after the one-launch-path rework, same run.

Run on a GPU host from the repository root:

    git archive e4c1533 ropelab | tar -x -C .old      # the code the review measured
    python3 scripts/public_path_before_after.py        # records data/public_path/

Each side runs in its own process (both packages are called ``ropelab``) and measures, on
PyTorch tensors with device positions, as a user calls the functions:

* ``host_us``: wall time per call over 300 back-to-back calls on a small shape, ended by one
  synchronize (the GPU work is shorter than the call, so this is the host's cost, syncs included);
* ``event_us``: CUDA events around one call after a 1 GiB fill kernel (which keeps the GPU busy
  while the host works), median of 30: what the call costs on the GPU's timeline.  A call that
  synchronizes inside makes the GPU wait for the host, and that wait lands between the events.

The new side also times ``check_positions=True``, the opt-in synchronous check, which puts back
the device-to-host copy the old code made on every call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
import torch
import ropelab
from numba import cuda

side = sys.argv[1]
rows = []
fill = torch.empty(2**28, device="cuda")  # 1 GiB


def host_us(fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def event_us(fn, n=30):
    fn()
    torch.cuda.synchronize()
    out = []
    for i in range(n):
        fill.fill_(float(i))
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3)
    return float(np.median(out))


def plain(tokens, hidden, variant, **kw):
    x = torch.randn(tokens, hidden, device="cuda")
    out = torch.empty_like(x)
    pos = torch.arange(tokens, device="cuda", dtype=torch.int32)
    return lambda: ropelab.rope(x, variant=variant, positions=pos, out=out, **kw)


def fused_call(tokens):
    try:  # the check harness moved from ropelab.fused to ropelab.check after e4c1533
        from ropelab.check import random_inputs
    except ImportError:
        from ropelab.fused import random_inputs
    heads = (24, 24, 24)
    qkv, wq, wk, pos = random_inputs(np.random.default_rng(0), tokens, heads, 128, "bfloat16")
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()
    q, a, b, p = t(qkv), t(wq), t(wk), t(pos)  # uint16 bit patterns: what the old API takes
    kw = dict(num_heads_q=24, num_heads_k=24, num_heads_v=24, head_dim=128)
    return lambda: ropelab.fused_qknorm_rope(q, q_weight=a, k_weight=b, positions=p, **kw)


def lazy(make, *args):  # build inputs when the case runs, inside its try
    box = []
    return lambda: (box or box.append(make(*args)) or box)[0]()


plain_l = lambda *a, **k: lazy(lambda: plain(*a, **k))  # noqa: E731
fused_l = lambda t: lazy(fused_call, t)  # noqa: E731
cases = [("rope flat", (64, 512), plain(64, 512, "flat"), None),
         ("rope pack4", (32768, 4096), None, plain(32768, 4096, "pack4")),
         ("rope flat", (4096, 512), None, plain(4096, 512, "flat")),
         ("fused_qknorm_rope bf16", (64, "flux heads"), fused_l(64), None),
         ("fused_qknorm_rope bf16", (4096, "flux_1024"), None, fused_l(4096))]
if side == "after":
    cases += [("rope flat check_positions=True", (64, 512),
               plain(64, 512, "flat", check_positions=True), None),
              ("rope pack4 check_positions=True", (32768, 4096), None,
               plain(32768, 4096, "pack4", check_positions=True))]
for name, shape, small, big in cases:
    row = {"side": side, "call": name, "shape": "x".join(map(str, shape)),
           "host_us": None, "event_us": None, "error": ""}
    try:  # one failing call (the old API on some input) must not lose the other rows
        if small is not None:
            row["host_us"] = round(host_us(small), 2)
        if big is not None:
            row["event_us"] = round(event_us(big), 2)
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"[:200]
    rows.append(row)
print("ROWS " + json.dumps(rows))
print("FROM " + ropelab.__file__)
"""


def run_side(side: str, path: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([path] + os.environ.get("PYTHONPATH", "").split(os.pathsep)),
               ROPELAB_TARGET="gpu", ROPELAB_QUIET="1")
    # cwd = that side's root: ``python -c`` puts the current directory first on sys.path, ahead
    # of PYTHONPATH, so running both sides from this checkout would import the new code twice.
    done = subprocess.run([sys.executable, "-c", CHILD, side], env=env, capture_output=True,
                          text=True, timeout=400, cwd=path)
    if done.returncode:
        print(done.stdout[-3000:], done.stderr[-3000:])
        raise SystemExit(f"{side} side failed")
    lines = done.stdout.splitlines()
    origin = [ln[5:] for ln in lines if ln.startswith("FROM ")][-1]
    if not origin.startswith(os.path.abspath(path)):
        raise SystemExit(f"the {side} side imported {origin}, not the package under {path}")
    return json.loads([ln for ln in lines if ln.startswith("ROWS ")][-1][5:])


def main() -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = run_side("before", os.path.join(here, ".old")) + run_side("after", here)
    sys.path.insert(0, here)
    from ropelab.measure import records

    method = ("PyTorch tensors and device int32 positions, called as a user calls the public "
              "functions. host_us: wall time per call over 300 back-to-back calls on a small "
              "shape, one synchronize at the end (the GPU work is shorter than a call). event_us: "
              "CUDA events around one call after a 1 GiB torch fill (keeps the GPU busy while the "
              "host works), median of 30. 'before' is commit e4c1533 (the reviewed code), "
              "'after' this checkout, each in its own process in the same session.")
    path = records.save("public_path", rows, method=method)
    for r in rows:
        print(f"{r['side']:<7} {r['call']:<36} {r['shape']:<14} host {r['host_us']!s:>9} us   "
              f"events {r['event_us']!s:>9} us {r['error']}")
    print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
