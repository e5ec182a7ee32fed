"""The census of every registered kernel (``kernels.VARIANTS``, ``FUSED``, ``ROWS``, ``BACKWARD``,
``SERVING``).

Each variant's kernels are compiled with the argument types their launch plans pass
(:meth:`ropelab.kernels.Variant.census_plans`) for compute capability 9.0 (the H200), once with
fast-math and once without; the rows carry the counts of :mod:`.counting`.  The numbers are
deterministic for pinned numba / numba-cuda / NVVM versions, so notebooks print them and nbval
checks them.  ``data/census/census.json`` (and ``census-sass.json``, the same with SASS counts)
hold the committed results: ``python -m ropelab census --save`` (``--sass --save
data/census/census-sass.json``) rewrites them, compiling only the builds whose input changed
(:func:`row_inputs`; ``--no-cache`` compiles all).
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
            ("BACKWARD", dict(kernels.BACKWARD)),  # the fused op's backward
            ("SERVING", dict(kernels.SERVING))]  # QK-norm + RoPE + the paged KV-cache write


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


BUILDS = (True, False)  # fast-math on, off


def _stages(sass: bool) -> tuple:
    return ("ptx", "sass") if sass else ("ptx",)


def committed_file(sass: bool = False) -> Path:
    return SASS_FILE if sass else DATA_FILE


def _recorded(sass: bool) -> dict | None:
    """The versions the committed SASS census was made with: a SASS tool not installed here
    takes its recorded version in the key (see :func:`.engine.versions`)."""
    doc = engine.read_json(SASS_FILE) if sass else None
    return doc.get("versions") if isinstance(doc, dict) else None


def build_id(row: dict) -> tuple:
    """(registry, variant, kernel, fastmath): which build a row counts."""
    return row["registry"], row["variant"], row["kernel"], row["fastmath"]


def row_inputs(sass: bool = False, found: list | None = None) -> dict:
    """``{(registry, variant, kernel, fastmath): input digest}`` of every build: what its row
    depends on (the kernel's code and signature, the build, the producers, the rules).  A row
    whose digest is unchanged is not compiled again; :func:`.guard.verify` checks that the
    digest still predicts the counts."""
    recorded = _recorded(sass)
    out = {}
    for t in targets() if found is None else found:
        for fastmath in BUILDS:
            out[t["registry"], t["variant"], t["kernel"], fastmath] = engine.cache_key(
                "registered", [t["fn"]], stages=_stages(sass), recorded=recorded,
                signature=str(t["signature"]), fastmath=fastmath,
                target=[t["registry"], t["variant"], t["kernel"]])
    return out


def cache_key(sass: bool = False, inputs: dict | None = None) -> str:
    """The census's key: the digest of its rows' inputs (:func:`row_inputs`), in order."""
    inputs = row_inputs(sass) if inputs is None else inputs
    listed = [[*ident, digest] for ident, digest in inputs.items()]
    return engine.cache_key("registered", stages=_stages(sass), recorded=_recorded(sass),
                            sass=sass, rows=listed)


def compile_rows(payload):
    """(In the child.)  Every target, fast-math on and off: one row per build.

    ``payload``: ``{"sass": bool}``, and optionally ``"only": [[registry, variant, kernel,
    fastmath], ...]`` to compile those builds alone (a rebuild keeps the rows whose input is
    unchanged; the guard, :mod:`.guard`, compiles a sample).
    """
    from numba import cuda

    from .sass import ptx_to_sass

    sass = bool(payload and payload.get("sass"))
    only = payload.get("only") if payload else None
    only = None if only is None else {tuple(x) for x in only}
    for t in targets():
        for fastmath in BUILDS:
            ident = (t["registry"], t["variant"], t["kernel"], fastmath)
            if only is not None and ident not in only:
                continue

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


def compile_fresh(idents, sass: bool = False, *, show: bool = True) -> dict:
    """``{ident: row}`` of the builds ``idents`` compiled now, in the child, no cache read."""
    idents = [list(i) for i in idents]
    rows = engine.run_child("ropelab.measure.census.registered", {"sass": sass, "only": idents},
                            total=len(idents), label="census", show=show)
    return {build_id(r): r for r in rows}


def _build(sass: bool, found: list, inputs: dict, reuse: dict, show: bool) -> dict:
    todo = [ident for ident in inputs if reuse.get(ident, {}).get("input") != inputs[ident]]
    fresh = compile_fresh(todo, sass, show=show) if todo else {}
    rows = []
    for ident, digest in inputs.items():
        row = dict(fresh[ident] if ident in fresh else reuse[ident])
        row["input"] = digest
        rows.append(row)
    return engine.document(cache_key(sass, inputs), _annotate_f64(rows), stages=_stages(sass),
                           rules=RULES, census_version=CENSUS_VERSION, sass=sass)


def _annotate_f64(rows: list[dict]) -> list[dict]:
    fast_f64 = {(r["variant"], r["kernel"]): r.get("f64", 0) for r in rows if r["fastmath"]}
    for r in rows:
        r["f64_note"] = ""
        if r.get("f64") and not r["fastmath"] and fast_f64.get((r["variant"], r["kernel"])) == 0:
            r["f64_note"] = LIBDEVICE_F64_NOTE
        elif r.get("f64"):
            r["f64_note"] = "float64 in the kernel's own arithmetic"
    return rows


def census(*, sass: bool = False, use_cache: bool = True, progress: bool = True) -> dict:
    """The instruction census of every registered kernel, fast-math and precise builds.

    Returns ``{"key", "cc", "versions", "rules", "rows": [...]}``; each row has ``registry``,
    ``variant``, ``kernel``, ``fastmath``, ``shipped`` (the build the launcher uses by default),
    ``input`` (:func:`row_inputs`) and the counts of :func:`~.counting.count_ptx` (plus
    :func:`~.counting.count_sass` with ``sass=True``), or an ``error``.  Served from the
    committed file when its key is current, then from the user cache; otherwise the builds
    whose input changed are compiled in the child (with a progress bar unless ``progress`` is
    False), the committed rows of the others kept, and the result written to the user cache.
    A build that needs a tool this install lacks (nvdisasm) is refused before compiling.
    """
    found = targets()
    inputs = row_inputs(sass, found)
    key = cache_key(sass, inputs)
    committed = committed_file(sass)
    reuse = {}
    if use_cache:
        reuse = {build_id(r): r for r in (engine.read_json(committed) or {}).get("rows", ())
                 if not r.get("error")}
    return engine.cached("census", {key: sass},
                         lambda _todo: {key: _build(sass, found, inputs, reuse, progress)},
                         committed=committed, use_cache=use_cache, needs=_stages(sass),
                         label=f"the {'SASS' if sass else 'PTX'} census of {len(found)} kernels"
                         if progress else None)[key]


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
        doc = census(sass=args.sass, use_cache=not args.no_cache)  # progress on stderr
    except engine.CensusError as exc:
        print(f"ropelab census: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=1) if args.json else format_table(doc))
    if args.save is not None:
        print(f"saved {save(doc, args.save or None)}", file=sys.stderr)
    return 1 if any(r.get("error") for r in doc["rows"]) else 0
