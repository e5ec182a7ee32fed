"""The GPU side of :mod:`.timings`: the timing child, and the processes that compile first.

``python -m ropelab.grader.predict.gpu_child`` reads ``{directories, training, keys, repeats,
deadline_s}`` on stdin, times those entries in order and prints one JSON row per entry.  After
an error it checks that the CUDA context still works; if it does not (a kernel that faulted
poisons it), it exits with status 3 and the parent starts a fresh child for the rest.

``... gpu_child --compile`` (:func:`precompile` starts several) runs each of its entries once
on the timing case with numba's on-disk cache enabled on every kernel of the entries' modules,
so that the timing child loads compiled kernels instead of compiling them one by one.  Before
that, ``--probe`` checks on two kernels that the cache serves them in a second process
(:func:`cache_works`); if it does not, nothing is compiled first.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

FAULT_EXIT = 3


@contextlib.contextmanager
def gpu_launches():
    """Every ``kernel[grid, block]`` of numba's dispatcher inside the block: (kernel, grid,
    block).  ropelab's own launch path (raw launches of a bound plan) is not seen."""
    seen = []
    try:
        from numba.cuda.dispatcher import CUDADispatcher
    except ImportError:
        CUDADispatcher = None
    original = getattr(CUDADispatcher, "configure", None)
    if original is None:  # the simulator: nothing to see (a test of this module's rows)
        yield seen
        return

    def configure(self, griddim, blockdim, stream=0, sharedmem=0):
        seen.append((self, griddim, blockdim))
        return original(self, griddim, blockdim, stream, sharedmem)

    CUDADispatcher.configure = configure
    try:
        yield seen
    finally:
        CUDADispatcher.configure = original


def enable_caching(entries) -> int:
    """Turn on numba's on-disk cache for every not-yet-compiled kernel of the entries'
    modules; returns how many."""
    from numba.cuda.dispatcher import CUDADispatcher

    modules, count = set(), 0
    for e in entries:
        fn = getattr(e.fn, "py_func", e.fn)
        name = getattr(fn, "__module__", None)
        if name in sys.modules:
            modules.add(name)
    for name in modules:
        for value in list(vars(sys.modules[name]).values()):
            if isinstance(value, CUDADispatcher) and not value.overloads:
                try:
                    value.enable_caching()
                    count += 1
                except Exception:  # noqa: BLE001  (no cache for this one: it compiles)
                    pass
    return count


def _context_alive() -> bool:
    import numpy as np
    from numba import cuda

    try:
        cuda.synchronize()
        a = cuda.to_device(np.arange(4, dtype=np.float32))
        return bool(a.copy_to_host()[3] == 3)
    except Exception:  # noqa: BLE001
        return False


def _dims_text(d) -> str:
    from .features import dims
    from .rows import dims_text

    return dims_text(dims(d))


def time_entry(e, case, timer, repeats: int) -> dict:
    """One row of the CSV (see :data:`.timings.COLUMNS`)."""
    from numba import cuda

    from .. import learner_time, steps, trial
    from ..grading import first_wrong
    from .rows import error_text as _text, row as _row

    step = steps.get(e.step_id)
    t0 = time.monotonic()
    base = {"case": case.label, "bytes_moved": case.bytes_moved}
    try:
        with gpu_launches() as seen:
            result = trial.run(step, case, e.fn)
            cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        status = "error" if _context_alive() else "fault"
        return _row(e, step, status=status, error=f"run: {_text(exc)}", **base)
    base["launches"] = ";".join(f"{_dims_text(g)}x{_dims_text(b)}" for _, g, b in seen)
    regs = []
    for kernel, _, _ in seen:
        try:
            found = kernel.get_regs_per_thread()
            regs.append(str(max(found.values()) if isinstance(found, dict) else found))
        except Exception:  # noqa: BLE001
            regs.append("?")
    base["regs"] = ";".join(regs)
    wrong = first_wrong(case, result.out[:case.expected.size])
    if wrong is not None:
        return _row(e, step, status="wrong", error=f"element {wrong} is wrong on the GPU",
                    **base)
    try:
        m = learner_time.measure_on_gpu(step, e.fn, repeats, timer=timer, reference=False,
                                        case=case)
    except Exception as exc:  # noqa: BLE001
        status = "error" if _context_alive() else "fault"
        return _row(e, step, status=status, error=f"timing: {_text(exc)}", **base)
    if m["problem"] is not None:
        return _row(e, step, status="wrong", error=f"timing: {m['problem']}", **base)
    mine, copy = m["mine"], m["copy"]
    return _row(e, step, status="ok", median_us=round(mine["median_us"], 3),
                p20_us=round(mine["p20_us"], 3), p80_us=round(mine["p80_us"], 3),
                repeats=mine["repeats"], copy_us=round(copy["median_us"], 3),
                copy_p20_us=round(copy["p20_us"], 3), copy_p80_us=round(copy["p80_us"], 3),
                host_us="" if m["host_us"] is None else round(m["host_us"], 2),
                fill_us="" if m["fill_us"] is None else round(float(m["fill_us"]), 2),
                seconds=round(time.monotonic() - t0, 2), **base)


