"""What was compiled: a digest of the code behind a kernel, not of the files it sits in.

The census keys (:mod:`.engine`) hash :func:`code_digest` of the kernels they count: the modules
that define them and every ropelab function, device helper or module they reach, read as syntax
trees without docstrings (:func:`normalized_source`).  A comment, an excerpt marker or a
docstring edit keeps the digest; a code edit changes it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import sys
import textwrap
import types
from functools import lru_cache


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


def python_function(obj):
    """The plain Python function behind a kernel (GPU or simulator), a device function or an
    intrinsic, or None."""
    for attr in ("py_func", "fn", "_defn"):  # numba dispatcher, simulator kernel, intrinsic
        inner = getattr(obj, attr, None)
        if isinstance(inner, types.FunctionType):
            return inner
    return obj if isinstance(obj, types.FunctionType) else None


def names_in(code) -> set[str]:
    """Every global name ``code`` (and the code of the functions it defines) may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= names_in(const)
    return names


_LIBRARIES = {"numba", "numpy", "llvmlite", "cuda", "math", "cmath", "operator", "functools",
              "builtins"}


# The census's own machinery (keys, caches, the child) runs around the compiler and changes
# nothing it makes: reached from counted code (``engine.CC`` in an NVRTC call), it counts by
# name, so an edit to the engine keeps every committed census.  The counting rules are keyed
# by their code on their own (:func:`.engine.cache_key`).
_MACHINERY = {"ropelab.measure.census.engine", "ropelab.measure.census.digest"}


def _is_ours(module_name) -> bool:
    return (isinstance(module_name, str) and module_name.split(".")[0] == "ropelab"
            and module_name not in _MACHINERY)


def _is_kernel_module(module_name) -> bool:
    """A module of ``ropelab.kernels``: device code, counted whole (see :func:`code_digest`)."""
    return (isinstance(module_name, str) and module_name.startswith("ropelab.kernels")
            and module_name in sys.modules)


def _is_library(module_name) -> bool:
    """Code whose version is in the key already (or the standard library): counted by name."""
    return (not isinstance(module_name, str) or module_name.split(".")[0] in _LIBRARIES
            or module_name in _MACHINERY)


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
        fn = python_function(obj)
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
        for name in sorted(names_in(fn.__code__)):
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
