"""The census of every registered kernel (``kernels.VARIANTS``, ``FUSED``, ``ROWS``, ``BACKWARD``).

Each variant's kernels are compiled with the argument types their launch plans pass
(:meth:`ropelab.kernels.Variant.census_plans`) for compute capability 9.0 (the H200), once with
fast-math and once without; the rows carry the counts of :mod:`.counting`.  The numbers are
deterministic for pinned numba / numba-cuda / NVVM versions, so notebooks print them and nbval
checks them.  ``data/census/census.json`` (and ``census-sass.json``, the same with SASS counts)
hold the committed results: ``python -m ropelab census --save`` (``--sass --save
data/census/census-sass.json``) rewrites them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import engine
from .counting import count_ptx, count_sass

DATA_FILE = engine.DATA_DIR / "census.json"
SASS_FILE = engine.DATA_DIR / "census-sass.json"
LIBDEVICE_F64_NOTE = "libdevice sinf/cosf range reduction (precise build only)"
RULES = "see ropelab.measure.census.counting"
CENSUS_VERSION = 2  # the document's layout (the counting rules are keyed by their code)


def _registries():
    """(registry name, {name: Variant}) for every kernel registry."""
    from ... import kernels

    return [("VARIANTS", dict(kernels.VARIANTS)), ("FUSED", dict(kernels.FUSED)),
            ("ROWS", dict(kernels.ROWS)),  # plain RoPE on rows (16-bit, strides, q+k)
            ("BACKWARD", dict(kernels.BACKWARD))]  # the fused op's backward


def targets() -> list[dict]:
    """One entry per kernel to compile: registry, variant, kernel name, function, argument types.

    The argument types come from the variant's own plan (the one the launcher passes), so the
    census compiles exactly what runs.  Every shipped kernel is built with fast-math on.
    """
    out, seen = [], set()
    for registry, variants in _registries():
        for name, variant in variants.items():
            for plan in variant.census_plans():
                kernel = getattr(plan.kernel, "__qualname__", plan.kernel.__name__).split(".")[-1]
                if (name, kernel) in seen:
                    continue
                seen.add((name, kernel))
                out.append({"registry": registry, "variant": name, "kernel": kernel,
                            "fn": plan.kernel, "signature": plan.argtypes(),
                            "default_fastmath": True})
    return out


def cache_key(sass: bool = False) -> str:
    """What the census depends on: the kernels' code and signatures, versions, counting rules."""
    found = targets()
    listed = [[t["registry"], t["variant"], t["kernel"], str(t["signature"])] for t in found]
    return engine.cache_key("registered", [t["fn"] for t in found], sass=sass, targets=listed)


def compile_rows(payload):
    """(In the child.)  Every target twice, fast-math on and off: one row per build.

    ``payload``: ``{"sass": bool}``, and optionally ``"fastmath": [True]`` to compile only the
    builds with those fast-math settings (the test suite's determinism check recompiles the
    shipped builds only: the precise ones double the time and share every mechanism).
    """
    from numba import cuda

    from .sass import ptx_to_sass

    sass = bool(payload and payload.get("sass"))
    builds = tuple(payload.get("fastmath", (True, False))) if payload else (True, False)
    for t in targets():
        for fastmath in builds:
            def work(t=t, fastmath=fastmath):
                ptx, _ = cuda.compile_ptx(t["fn"], t["signature"], cc=engine.CC,
                                          fastmath=fastmath)
                counts = count_ptx(ptx)
                if sass:
                    counts.update(count_sass(ptx_to_sass(ptx)))
                return counts

            yield engine.attempt({"registry": t["registry"], "variant": t["variant"],
                                  "kernel": t["kernel"], "fastmath": fastmath,
                                  "shipped": fastmath == t["default_fastmath"]}, work)


def _annotate_f64(rows: list[dict]) -> list[dict]:
    fast_f64 = {(r["variant"], r["kernel"]): r.get("f64", 0) for r in rows if r["fastmath"]}
    for r in rows:
        r["f64_note"] = ""
        if r.get("f64") and not r["fastmath"] and fast_f64.get((r["variant"], r["kernel"])) == 0:
            r["f64_note"] = LIBDEVICE_F64_NOTE
        elif r.get("f64"):
            r["f64_note"] = "float64 in the kernel's own arithmetic"
    return rows


def committed_file(sass: bool = False) -> Path:
    return SASS_FILE if sass else DATA_FILE


