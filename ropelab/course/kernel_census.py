"""The PTX census of any kernel (a learner's included), compiled without a GPU, with a cache.

:mod:`ropelab.measure.census` counts the instructions of ropelab's registered kernels.  The exercise grader
also needs the counts of a kernel that exists only in a notebook cell.  numba-cuda picks the
simulator or the real compiler once per process, so, as :mod:`ropelab.measure.census` does, the compiling
happens in a child process (``NUMBA_ENABLE_CUDASIM=0``, an explicit compute capability, no
driver needed).  The child cannot import a notebook, so the parent *ships* the kernel: its
source text, plus a description of every global name it uses (a module, a number, a function
importable from a package, or another function from the same notebook, shipped the same way).

Counts are :func:`ropelab.measure.census.count_ptx`'s, plus three that the exercises grade on
(:func:`count_extras`).  Every result is cached under a key made of the kernel's code (its
syntax tree: comments and blank lines do not matter), what it was shipped with, the signature,
the compiler versions, and (for ropelab's own kernels, or a kernel that calls one of ropelab's
device functions) the source of ropelab's kernels.  The cache is read from
``data/census/exercises.json`` (committed, so CI and a fresh clone hit it) and then from the user
cache; new results go to the user cache.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import math
import numbers
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
from numba import cuda

from ..measure import census as ptx

EXTRAS_VERSION = 3  # bump when count_extras changes: it invalidates cached results
DATA_FILE = ptx.DATA_FILE.parent / "exercises.json"
_KERNELS_DIR = ptx.PACKAGE_DIR / "kernels"
# Modules a global may be found in by name when it has no importable home of its own (numba's
# type objects such as float32 are instances, not classes or functions).
_NAME_HOMES = ("numba", "numba.cuda", "math", "numpy")


class CensusError(RuntimeError):
    """A kernel could not be shipped to, or compiled in, the census process."""


# --------------------------------------------------------------------------------------------
# Counting (pure, tested on hand-written PTX)
# --------------------------------------------------------------------------------------------

def count_extras(ptx_text: str) -> dict:
    """Counts the exercises grade on, beyond :func:`ropelab.measure.census.count_ptx`.

    ``shfl``
        warp shuffles (``shfl.sync.*``).
    ``loads_after_store``
        global loads that come after the first global store in the PTX text.  A store to
        ``out`` may change ``x`` (the two may be the same buffer), so the compiler cannot move
        a later load above it: each such load waits for the stores before it.
    ``sincos``
        ``sin.approx`` plus ``cos.approx`` instructions.
    ``pow_in_loop``
        ``ex2.approx`` instructions (the second half of a fast-math ``pow``) inside a loop:
        between a label and a later branch back to it.  The first half, ``lg2`` of the base,
        is loop-invariant, so the compiler moves it out of the loop; ``ex2`` of the varying
        exponent stays.
    """
    ops, labels, back_edges = [], {}, []
    for raw in ptx_text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if re.fullmatch(r"[$\w]+:", line):
            labels[line[:-1]] = len(ops)
            continue
        if not line or line[0] in ".{}()":
            continue
        if line.startswith("@"):  # a predicated instruction: "@%p1 bra $L__BB0_2;"
            line = line.split(None, 1)[1] if " " in line else ""
        opcode = line.split(None, 1)[0].rstrip(";") if line else ""
        if not re.match(r"^[a-z]", opcode):
            continue
        if opcode.split(".")[0] == "bra":
            target = line.split()[-1].rstrip(";")
            if target in labels:  # defined above: a backward branch closes a loop
                back_edges.append((labels[target], len(ops)))
        ops.append(opcode)
    in_loop = set()
    for start, end in back_edges:
        in_loop.update(range(start, end + 1))
    counts = {"shfl": 0, "loads_after_store": 0, "sincos": 0, "pow_in_loop": 0}
    stored = False
    for k, opcode in enumerate(ops):
        parts = opcode.split(".")
        head, space = parts[0], parts[1] if len(parts) > 1 else ""
        if head == "shfl":
            counts["shfl"] += 1
        elif head == "st" and space == "global":
            stored = True
        elif head == "ld" and space == "global" and stored:
            counts["loads_after_store"] += 1
        elif head in ("sin", "cos") and "approx" in parts:
            counts["sincos"] += 1
        elif head == "ex2" and "approx" in parts and k in in_loop:
            counts["pow_in_loop"] += 1
    return counts


# --------------------------------------------------------------------------------------------
# Shipping a kernel: what the child needs to rebuild it
# --------------------------------------------------------------------------------------------

def python_function(kernel):
    """The plain Python function behind a ``@cuda.jit`` kernel (GPU or simulator), or None."""
    for attr in ("py_func", "fn"):  # CUDADispatcher / the simulator's FakeCUDAKernel
        fn = getattr(kernel, attr, None)
        if inspect.isfunction(fn):
            return fn
    return kernel if inspect.isfunction(kernel) else None


def function_source(fn) -> str:
    """``fn``'s source, dedented; OSError/TypeError when Python kept none (``exec`` of a
    string)."""
    return textwrap.dedent(inspect.getsource(fn))


def _names_used(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _names_used(const)
    return names


# Packages the child process imports exactly as the parent does; a function from anywhere else
# (a notebook, a solution file) is shipped as source instead.
_IMPORTABLE_ROOTS = ("ropelab", "numba", "numpy", "math", "cmath", "operator")


def _importable_home(name: str, value):
    """(module, qualname) from which the child can import ``value``, or None."""
    inner = python_function(value) or value
    module = getattr(inner, "__module__", None)
    qualname = getattr(inner, "__qualname__", None)
    if (isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname
            and module.split(".")[0] in _IMPORTABLE_ROOTS and module in sys.modules):
        found = sys.modules[module]
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is value:
            return module, qualname
    for home in _NAME_HOMES:
        mod = sys.modules.get(home)
        if mod is not None and getattr(mod, name, None) is value:
            return home, name
    return None


def _ship_global(name: str, value, depth: int) -> dict:
    if inspect.ismodule(value):
        return {"kind": "module", "name": name, "module": value.__name__}
    if isinstance(value, (bool, np.bool_)):
        return {"kind": "value", "name": name, "type": "bool", "value": bool(value)}
    if isinstance(value, np.generic) and isinstance(value, numbers.Number):
        return {"kind": "value", "name": name, "type": value.dtype.str, "value": value.item()}
    if isinstance(value, numbers.Integral):
        return {"kind": "value", "name": name, "type": "int", "value": int(value)}
    if isinstance(value, numbers.Real) and math.isfinite(value):
        return {"kind": "value", "name": name, "type": "float", "value": float(value)}
    home = _importable_home(name, value)
    if home is not None:
        return {"kind": "import", "name": name, "module": home[0], "qualname": home[1]}
    fn = python_function(value)
    if fn is not None:  # a helper defined next to the kernel (a notebook cell): ship it too
        shipped = _ship_function(fn, depth + 1, keep_decorator=True)
        return {"kind": "source", "name": name, **shipped}
    raise CensusError(f"the global {name!r} ({type(value).__name__}) cannot be shipped to the "
                      "compiler process: use modules, numbers and @cuda.jit functions only")


def _ship_function(fn, depth: int = 0, *, keep_decorator: bool = False) -> dict:
    if depth > 8:
        raise CensusError("helper functions nest too deeply to ship")
    if fn.__code__.co_freevars:
        raise CensusError(f"{fn.__name__} is a closure: define the kernel at the top level of a "
                          "cell or module")
    try:
        source = function_source(fn)
    except (OSError, TypeError) as exc:
        raise CensusError(f"the source of {fn.__name__} is not available ({exc})") from None
    names = _names_used(fn.__code__)
    if keep_decorator:  # a helper's @cuda.jit(...) runs in the child: ship what it names too
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    names |= {n.id for n in ast.walk(deco) if isinstance(n, ast.Name)}
    shipped = [_ship_global(n, fn.__globals__[n], depth)
               for n in sorted(names) if n in fn.__globals__]
    return {"source": source, "function": fn.__name__, "globals": shipped,
            "keep_decorator": keep_decorator}


def ship_kernel(kernel) -> dict:
    """A job that rebuilds ``kernel`` in the child from its source (decorators dropped)."""
    fn = python_function(kernel)
    if fn is None:
        raise CensusError(f"{kernel!r} is not a Python function or a @cuda.jit kernel")
    return {"kind": "source", **_ship_function(fn)}


def ship_reference(module: str, qualname: str, factory_args: list | None = None) -> dict:
    """A job for one of ropelab's kernels: ``module.qualname``, or ``module.qualname(*args)``
    when the kernel is built by a factory (``fused_qknorm_rope.make_kernel``)."""
    return {"kind": "import", "module": module, "qualname": qualname, "factory_args": factory_args}


def _normalized(job: dict) -> dict:
    """``job`` with each source replaced by its syntax tree without decorators: the cache key
    must not change with comments, blank lines or the ``@cuda.jit`` options."""
    out = dict(job)
    if "source" in out:
        tree = ast.parse(out["source"])
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and not out.get("keep_decorator"):
                node.decorator_list = []
        out["source"] = ast.dump(tree)
    if "globals" in out:
        out["globals"] = [_normalized(g) if g["kind"] == "source" else g for g in out["globals"]]
    return out


def _kernels_digest() -> str:
    h = hashlib.sha256()
    for path in sorted(_KERNELS_DIR.rglob("*.py")):
        h.update(path.relative_to(_KERNELS_DIR).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def job_key(job: dict, signature: str) -> str:
    """The cache key of compiling ``job`` with ``signature`` (fast-math, cc 9.0)."""
    job = _normalized(job)
    text = json.dumps(job, sort_keys=True)
    # ropelab's kernel sources matter only to a job that uses them: a learner's kernel built
    # from numba alone keeps its cached counts when a ropelab kernel changes.
    kernels = _kernels_digest() if "ropelab" in text else None
    h = hashlib.sha256()
    h.update(json.dumps({"census": ptx.CENSUS_VERSION, "extras": EXTRAS_VERSION, "cc": ptx.CC,
                         "versions": ptx._versions(), "kernels": kernels, "job": job,
                         "signature": signature}, sort_keys=True).encode())
    return h.hexdigest()[:20]


# --------------------------------------------------------------------------------------------
# The child: rebuild each function, compile it, count
# --------------------------------------------------------------------------------------------

def _rebuild_source(job: dict, counter: list):
    namespace = {"__name__": "ropelab_exercise"}
    for g in job["globals"]:
        namespace[g["name"]] = _rebuild_global(g, counter)
    tree = ast.parse(job["source"])
    if not job.get("keep_decorator"):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == job["function"]:
                node.decorator_list = []
    counter[0] += 1
    exec(compile(tree, f"<shipped kernel {counter[0]}>", "exec"), namespace)  # noqa: S102
    return namespace[job["function"]]


def _rebuild_global(g: dict, counter: list):
    kind = g["kind"]
    if kind == "module":
        return importlib.import_module(g["module"])
    if kind == "value":
        t, v = g["type"], g["value"]
        return {"bool": bool, "int": int, "float": float}.get(t, lambda x: np.dtype(t).type(x))(v)
    if kind == "import":
        found = importlib.import_module(g["module"])
        for part in g["qualname"].split("."):
            found = getattr(found, part)
        return found
    return _rebuild_source(g, counter)


def useful_lines(message: str, limit: int = 14) -> str:
    """The lines of a numba error a learner needs: what failed, the source line and its caret;
    not the blank lines or the compiler's "During: ..." trail (which can be pages long)."""
    lines = []
    for line in message.strip().splitlines():
        if line.startswith("During:") or "Enable logging at debug level" in line:
            break
        if line.strip():
            lines.append(line.rstrip())
    return "\n".join(lines[:limit])[:2000]


