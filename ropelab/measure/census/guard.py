"""The determinism guard: the committed census is what the compiler makes of today's code.

Compiling every registered build again takes minutes, so the guard compiles only what can
differ: each committed row carries the digest of its input (:func:`.registered.row_inputs`);
a row whose digest changed is compiled, and so is a fixed :func:`sample` whose digest did not,
to prove the digest still predicts the counts (a compiler flag, an environment variable or a
module the digest does not follow would show up there).  ``verify(doc, fresh)`` compares.
"""

from __future__ import annotations

from . import registered

# Fields a row has that the child does not print: its digest and a note made from all rows.
_DERIVED = ("input", "f64_note")


def sample(doc: dict) -> list[tuple]:
    """One shipped build per registry, one per way a kernel is built (a variant's module, a
    factory's closure, 16-bit rows, the backward): the one with the fewest instructions in
    ``doc``, the quickest to compile."""
    best = {}
    for r in doc.get("rows", ()):
        if r.get("shipped") and not r.get("error"):
            if r["registry"] not in best or r["instructions"] < best[r["registry"]]["instructions"]:
                best[r["registry"]] = r
    return [registered.build_id(r) for r in best.values()]


def stale(doc: dict, inputs: dict) -> list[tuple]:
    """The builds whose committed row is missing or was made from another input."""
    rows = {registered.build_id(r): r for r in doc.get("rows", ())}
    return [i for i, digest in inputs.items() if rows.get(i, {}).get("input") != digest]


def to_compile(doc: dict, inputs: dict, fixed: list[tuple]) -> list[tuple]:
    """What the guard compiles: the stale builds, then the sample."""
    changed = stale(doc, inputs)
    return changed + [i for i in fixed if i not in changed]


def verify(doc: dict, inputs: dict, fresh: dict) -> list[str]:
    """What is wrong with ``doc``, given ``fresh`` (``{ident: row}`` compiled now, with or
    without SASS): rows that are not in the census any more, builds it lacks, rows made from
    another input, and counts the compiler no longer gives.  Empty when the census is current.
    """
    rows = {registered.build_id(r): r for r in doc.get("rows", ())}
    problems = [f"{'/'.join(map(str, i))}: no such build any more" for i in rows if i not in inputs]
    for ident in stale(doc, inputs):
        name = "/".join(map(str, ident))
        if ident not in rows:
            problems.append(f"{name}: missing from the census")
        elif ident not in fresh:
            problems.append(f"{name}: its code or compiler changed since the census was saved")
    for ident, got in fresh.items():
        if ident not in rows:
            continue
        saved = {k: v for k, v in rows[ident].items() if k not in _DERIVED}
        # SASS counts are compared where both sides have them (a PTX census has none, and a
        # fresh compile without nvdisasm neither); every other field on either side counts.
        fields = {k for k in set(saved) | set(got)
                  if not k.startswith("sass_") or (k in saved and k in got)}
        name = "/".join(map(str, ident))
        diff = sorted(k for k in fields if got.get(k) != saved.get(k))
        if diff:
            problems.append(f"{name}: the compiler now gives "
                            + ", ".join(f"{k} {got.get(k)!r} (saved {saved.get(k)!r})" for k in diff))
        elif rows[ident].get("input") != inputs[ident]:
            problems.append(f"{name}: same counts, but saved under another input: re-save")
    return problems
