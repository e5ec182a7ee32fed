"""Instruction census of every registered kernel, from PTX compiled without a GPU.

``census()`` compiles each variant's kernels with the argument types their launch plans pass
(:meth:`ropelab.kernels.Variant.census_plans`) for compute capability 9.0 (the H200), once with fast-math and once without, and counts what the compiler emitted.
The numbers are deterministic for pinned numba / numba-cuda / NVVM versions, so notebooks can
print them and nbval can check them.

Why a child process: under the simulator ``cuda.compile_ptx`` is None, and numba-cuda picks
simulator or real compiler once per process.  The census therefore runs
``python -m ropelab.measure.census --child`` with ``NUMBA_ENABLE_CUDASIM=0`` and ``ROPELAB_TARGET=gpu``;
with an explicit ``cc`` the real compiler needs no driver.  Kernel modules import without a
driver because their dispatchers are lazy.

Counting rules (PTX, one compiled kernel at a time; predicated instructions count once):

``instructions``
    Every PTX instruction in the kernel body: lines that are not directives (``.reg``,
    ``.loc`` ...), labels, braces or comments.  ``ld.param`` counts too.
``int_divrem``
    Integer ``div.*``/``rem.*`` instructions (``.s32 .u32 .s64 .u64``).  None of them is one
    machine instruction: a 32-bit one becomes a ~20-instruction sequence in SASS, a 64-bit one
    a call to a longer subroutine.  LLVM guards each 64-bit division with a test "do both
    operands fit in 32 bits?" and emits both paths, so one Python ``//`` on int64 values
    shows up as one ``div.s64`` plus one ``div.u32``.  ``int_divrem_ops`` breaks the count down
    by opcode.
``fdiv_approx``
    ``div.approx`` float divisions (what fast-math makes of ``/``: a reciprocal and a multiply).
``sfu``
    Special-function-unit approximations by name: ``sin``, ``cos``, ``ex2``, ``lg2``, ``rsqrt``,
    ``rcp``, ``sqrt``, ``tanh`` (``*.approx*`` opcodes).  ``math.pow`` under fast-math is one
    ``lg2`` plus one ``ex2``.
``f64``
    Instructions with a ``.f64`` type anywhere in the opcode (``cvt.f64.f32``, ``mul.f64``,
    ``fma.rn.f64`` ...).  ``f64_note`` explains a nonzero count when the fast-math build of the
    same kernel has none: the float64 then comes from libdevice's precise ``sinf``/``cosf``,
    whose slow path (Payne-Hanek range reduction for large angles) is linked in, not from the
    kernel's own arithmetic.
``ld_global`` / ``st_global``
    Global loads and stores by access width in bits (``ld.global.v4.f32`` is 128, ``.nc``
    loads included), as ``{"32": n, "128": m}``.
``ld_local`` / ``st_local`` / ``local_bytes``
    Local-memory (per-thread stack) traffic and the size of the ``__local_depot`` frame.
``calls``
    ``call`` instructions (numba inlines libdevice, so normally zero).

With ``sass=True`` the PTX is linked to a cubin through nvJitLink and disassembled with
``nvdisasm`` (pip package ``nvidia-cuda-nvdisasm``); the SASS counts (``sass_*`` fields) are
instructions without NOPs, ``MUFU`` ops by function, ``LDG``/``STG`` by width, and double
precision ops (``D*`` opcodes and ``.F64`` conversions).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .. import resources

CENSUS_VERSION = 1  # bump when the counting rules change: it invalidates cached results
CC = (9, 0)
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # ropelab/: the kernel sources are hashed from here
DATA_FILE = resources.data_dir() / "census" / "census.json"

_SFU = ("sin", "cos", "ex2", "lg2", "rsqrt", "rcp", "sqrt", "tanh")
_TYPE_BITS = {"8": 8, "16": 16, "32": 32, "64": 64, "128": 128}
LIBDEVICE_F64_NOTE = "libdevice sinf/cosf range reduction (precise build only)"


class CensusError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# Pure counting (tested on hand-written PTX)
# --------------------------------------------------------------------------------------------

def _instruction_lines(ptx: str):
    """Yield the opcode (e.g. ``ld.global.nc.f32``) of every instruction in ``ptx``."""
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line or line[0] in ".{}()" or line.endswith(":") or line.endswith(","):
            continue
        if line.startswith("@"):  # predicate guard: "@%p1 bra ..." / "@!%p2 ..."
            parts = line.split(None, 1)
            if len(parts) < 2:
                continue
            line = parts[1]
        opcode = line.split(None, 1)[0].rstrip(";")
        if not re.match(r"^[a-z]", opcode):
            continue
        yield opcode


def _access_bits(opcode: str) -> int:
    parts = opcode.split(".")
    lanes = 1
    for p in parts:
        if p in ("v2", "v4", "v8"):
            lanes = int(p[1:])
    bits = 0
    for p in reversed(parts):
        m = re.fullmatch(r"[bfsu](\d+)", p)
        if m and m.group(1) in _TYPE_BITS:
            bits = int(m.group(1))
            break
    return lanes * bits


def count_ptx(ptx: str) -> dict:
    """Count instructions in one kernel's PTX by the rules in the module docstring."""
    counts = {
        "instructions": 0, "int_divrem": 0, "int_divrem_ops": {}, "fdiv_approx": 0,
        "sfu": {}, "f64": 0, "ld_global": {}, "st_global": {}, "ld_local": 0, "st_local": 0,
        "local_bytes": 0, "calls": 0,
    }
    for opcode in _instruction_lines(ptx):
        counts["instructions"] += 1
        parts = opcode.split(".")
        head = parts[0]
        if head in ("div", "rem") and any(p in ("s32", "u32", "s64", "u64", "s16", "u16")
                                          for p in parts[1:]):
            counts["int_divrem"] += 1
            key = f"{head}.{parts[-1]}"
            counts["int_divrem_ops"][key] = counts["int_divrem_ops"].get(key, 0) + 1
        elif head == "div" and "approx" in parts:
            counts["fdiv_approx"] += 1
        if "approx" in parts and head in _SFU:
            counts["sfu"][head] = counts["sfu"].get(head, 0) + 1
        if "f64" in parts:
            counts["f64"] += 1
        if head in ("ld", "st") and len(parts) > 1:
            space = parts[1]
            if space == "global":
                table = counts["ld_global" if head == "ld" else "st_global"]
                key = str(_access_bits(opcode))
                table[key] = table.get(key, 0) + 1
            elif space == "local":
                counts["ld_local" if head == "ld" else "st_local"] += 1
        if head == "call":
            counts["calls"] += 1
    for m in re.finditer(r"\.local\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", ptx):
        counts["local_bytes"] += int(m.group(1))
    return counts


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