def _child() -> int:
    """Read ``[{key, job, signature}]`` as JSON on stdin; print one JSON line per job.

    The child's ``cuda`` is the real compiler: its environment selects the GPU target before
    ropelab (and so this module) is imported.
    """
    tasks = json.loads(sys.stdin.read())
    if cuda.compile_ptx is None:
        print(json.dumps({"error": "compile_ptx unavailable (simulator active in the child)"}))
        return 1
    counter = [0]
    for task in tasks:
        job = task["job"]
        row = {"key": task["key"]}
        try:
            if job["kind"] == "source":
                fn = _rebuild_source(job, counter)
            else:
                fn = _rebuild_global({**job, "name": "_"}, counter)
                if job.get("factory_args") is not None:
                    fn = fn(*job["factory_args"])
            text, _ = cuda.compile_ptx(fn, task["signature"], cc=ptx.CC, fastmath=True)
            row.update(ptx.count_ptx(text))
            row.update(count_extras(text))
            row["error"] = None
        except Exception as exc:  # one kernel that does not compile must not hide the others
            row["error"] = useful_lines(f"{type(exc).__name__}: {exc}")
        print(json.dumps(row), flush=True)
    return 0


def _compile_in_child(tasks: list[dict]) -> dict[str, dict]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="gpu", ROPELAB_QUIET="1")
    code = "import sys; from ropelab.course import kernel_census as k; sys.exit(k._child())"
    done = subprocess.run([sys.executable, "-c", code],
                          input=json.dumps(tasks), capture_output=True, text=True, env=env,
                          cwd=str(ptx.PACKAGE_DIR.parent), check=False)
    rows = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if "key" not in row:
                raise CensusError(row.get("error", "census child failed"))
            rows[row.pop("key")] = row
    if done.returncode or len(rows) != len(tasks):
        raise CensusError(f"census child failed (exit {done.returncode}): "
                          f"{done.stderr.strip()[-1500:]}")
    return rows


