"""The one census engine: cache keys, cache files, and the child process that compiles.

Every census (registered kernels, controls, seed claims, a learner's kernel) works the same way:

1. **Key.**  :func:`cache_key` hashes what the counts depend on and nothing else: the compiler
   versions, the compute capability, the counting rules (the code of :mod:`.counting`), the
   client's own parameters (signatures, build options), and the *compiled sources*
   (:func:`code_digest`): the modules that define the kernels and every ropelab function,
   device helper or module they reach, read as syntax trees without docstrings.  A comment,
   an excerpt marker or a docstring edit keeps the key; a code edit changes it.
2. **Cache.**  :func:`lookup` tries the committed file under ``data/census/`` first (so CI and
   a fresh clone compile nothing), then the user cache (``$ROPELAB_CACHE`` or
   ``~/.cache/ropelab``); :func:`remember` writes fresh results to the user cache.
3. **Child.**  Under the simulator ``cuda.compile_ptx`` is None, and numba-cuda picks simulator
   or real compiler once per process.  :func:`run_child` therefore runs
   ``python -m ropelab.measure.census.child CLIENT`` with the simulator off
   (``NUMBA_ENABLE_CUDASIM=0``, ``ROPELAB_TARGET=gpu``); with an explicit ``cc`` the real compiler
   needs no driver.  The child calls the client module's ``compile_rows(payload)`` and prints
   one JSON line per row.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import types
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from ... import resources

CC = (9, 0)  # the H200
PACKAGE_DIR = Path(__file__).resolve().parents[2]  # ropelab/
DATA_DIR = resources.data_dir() / "census"  # a checkout's data/census, else the package's copy
_DISTRIBUTIONS = ("numba", "numba-cuda", "llvmlite", "nvidia-nvvm", "cuda-bindings",
                  "nvidia-cuda-nvdisasm")


class CensusError(RuntimeError):
    """A census could not be computed: the child failed, or a kernel cannot be shipped to it."""


def versions() -> dict:
    """Versions of every package whose output the census counts."""
    out = {}
    for dist in _DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


# --------------------------------------------------------------------------------------------
# What was compiled: a digest of the code, not of the files
# --------------------------------------------------------------------------------------------

def normalized_source(text: str) -> str:
    """``text`` as a syntax tree without docstrings: comments, blank lines and docstrings (and so
    the course's ``# ex: begin`` markers) do not change it."""
    tree = ast.parse(textwrap.dedent(text))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


@lru_cache(maxsize=None)
def _module_text(name: str) -> str:
    module = sys.modules[name]
    try:
        return normalized_source(inspect.getsource(module))
    except (OSError, TypeError):  # no source (frozen, exec'd): its name must do
        return name


@lru_cache(maxsize=None)
def _ropelab_imports(name: str) -> tuple:
    """``(module, name)`` of every ``from ropelab... import name`` in module ``name``'s text."""
    module = sys.modules[name]
    package = name if hasattr(module, "__path__") else name.rpartition(".")[0]
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return ()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            if _is_ours(source):
                found += [(source, alias.name) for alias in node.names]
    return tuple(found)


def _function_of(obj):
    """The plain Python function behind a kernel, device function or intrinsic, or None."""
    for attr in ("py_func", "fn", "_defn"):  # numba dispatcher, simulator kernel, intrinsic
        inner = getattr(obj, attr, None)
        if isinstance(inner, types.FunctionType):
            return inner
    return obj if isinstance(obj, types.FunctionType) else None


def _names_in(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _names_in(const)
    return names


_LIBRARIES = {"numba", "numpy", "llvmlite", "cuda", "math", "cmath", "operator", "functools",
              "builtins"}


def _is_ours(module_name) -> bool:
    return isinstance(module_name, str) and module_name.split(".")[0] == "ropelab"


def _is_kernel_module(module_name) -> bool:
    """A module of ``ropelab.kernels``: device code, counted whole (see :func:`code_digest`)."""
    return (isinstance(module_name, str) and module_name.startswith("ropelab.kernels")
            and module_name in sys.modules)


def _is_library(module_name) -> bool:
    """Code whose version is in the key already (or the standard library): counted by name."""
    return not isinstance(module_name, str) or module_name.split(".")[0] in _LIBRARIES


def _plain_value(value) -> str | None:
    """A stable text for a constant a kernel closes over, or None when ``value`` is not one."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    if type(value).__module__ == "numpy" and hasattr(value, "dtype") and not hasattr(value, "shape"):
        return f"{value.dtype}:{value!r}"
    if isinstance(value, (tuple, list, frozenset)):
        parts = [_plain_value(v) for v in value]
        return None if None in parts else f"{type(value).__name__}({','.join(parts)})"
    if type(value).__module__.startswith("numba.core.types"):  # float32, int64[::1] ...
        return f"numba:{value}"
    return None


def code_digest(*objects) -> str:
    """Digest of the code behind ``objects`` (kernels, device functions, intrinsics, modules).

    Walks from each function to the globals it names and the cells it closes over; a function
    counts by its own source (a syntax tree without docstrings) and what it reaches.  A module of
    ``ropelab.kernels`` reached that way counts whole: the simulator and the GPU may build a
    helper differently from one file (``kernels/vec.py``), and hashing the file covers both.  So
    does any other ropelab module or object that is not a function.  What a kernel module uses
    from other ropelab modules is found through its import statements (all of them, whatever
    the target), so the key is the same on the simulator and on a GPU.  Constants count by value;
    numba, numpy and the standard library by name (their versions are in the key already), so a
    docstring, a comment, or the host code beside a kernel (``seed_claims.measure``) does not
    change the key.
    """
    modules: set[str] = set()
    values: list[str] = []
    seen: set[int] = set()
    keep = []  # hold every visited object, so no id() is reused while we walk

    def visit(obj, label: str):
        plain = _plain_value(obj)
        if plain is not None:
            values.append(f"{label}={plain}")
            return
        if id(obj) in seen:
            return
        seen.add(id(obj))
        keep.append(obj)
        if isinstance(obj, types.ModuleType):
            if _is_kernel_module(obj.__name__):
                add_kernel_module(obj.__name__)
            elif _is_ours(obj.__name__):
                modules.add(obj.__name__)
            else:
                values.append(f"{label}=module:{obj.__name__}")
            return
        fn = _function_of(obj)
        if fn is None:
            owner = getattr(obj, "__module__", None)
            if _is_kernel_module(owner):
                add_kernel_module(owner)
            elif _is_ours(owner) and owner in sys.modules:
                modules.add(owner)
            else:
                values.append(f"{label}=object:{type(obj).__module__}.{type(obj).__qualname__}")
            return
        if _is_library(fn.__module__):
            values.append(f"{label}=function:{fn.__module__}.{fn.__qualname__}")
            return
        if _is_kernel_module(fn.__module__):
            # Its text is in the module's; what it names from elsewhere comes in through the
            # module's imports.  Only what it closes over (a factory's constants) is its own.
            # Not walking its globals keeps the key the same on the simulator and on a GPU,
            # where kernels/vec.py binds the same names to different objects.
            add_kernel_module(fn.__module__)
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                try:
                    visit(cell.cell_contents, f"{label}<{name}>")
                except ValueError:  # an empty cell
                    pass
            return
        # A function built by a factory (a closure, or exec'd) is not in its module's text as
        # it runs: its own source and what it closes over count too.
        try:
            values.append(f"{label}:src={normalized_source(inspect.getsource(fn))}")
        except (OSError, TypeError, SyntaxError):
            values.append(f"{label}:code={fn.__code__.co_code.hex()}")
        for name in sorted(_names_in(fn.__code__)):
            if name in fn.__globals__:
                visit(fn.__globals__[name], f"{label}.{name}")
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                visit(cell.cell_contents, f"{label}<{name}>")
            except ValueError:  # an empty cell
                pass
        for k, default in enumerate(fn.__defaults__ or ()):
            visit(default, f"{label}[{k}]")

    def add_kernel_module(name: str):
        if name in modules:
            return
        modules.add(name)
        for source, imported in _ropelab_imports(name):  # in every branch: target-independent
            found = getattr(sys.modules.get(source), imported, None)
            if found is None:
                found = sys.modules.get(f"{source}.{imported}")
            if found is not None:
                visit(found, f"{name}:{source}.{imported}")

    for k, obj in enumerate(objects):
        visit(obj, str(k))
    h = hashlib.sha256()
    for name in sorted(modules):
        h.update(name.encode() + b"\0" + _module_text(name).encode() + b"\0")
    for v in values:
        h.update(v.encode() + b"\0")
    return h.hexdigest()


def cache_key(client: str, objects=(), length: int = 16, **parts) -> str:
    """The key of one census: ``client`` (which census), the code of ``objects``, ``parts`` (any
    JSON-able parameters: signatures, options), the versions, cc and the counting rules."""
    from . import counting

    head = {"client": client, "cc": list(CC), "versions": versions(),
            "rules": code_digest(counting), **parts}
    h = hashlib.sha256(json.dumps(head, sort_keys=True, default=str).encode())
    h.update(code_digest(*objects).encode())
    return h.hexdigest()[:length]


# --------------------------------------------------------------------------------------------
# Cache files
# --------------------------------------------------------------------------------------------

def user_cache_dir() -> Path:
    root = os.environ.get("ROPELAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ropelab")
    return Path(root)


def read_json(path: Path):
    """The JSON document at ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def lookup(key: str, *paths: Path) -> dict | None:
    """The first document among ``paths`` whose ``key`` is ``key``."""
    for path in paths:
        doc = read_json(path)
        if isinstance(doc, dict) and doc.get("key") == key:
            return doc
    return None


def write_json(path: Path, doc) -> Path:
    """Write ``doc`` then rename: a reader in another process sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def remember(path: Path, doc) -> None:
    """Write to the user cache; a read-only home only costs the next caller a recompile."""
    try:
        write_json(path, doc)
    except OSError:
        pass


# --------------------------------------------------------------------------------------------
# The child process
# --------------------------------------------------------------------------------------------

def attempt(row: dict, work, describe=None) -> dict:
    """``row`` updated with ``work()``'s counts and ``error: None``, or with the error: one
    kernel that does not compile must not hide the others' counts.  ``describe(text)`` shortens
    the error text (default: its first line)."""
    try:
        row.update(work())
        row["error"] = None
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        row["error"] = (describe(text) if describe is not None
                        else text.strip().splitlines()[0][:400])
    return row


def run_child(client: str, payload=None, on_row=None) -> list[dict]:
    """Run ``client.compile_rows(payload)`` in a child with the simulator off; its rows."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="gpu", ROPELAB_QUIET="1")
    proc = subprocess.Popen([sys.executable, "-m", "ropelab.measure.census.child", client],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(PACKAGE_DIR.parent))
    with tempfile.TemporaryFile("w+") as err:
        # stderr drains on a thread of its own so a chatty compiler cannot fill the pipe and
        # stall the child while we read stdout.
        import threading

        drain = threading.Thread(target=lambda: err.write(proc.stderr.read()), daemon=True)
        drain.start()
        proc.stdin.write(json.dumps(payload))
        proc.stdin.close()
        rows = []
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if "fatal" in row:
                proc.wait()
                raise CensusError(row["fatal"])
            rows.append(row)
            if on_row is not None:
                on_row(row)
        proc.wait()
        drain.join()
        err.seek(0)
        stderr = err.read()
    if proc.returncode:
        raise CensusError(f"census child {client} failed (exit {proc.returncode}): "
                          f"{stderr.strip()[-2000:]}")
    return rows