def count_sass(sass: str) -> dict:
    """Counts from ``nvdisasm -c`` output: instructions, MUFU ops, LDG/STG widths, double ops."""
    counts = {"sass_instructions": 0, "sass_mufu": {}, "sass_ldg": {}, "sass_stg": {},
              "sass_f64": 0, "sass_calls": 0}
    for m in _SASS_LINE.finditer(sass):
        op = m.group(1)
        if op == "NOP":
            continue
        counts["sass_instructions"] += 1
        parts = op.split(".")
        if parts[0] == "MUFU" and len(parts) > 1:
            counts["sass_mufu"][parts[1]] = counts["sass_mufu"].get(parts[1], 0) + 1
        elif parts[0] in ("LDG", "STG"):
            width = next((p for p in parts[1:] if p in ("64", "128", "U8", "S8", "U16", "S16")),
                         "32")
            table = counts["sass_ldg" if parts[0] == "LDG" else "sass_stg"]
            table[width] = table.get(width, 0) + 1
        if parts[0] in ("DADD", "DMUL", "DFMA", "DSETP", "DMNMX") or "F64" in parts:
            counts["sass_f64"] += 1
        if parts[0] == "CALL":
            counts["sass_calls"] += 1
    return counts


# --------------------------------------------------------------------------------------------
# What to compile
# --------------------------------------------------------------------------------------------