def _entries(payload):
    from pathlib import Path

    from .rows import gather

    entries = gather([Path(d) for d in payload["directories"]], payload["training"])
    by_key = {e.key: e for e in entries}
    return [by_key[k] for k in payload["keys"] if k in by_key]


def _case(cases: dict, step_id: str):
    from .. import steps

    if step_id not in cases:
        cases[step_id] = steps.get(step_id).timing_case()
    return cases[step_id]


def timing_child(payload) -> int:
    from .. import learner_time
    from ...measure import records
    from .rows import error_text as _text, row as _row

    t0 = time.monotonic()
    entries = _entries(payload)
    enable_caching(entries)
    timer = learner_time.timer_class()(repeats=payload["repeats"])
    meta = records.metadata()
    meta["timer_fill_us"] = float(timer.fill_us)
    print(json.dumps({"meta": meta}, default=str), flush=True)
    cases = {}
    for e in entries:
        if time.monotonic() - t0 > payload["deadline_s"]:
            row = _row(e, status="skipped", error="past the run's deadline")
        elif e.error:
            row = _row(e, status="error", error=e.error)
        else:
            try:
                row = time_entry(e, _case(cases, e.step_id), timer, payload["repeats"])
            except Exception as exc:  # noqa: BLE001  (building the case, say)
                row = _row(e, status="error" if _context_alive() else "fault",
                           error=_text(exc))
        print(json.dumps(row), flush=True)
        if row["status"] == "fault":
            return FAULT_EXIT
    return 0


def compile_child(payload) -> int:
    """Run each entry once (compiling into numba's cache); errors are the timing child's."""
    from .. import steps, trial

    entries = _entries(payload)
    enable_caching(entries)
    cases = {}
    for e in entries:
        if e.error:
            continue
        try:
            trial.run(steps.get(e.step_id), _case(cases, e.step_id), e.fn)
        except Exception:  # noqa: BLE001
            if not _context_alive():
                return FAULT_EXIT
    return 0


def probe_child(payload) -> int:
    """Run the entries once with the disk cache on and print how many kernels it served."""
    from numba.cuda.dispatcher import CUDADispatcher

    from .. import steps, trial

    entries = _entries(payload)
    enable_caching(entries)
    for e in entries:
        try:
            trial.run(steps.get(e.step_id), _case({}, e.step_id), e.fn)
        except Exception:  # noqa: BLE001
            pass
    hits = misses = 0
    for name in {getattr(getattr(e.fn, "py_func", e.fn), "__module__", "") for e in entries}:
        for value in vars(sys.modules.get(name) or sys).values():
            if isinstance(value, CUDADispatcher):
                hits += sum(value._cache_hits.values())
                misses += sum(value._cache_misses.values())
    print(json.dumps({"hits": hits, "misses": misses}), flush=True)
    return 0


def _run(mode: str, payload, timeout_s: float):
    """``gpu_child --MODE`` on ``payload``; its JSON lines (none after ``timeout_s``)."""
    proc = subprocess.Popen([sys.executable, "-m", "ropelab.grader.predict.gpu_child",
                             f"--{mode}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        out, _ = proc.communicate(json.dumps(payload), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def cache_works(directories, training: bool, entries) -> bool:
    """Compile two kernels into numba's disk cache in one process and load them in another:
    does the cache serve them?  (If not, compiling first in parallel would only cost time.)"""
    canary = [e.key for e in entries if e.module == "solutions"][:2] or [e.key for e in
                                                                           entries[:2]]
    payload = {"directories": [str(d) for d in directories], "training": training,
               "keys": canary}
    _run("compile", payload, 60.0)
    found = _run("probe", payload, 60.0)
    return bool(found) and found[-1].get("hits", 0) > 0


def precompile(directories, training: bool, workers: int, deadline_s: float) -> bool:
    """Compile every entry's kernels in ``workers`` processes, a module's entries together,
    when numba's disk cache works here (:func:`cache_works`); returns whether it ran."""
    from .rows import gather

    entries = [e for e in gather(directories, training) if not e.error]
    if not cache_works(directories, training, entries):
        return False
    groups = {}
    for e in entries:
        groups.setdefault(f"{e.set}/{e.module}", []).append(e.key)
    shares = [[] for _ in range(max(1, workers))]
    for keys in sorted(groups.values(), key=len, reverse=True):
        min(shares, key=len).extend(keys)
    procs = []
    for keys in (s for s in shares if s):
        payload = {"directories": [str(d) for d in directories], "training": training,
                   "keys": keys}
        p = subprocess.Popen([sys.executable, "-m", "ropelab.grader.predict.gpu_child",
                              "--compile"], stdin=subprocess.PIPE, text=True,
                             stdout=subprocess.DEVNULL)
        p.stdin.write(json.dumps(payload))
        p.stdin.close()
        procs.append(p)
    end = time.monotonic() + deadline_s
    for p in procs:
        try:
            p.wait(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()  # what it compiled is cached; the timing child compiles the rest
            p.wait()
    return True


def main(argv) -> int:
    payload = json.loads(sys.stdin.read())
    os.environ.setdefault("ROPELAB_TARGET", "gpu")
    if "--compile" in argv:
        return compile_child(payload)
    if "--probe" in argv:
        return probe_child(payload)
    return timing_child(payload)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