# --------------------------------------------------------------------------------------------
# The cache
# --------------------------------------------------------------------------------------------

def _user_file() -> Path:
    return ptx._user_cache_dir() / "exercise-census.json"


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    entries = doc.get("entries") if isinstance(doc, dict) else None
    return entries if isinstance(entries, dict) else {}


def _write(path: Path, entries: dict) -> None:
    doc = {"rules": "ropelab.course.kernel_census: ropelab.measure.census.count_ptx + count_extras, "
                    "fast-math, cc 9.0",
           "entries": dict(sorted(entries.items()))}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename: a reader in another process sees the old file or the new one.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


USED: dict[str, dict] = {}  # every entry this process looked up or computed (for save_used)


def census(tasks: list[tuple[dict, str]]) -> list[dict]:
    """The counts of each ``(job, signature)``, from the caches or compiled in one child.

    A row with an ``error`` (a kernel that does not compile) is returned, not raised, and not
    cached.  Raises :class:`CensusError` only when the child itself cannot run.
    """
    keys = [job_key(job, sig) for job, sig in tasks]
    found = {**_read(DATA_FILE), **_read(_user_file())}
    missing = {k: {"key": k, "job": job, "signature": sig}
               for k, (job, sig) in zip(keys, tasks) if k not in found}
    if missing:
        fresh = _compile_in_child(list(missing.values()))
        found.update(fresh)
        good = {k: v for k, v in fresh.items() if not v.get("error")}
        if good:
            try:
                _write(_user_file(), {**_read(_user_file()), **good})
            except OSError:
                pass  # a read-only home only costs the next check a recompile
    rows = [found[k] for k in keys]
    USED.update({k: r for k, r in zip(keys, rows) if not r.get("error")})
    return rows


def save_used(path: Path | None = None) -> Path:
    """Replace the committed cache with the entries used in this process (``python -m ropelab
    exercises --verify --save-census`` uses every one the notebooks and the check need)."""
    path = path or DATA_FILE
    _write(path, USED)
    return path