def _registries():
    """(registry name, {name: Variant}) for every kernel registry."""
    from .. import kernels

    return [("VARIANTS", dict(kernels.VARIANTS)), ("FUSED", dict(kernels.FUSED)),
            ("ROWS", dict(kernels.ROWS))]  # h-rope16: plain RoPE on rows (16-bit, strides, q+k)


def targets() -> list[dict]:
    """One entry per kernel to compile: registry, variant, kernel name, function, argument types.

    The argument types come from the variant's own :class:`~ropelab.kernels.plan.Plan` (the
    one :func:`~ropelab.kernels.launch.launch` passes), so the census compiles exactly what
    runs.  Every shipped kernel is built with fast-math on by default.
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


def _versions() -> dict:
    out = {}
    for dist in ("numba", "numba-cuda", "llvmlite", "nvidia-nvvm", "cuda-bindings",
                 "nvidia-cuda-nvdisasm"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def cache_key(sass: bool = False) -> str:
    """Hash of everything the census depends on: versions, counting rules, kernel sources."""
    h = hashlib.sha256()
    h.update(json.dumps({"census": CENSUS_VERSION, "cc": CC, "sass": sass,
                         "versions": _versions()}, sort_keys=True).encode())
    for path in sorted((PACKAGE_DIR / "kernels").rglob("*.py")):
        h.update(path.relative_to(PACKAGE_DIR).as_posix().encode())
        # Excerpt markers ("# ex: begin NAME", see ropelab.course.display) compile to nothing:
        # adding one must not invalidate the committed census.
        h.update(re.sub(rb"(?m)^[ \t]*# ex: (begin|end) \S+[ \t]*\n", b"", path.read_bytes()))
    for helper in ("problem.py", "measure/census.py", "bf16.py"):
        h.update((PACKAGE_DIR / helper).read_bytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# The child process: real compiler, no driver
# --------------------------------------------------------------------------------------------

def _find_nvdisasm() -> str | None:
    import shutil

    found = shutil.which("nvdisasm")
    if found:
        return found
    for base in map(Path, sys.path):
        for cand in (base / "nvidia" / "cu13" / "bin" / "nvdisasm",
                     base / "nvidia" / "cuda_nvdisasm" / "bin" / "nvdisasm"):
            if cand.is_file():
                return str(cand)
    return None


def ptx_to_sass(ptx: str, cc=CC) -> str:
    """Link PTX to a cubin with nvJitLink and disassemble it with nvdisasm."""
    import tempfile

    from cuda.bindings import nvjitlink

    nvdisasm = _find_nvdisasm()
    if nvdisasm is None:
        raise CensusError("nvdisasm not found; pip install nvidia-cuda-nvdisasm (the 'sass' extra)")
    data = ptx.encode()
    handle = nvjitlink.create(1, [f"-arch=sm_{cc[0]}{cc[1]}"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
    finally:
        nvjitlink.destroy(handle)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(bytes(cubin))
        done = subprocess.run([nvdisasm, "-c", str(path)], capture_output=True, text=True)
    if done.returncode:
        raise CensusError(f"nvdisasm failed: {done.stderr.strip()}")
    return done.stdout


def _child(sass: bool) -> int:
    """Compile every target twice (fast-math on/off); print one JSON line per kernel build."""
    from numba import cuda

    if cuda.compile_ptx is None:
        print(json.dumps({"error": "compile_ptx unavailable (simulator active in the child)"}),
              flush=True)
        return 1
    for t in targets():
        for fastmath in (True, False):
            row = {"registry": t["registry"], "variant": t["variant"], "kernel": t["kernel"],
                   "fastmath": fastmath, "shipped": fastmath == t["default_fastmath"]}
            try:
                ptx, _ = cuda.compile_ptx(t["fn"], t["signature"], cc=CC, fastmath=fastmath)
                row.update(count_ptx(ptx))
                if sass:
                    row.update(count_sass(ptx_to_sass(ptx)))
                row["error"] = None
            except Exception as exc:  # one broken kernel must not hide the others' counts
                row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            print(json.dumps(row), flush=True)
    return 0


def _annotate_f64(rows: list[dict]) -> list[dict]:
    fast_f64 = {(r["variant"], r["kernel"]): r.get("f64", 0) for r in rows if r["fastmath"]}
    for r in rows:
        r["f64_note"] = ""
        if r.get("f64") and not r["fastmath"] and fast_f64.get((r["variant"], r["kernel"])) == 0:
            r["f64_note"] = LIBDEVICE_F64_NOTE
        elif r.get("f64"):
            r["f64_note"] = "float64 in the kernel's own arithmetic"
    return rows


def _run_child(sass: bool, progress: bool) -> list[dict]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="gpu", ROPELAB_QUIET="1")
    cmd = [sys.executable, "-m", "ropelab.measure.census", "--child"] + (["--sass"] if sass else [])
    total = None
    bar = None
    if progress:
        from tqdm import tqdm

        total = 2 * _count_targets_cheaply()
        bar = tqdm(total=total, desc="census", unit="kernel", file=sys.stderr)
    rows = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=str(PACKAGE_DIR.parent))
    for line in proc.stdout:
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if "error" in row and "variant" not in row:
            raise CensusError(row["error"])
        rows.append(row)
        if bar is not None:
            bar.update(1)
    err = proc.stderr.read()
    proc.wait()
    if bar is not None:
        bar.close()
    if proc.returncode:
        raise CensusError(f"census child failed (exit {proc.returncode}): {err.strip()[-2000:]}")
    return _annotate_f64(rows)


def _count_targets_cheaply() -> int:
    """Number of kernels to compile, for the progress bar (imports only the registries)."""
    try:
        return len(targets())
    except Exception:
        return 0


# --------------------------------------------------------------------------------------------
# Public entry point, with a cache
# --------------------------------------------------------------------------------------------

def _user_cache_dir() -> Path:
    root = os.environ.get("ROPELAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ropelab")
    return Path(root)


def _read_cached(path: Path, key: str):
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if doc.get("key") == key else None


def census(*, sass: bool = False, use_cache: bool = True, progress: bool = False) -> dict:
    """The instruction census of every registered kernel, fast-math and precise builds.

    Returns ``{"key", "cc", "versions", "rules", "rows": [...]}``; each row has ``registry``,
    ``variant``, ``kernel``, ``fastmath``, ``shipped`` (the build the launcher uses by default)
    and the counts of :func:`count_ptx` (plus :func:`count_sass` with ``sass=True``), or an
    ``error``.  Results are cached per :func:`cache_key`: first ``data/census/census.json``
    (committed), then the user cache (``$ROPELAB_CACHE`` or ``~/.cache/ropelab``).
    """
    key = cache_key(sass)
    user_file = _user_cache_dir() / f"census-{key}.json"
    if use_cache:
        for path in (DATA_FILE, user_file):
            doc = _read_cached(path, key)
            if doc is not None:
                return doc
    rows = _run_child(sass, progress)
    doc = {"key": key, "cc": ".".join(map(str, CC)), "versions": _versions(),
           "rules": "see ropelab.measure.census module docstring", "census_version": CENSUS_VERSION,
           "sass": sass, "rows": rows}
    try:
        user_file.parent.mkdir(parents=True, exist_ok=True)
        user_file.write_text(json.dumps(doc, indent=1) + "\n")
    except OSError:
        pass  # a read-only home only costs the next caller a recompile
    return doc


def save(doc: dict, path: Path | str | None = None) -> Path:
    """Write a census next to the recorded data (``data/census/census.json`` by default)."""
    path = Path(path) if path is not None else DATA_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


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
    notes = sorted({r["f64_note"] for r in doc["rows"] if r.get("f64_note")})
    for n in notes:
        lines.append(f"f64 note: {n}")
    return "\n".join(lines)


def run_cli(args) -> int:
    """``python -m ropelab census``: print (and optionally save) the instruction census."""
    try:
        doc = census(sass=args.sass, use_cache=not args.no_cache, progress=not args.json)
    except CensusError as exc:
        print(f"ropelab census: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(format_table(doc))
    if args.save is not None:
        path = save(doc, args.save or None)
        print(f"saved {path}", file=sys.stderr)
    return 1 if any(r.get("error") for r in doc["rows"]) else 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        sys.exit(_child(sass="--sass" in sys.argv))
    print(format_table(census(progress=True)))
