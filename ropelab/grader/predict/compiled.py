"""The PTX and register count of a kernel, compiled for the H200 without a GPU, and cached.

A kernel is shipped to a compiler process as the grader's census ships it
(:func:`ropelab.measure.census.shipped.ship_kernel` / ``ship_reference``), compiled there with
``cuda.compile_ptx`` for compute capability 9.0 with the kernel's own fast-math setting (the
GPU runs what the decorator says), and linked to a cubin by nvJitLink (part of
``cuda-bindings``, which the course's install brings; no ``nvdisasm`` needed) for the register
count.  The PTX comes back compacted (:func:`compact`: the long mangled names shortened, the
parameter list dropped) and is counted by :func:`.ptx.analyze` in the caller, with the launch's
argument values: a counting rule can change without a recompile.

The cache key is the census's key of the same job and signature
(:func:`~ropelab.measure.census.shipped.job_key`: the kernel's code, what it uses, the compiler
versions), the fast-math flag and the code of this module.  Entries are read from
``data/predict/kernels.json`` (committed: the kernels the notebooks and tests need) and then
from the user cache; new ones go to the user cache.
"""

from __future__ import annotations

import hashlib
import re
import sys

from ...measure import records
from ...measure.census import engine, shipped

DATA_FILE = records.DATA_DIR / "predict" / "kernels.json"
CLIENT = "ropelab.grader.predict.compiled"


def _rules_digest() -> str:
    return engine.code_digest(sys.modules[__name__])


def task_key(job: dict, signature: str, fastmath: bool) -> str:
    head = f"{shipped.job_key(job, signature)}|fastmath={bool(fastmath)}|{_rules_digest()}"
    return hashlib.sha256(head.encode()).hexdigest()[:24]


# --------------------------------------------------------------------------------------------
# The child (started by engine.run_child with the simulator off)
# --------------------------------------------------------------------------------------------

def link_report(ptx_text: str) -> dict:
    """Registers, stack, spills and static shared memory from nvJitLink's verbose link."""
    from cuda.bindings import nvjitlink

    data = ptx_text.encode()
    handle = nvjitlink.create(2, [f"-arch=sm_{engine.CC[0]}{engine.CC[1]}", "-verbose"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    return parse_link_log(log.decode(errors="replace"))


def parse_link_log(text: str) -> dict:
    """The numbers of a ``ptxas info`` report (the last entry function's)."""
    def last(pattern, default=0):
        found = re.findall(pattern, text)
        return int(found[-1]) if found else default

    return {"regs": last(r"Used (\d+) registers"),
            "stack_bytes": last(r"(\d+) bytes stack frame"),
            "spill_stores": last(r"(\d+) bytes spill stores"),
            "spill_loads": last(r"(\d+) bytes spill loads")}


def compact(ptx_text: str) -> str:
    """The PTX without comments, blank lines and the entry's parameter declarations, the
    mangled names shortened to ``K`` (``K_param_4`` keeps its index)."""
    lines = []
    for raw in ptx_text.splitlines():
        line = raw.split("//", 1)[0].rstrip()
        if not line.strip() or line.strip().startswith(".param"):
            continue
        lines.append(re.sub(r"_ZN\w*?(?=_param_\d+\b)|_ZN\w+", "K", line))
    return "\n".join(lines) + "\n"


def _rebuild(job: dict):
    """The kernel a shipped job describes, by the census's own rebuild
    (:func:`ropelab.measure.census.shipped.rebuild_job`): one shipping format for both
    children."""
    return shipped.rebuild_job(job, [0])


def compile_rows(tasks: list[dict]):
    """(In the child.)  ``{key, job, signature, fastmath}`` -> ``{key, ptx, regs, ...}``."""
    from numba import cuda

    for task in tasks:
        def work(task=task):
            fn = _rebuild(task["job"])
            fn = getattr(fn, "py_func", fn)
            text, _ = cuda.compile_ptx(fn, task["signature"], cc=engine.CC,
                                       fastmath=bool(task["fastmath"]))
            return {"ptx": compact(text), **link_report(text)}

        yield engine.attempt({"key": task["key"]}, work)


# --------------------------------------------------------------------------------------------
# The parent: cache, then one child for whatever is missing
# --------------------------------------------------------------------------------------------

def _user_file():
    return engine.user_cache_dir() / "predict-kernels.json"


def _read(path) -> dict:
    doc = engine.read_json(path)
    entries = doc.get("entries") if isinstance(doc, dict) else None
    return entries if isinstance(entries, dict) else {}


def _write(path, entries: dict) -> None:
    engine.write_json(path, {"rules": "compact PTX (cc 9.0) + nvJitLink -verbose",
                             "entries": dict(sorted(entries.items()))})


USED: dict = {}  # every entry this process looked up or computed (for save_used)


def compiled(tasks: list[tuple], progress=None) -> list[dict]:
    """PTX and registers of each ``(job, signature, fastmath)``: from the caches, or compiled in
    one child process (``progress(done, total)`` is called as rows arrive).  A kernel that does
    not compile gets a row with its ``error``, not cached."""
    keys = [task_key(*t) for t in tasks]
    found = {**_read(DATA_FILE), **_read(_user_file())}
    missing = {}
    for key, (job, signature, fastmath) in zip(keys, tasks):
        if key not in found:
            missing[key] = {"key": key, "job": job, "signature": signature,
                            "fastmath": bool(fastmath)}
    if missing:
        done = [0]

        def arrived(_row):
            done[0] += 1
            if progress is not None:
                progress(done[0], len(missing))

        rows = engine.run_child(CLIENT, list(missing.values()), on_row=arrived)
        fresh = {row.pop("key"): row for row in rows}
        if len(fresh) != len(missing):
            raise engine.CensusError(f"the compiler process answered {len(fresh)} of "
                                     f"{len(missing)} kernels")
        found.update(fresh)
        good = {k: v for k, v in fresh.items() if not v.get("error")}
        if good:
            try:
                _write(_user_file(), {**_read(_user_file()), **good})
            except OSError:
                pass  # a read-only home only costs the next prediction a recompile
    out = [found[k] for k in keys]
    USED.update({k: r for k, r in zip(keys, out) if not r.get("error")})
    return out


def save_used(path=None):
    """Replace the committed cache with the entries used in this process."""
    path = path or DATA_FILE
    _write(path, {**USED})
    return path
