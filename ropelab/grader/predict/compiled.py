"""The PTX and register count of a kernel, compiled for the H200 without a GPU, and cached.

A kernel is shipped to a compiler process as the grader's census ships it
(:func:`ropelab.measure.census.shipped.ship_kernel` / ``ship_reference``) and compiled and
linked there (:mod:`ropelab.measure.census.linked`: compact PTX, registers, stack, spills).
The PTX is counted by :func:`.ptx.analyze` in the caller, with the launch's argument values: a
counting rule can change without a recompile.

The cache key is the census's key of the same compile
(:func:`~ropelab.measure.census.shipped.compile_key`: the kernel's code, what it uses, the
compiler versions; not the per-pass rules of the census, which change no PTX), the fast-math flag and the code of this module and of the child's.  Entries are read
from ``data/predict/kernels.json`` (committed: the kernels the notebooks and tests need) and
then from the user cache; new ones go to the user cache.
"""

from __future__ import annotations

import hashlib
import sys

from ...measure import records
from ...measure.census import engine, linked, shipped

DATA_FILE = records.DATA_DIR / "predict" / "kernels.json"
CLIENT = "ropelab.measure.census.linked"


def _rules_digest() -> str:
    return engine.code_digest(sys.modules[__name__], linked)


def task_key(job: dict, signature: str, fastmath: bool) -> str:
    head = f"{shipped.compile_key(job, signature)}|fastmath={bool(fastmath)}|{_rules_digest()}"
    return hashlib.sha256(head.encode()).hexdigest()[:24]


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
