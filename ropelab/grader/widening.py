"""Where a kernel computes in float64, in its own source: the operations whose operands widened.

The census counts float64 instructions; it cannot say which line made them.  Numba's typing
can: every operation of the typed IR has the types its operands had and the types the chosen
implementation takes.  An operation widens when it runs in float64 (its implementation takes or
returns float64) although some operand is not a float64: ``pair < n_pairs`` with an int32 and a
uint64 (no integer type holds both, so Numba compares in float64), ``positions[row] *
inv_freq[lane]`` (int32 times float32), ``x * 2.0`` (a bare literal is a float64), ``a / b`` of
two integers, ``math.pow(base, 2)``.  Operations on operands that are float64 already are the
consequence, not the cause, and are not reported; nor are operations whose float64 operand an
earlier operation widened (``x0 * c`` after ``c = math.cos(a float64)``).

:func:`lookup` types the kernel in the census child (:mod:`ropelab.measure.census.widening`,
the simulator off) and :func:`lines_for` words what it found on the kernel's own source lines; results are cached under the census job's key (the
kernel's code, its signature, the compiler versions) in the user cache, and with the exercises'
census in ``data/census/exercises.json`` (committed, written by ``python -m ropelab exercises
--verify --save-census``).
"""

from __future__ import annotations

import sys

from ..measure.census import engine
from ..measure.census import widening as typed_ir
from . import kernel_census

# The committed entries live in the exercises' census cache, under keys of their own: the
# grader's forked children already hand back what they used of it (kernel_census.USED), and
# ``--verify --save-census`` writes it (kernel_census.save_used).
_PREFIX = "widening-"
_SHOWN = 3  # findings listed in a verdict; the first ones are what the learner fixes first


# --------------------------------------------------------------------------------------------
# The parent: cached findings, in words
# --------------------------------------------------------------------------------------------

def _user_file():
    return engine.user_cache_dir() / "exercise-widening.json"


def _read(path) -> dict:
    doc = engine.read_json(path)
    entries = doc.get("entries") if isinstance(doc, dict) else None
    return entries if isinstance(entries, dict) else {}


def lookup(kernel, signature: str) -> list | None:
    """The widening findings of ``kernel`` compiled with ``signature``: cached, or typed in a
    child; None when that cannot be done here."""
    try:
        job = kernel_census.ship_kernel(kernel)
        # the census job's key, and this module's code: a new rule here is a new finding
        key = (_PREFIX + kernel_census.job_key(job, signature)
               + engine.code_digest(sys.modules[__name__])[:8]
               + engine.code_digest(typed_ir)[:8])
    except Exception:  # noqa: BLE001  (a kernel the census cannot ship: nothing to say)
        return None
    entry = {**kernel_census.committed(), **_read(_user_file())}.get(key)
    if not isinstance(entry, dict) or "widening" not in entry:
        try:
            rows = engine.run_child("ropelab.measure.census.widening",
                                    [{"key": key, "job": job, "signature": signature}])
        except engine.CensusError:
            return None
        if not rows or rows[0].get("error"):
            return None
        entry = {"widening": rows[0]["findings"]}
        try:  # a read-only home only costs the next check another typing
            engine.write_json(_user_file(), {"rules": "ropelab.measure.census.widening.findings",
                                             "entries": {**_read(_user_file()), key: entry}})
        except OSError:
            pass
    kernel_census.USED[key] = entry
    return entry["widening"]


def _reason(finding: dict) -> str:
    """Why the operation is a float64 one, and the fix."""
    kinds = [o["type"] for o in finding["operands"]]
    ints = [t for t in kinds if t.startswith(("int", "uint"))]
    if finding["op"] == "call":
        return (f"{finding['callee']} is computed in float64 here: give it float32 arguments "
                "(float32(...) around integers and literals)")
    if any(o["literal"] and o["type"] == "float64" for o in finding["operands"]):
        return "a bare float literal is a float64: write it as float32(...)"
    if finding["symbol"] in ("/", "/=") and len(ints) == 2:
        return "an integer divided by an integer is a float64 in Numba: divide float32 values"
    if len(ints) == 2 and {t.startswith("u") for t in ints} == {True, False}:
        return ("a signed and an unsigned integer: no integer type holds both, so Numba "
                "computes in float64; make both unsigned, uint64(...) around the signed one")
    if ints and any(t == "float32" for t in kinds):
        return "an integer with a float32 gives a float64 in Numba: convert it, float32(...)"
    return "Numba computes this in float64: make every operand a float32"


def lines_for(kernel, found: list) -> list[str]:
    """Verdict lines for ``found`` (from :func:`lookup`), with the learner's line numbers."""
    fn = kernel_census.python_function(kernel)
    try:
        source = kernel_census.function_source(fn).splitlines()
        first = fn.__code__.co_firstlineno
    except (OSError, TypeError, AttributeError):
        source, first = [], 1
    out = []
    for f in found[:_SHOWN]:
        text = source[f["line"] - 1].strip() if 0 < f["line"] <= len(source) else ""
        parts = []
        for o in f["operands"]:
            origin = f", {o['origin']}" if o.get("origin") else ""
            parts.append(f"{o['words']} ({o['type']}{origin})")
        if f["op"] == "call":
            what = f"{f['callee']}({', '.join(parts)})"
        else:
            what = f" {f['symbol']} ".join(parts)
        shown = f" `{text}`" if text else ""
        out.append(f"  line {first + f['line'] - 1}{shown}: {what}: {_reason(f)}")
    if len(found) > _SHOWN:
        out.append(f"  ... and {len(found) - _SHOWN} more")
    return out