def census(*, sass: bool = False, use_cache: bool = True, progress: bool = False) -> dict:
    """The instruction census of every registered kernel, fast-math and precise builds.

    Returns ``{"key", "cc", "versions", "rules", "rows": [...]}``; each row has ``registry``,
    ``variant``, ``kernel``, ``fastmath``, ``shipped`` (the build the launcher uses by default)
    and the counts of :func:`~.counting.count_ptx` (plus :func:`~.counting.count_sass` with
    ``sass=True``), or an ``error``.  Served from the committed file when its key is current,
    then from the user cache; otherwise compiled in the child and written to the user cache.
    """
    key = cache_key(sass)
    user_file = engine.user_cache_dir() / f"census-{key}.json"
    if use_cache:
        doc = engine.lookup(key, committed_file(sass), user_file)
        if doc is not None:
            return doc
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=2 * len(targets()), desc="census", unit="kernel", file=sys.stderr)
    try:
        rows = engine.run_child("ropelab.measure.census.registered", {"sass": sass},
                                on_row=None if bar is None else (lambda _row: bar.update(1)))
    finally:
        if bar is not None:
            bar.close()
    doc = {"key": key, "cc": ".".join(map(str, engine.CC)), "versions": engine.versions(),
           "rules": RULES, "census_version": CENSUS_VERSION, "sass": sass,
           "rows": _annotate_f64(rows)}
    engine.remember(user_file, doc)
    return doc


def save(doc: dict, path: Path | str | None = None) -> Path:
    """Write a census next to the recorded data (the committed file of its kind by default)."""
    return engine.write_json(Path(path) if path else committed_file(doc.get("sass", False)), doc)


def row(doc: dict, variant: str, fastmath: bool = True, kernel: str | None = None) -> dict:
    """The census row of one variant's build (for notebooks)."""
    for r in doc["rows"]:
        if r["variant"] == variant and r["fastmath"] == fastmath and (
                kernel is None or r["kernel"] == kernel):
            return r
    raise KeyError(f"no census row for {variant!r} (fastmath={fastmath})")


def _fmt_table(table: dict) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(table.items(), key=lambda kv: kv[0])) or "-"


def format_table(doc: dict) -> str:
    head = (f"{'variant':<16} {'kernel':<26} {'fm':<3} {'instr':>6} {'divrem':>6} {'f64':>4} "
            f"{'sfu':<34} {'ld.global':<12} {'st.global':<12} {'local':>5}")
    lines = [f"PTX census, cc {doc['cc']}, numba-cuda {doc['versions'].get('numba-cuda')} "
             f"(fm = fast-math; * = the build the launcher uses)", head, "-" * len(head)]
    for r in doc["rows"]:
        fm = ("on" if r["fastmath"] else "off") + ("*" if r["shipped"] else " ")
        if r.get("error"):
            lines.append(f"{r['variant']:<16} {r['kernel'][:26]:<26} {fm:<3} ERROR {r['error']}")
            continue
        lines.append(
            f"{r['variant']:<16} {r['kernel'][:26]:<26} {fm:<3} {r['instructions']:>6} "
            f"{r['int_divrem']:>6} {r['f64']:>4} {_fmt_table(r['sfu'])[:34]:<34} "
            f"{_fmt_table(r['ld_global']):<12} {_fmt_table(r['st_global']):<12} "
            f"{r['local_bytes']:>5}")
        if "sass_instructions" in r:
            lines.append(f"{'':<16} {'  SASS':<26} {'':<3} {r['sass_instructions']:>6} "
                         f"{'':>6} {r['sass_f64']:>4} {_fmt_table(r['sass_mufu'])[:34]:<34} "
                         f"{_fmt_table(r['sass_ldg']):<12} {_fmt_table(r['sass_stg']):<12}")
    for note in sorted({r["f64_note"] for r in doc["rows"] if r.get("f64_note")}):
        lines.append(f"f64 note: {note}")
    return "\n".join(lines)


def run_cli(args) -> int:
    """``python -m ropelab census``: print (and optionally save) the instruction census."""
    try:
        doc = census(sass=args.sass, use_cache=not args.no_cache, progress=not args.json)
    except engine.CensusError as exc:
        print(f"ropelab census: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=1) if args.json else format_table(doc))
    if args.save is not None:
        print(f"saved {save(doc, args.save or None)}", file=sys.stderr)
    return 1 if any(r.get("error") for r in doc["rows"]) else 0
