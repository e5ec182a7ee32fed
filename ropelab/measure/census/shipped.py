"""Kernels that exist only as source (a notebook cell, a solution file), shipped to the child.

The census child cannot import a notebook, so a job describes the kernel instead: its source
text, plus every global name it uses (a module, a number, a function importable from a
package, or another function from the same notebook, shipped the same way).  A job for one of
ropelab's own kernels names its module and qualname (:func:`ship_reference`).  The child
rebuilds each job and compiles it (:func:`compile_rows`, the client
``ropelab.measure.census.shipped``).

Counts are :func:`~.counting.count_ptx`'s plus the three the exercises grade on
(:func:`~.counting.count_extras`), fast-math, cc 9.0.  :func:`job_key` keys a job on its code as
a syntax tree (comments, blank lines and the ``@cuda.jit`` options do not matter), what it was
shipped with, the signature, the PTX producers, and the compiled code of any ropelab function
it names.  The cache of these counts is the course's (:mod:`ropelab.grader.kernel_census`).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import numbers
import sys
import textwrap

import numpy as np

from . import engine
from . import ir_divisions, passes
from .counting import count_extras, count_ptx
from .engine import CensusError, names_in, python_function

# Modules a global may be found in by name when it has no importable home of its own (numba's
# type objects such as float32 are instances, not classes or functions).
_NAME_HOMES = ("numba", "numba.cuda", "math", "numpy")
# Packages the child process imports exactly as the parent does; a function from anywhere else
# (a notebook, a solution file) is shipped as source instead.
_IMPORTABLE_ROOTS = ("ropelab", "numba", "numpy", "math", "cmath", "operator")


def function_source(fn) -> str:
    """``fn``'s source, dedented; OSError/TypeError when Python kept none (``exec`` of a
    string)."""
    return textwrap.dedent(inspect.getsource(fn))


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


def ship_global(name: str, value, depth: int = 0) -> dict:
    """How the child rebuilds the global ``name``; :class:`CensusError` when it cannot."""
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
    names = names_in(fn.__code__)
    if keep_decorator:  # a helper's @cuda.jit(...) runs in the child: ship what it names too
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    names |= {n.id for n in ast.walk(deco) if isinstance(n, ast.Name)}
    shipped = [ship_global(n, fn.__globals__[n], depth)
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
    """``job`` with each source replaced by its syntax tree without decorators: the key must
    not change with comments, blank lines or the ``@cuda.jit`` options."""
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


def _ropelab_objects(job: dict) -> list:
    """The ropelab functions and modules a job names (imported here, as the child will)."""
    found = []
    if job["kind"] == "import" and job["module"].split(".")[0] == "ropelab":
        found.append(_rebuild_global({**job, "name": "_"}, [0]))
    for g in job.get("globals", ()):
        if g["kind"] in ("import", "module") and g["module"].split(".")[0] == "ropelab":
            found.append(_rebuild_global(g, [0]))
        elif g["kind"] == "source":
            found += _ropelab_objects(g)
    return found


def compile_key(job: dict, signature: str) -> str:
    """The key of what compiling ``job`` with ``signature`` makes (its PTX): the job's code,
    the ropelab code it uses, the compilers (and, as every census key, the counting rules of
    :mod:`.counting`), not the per-pass rules, which change no PTX."""
    # ropelab's code counts only for a job that uses it (by its compiled code, see
    # .digest.code_digest): a learner's kernel built from numba alone keeps its cached counts
    # when a ropelab kernel changes.
    return engine.cache_key("learner", _ropelab_objects(job), length=20, job=_normalized(job),
                            signature=signature)


def job_key(job: dict, signature: str) -> str:
    """The cache key of the census row of ``job`` with ``signature`` (fast-math, cc 9.0): its
    :func:`compile_key` and the rules of the per-pass counts (:mod:`.passes`) and of the source's
    divisions (:mod:`.ir_divisions`), computed beside counting's."""
    return engine.cache_key("learner-row", [], length=20, compiled=compile_key(job, signature),
                            passes=engine.code_digest(passes),
                            ir=engine.code_digest(ir_divisions))


# --------------------------------------------------------------------------------------------
# The child: rebuild each function, compile it, count
# --------------------------------------------------------------------------------------------

DEVICE_JIT = "_ropelab_device_jit"  # the rebuilt helpers' decorator, bound in their namespace


def rebuild_source(job: dict, counter: list):
    """(In the child.)  The function ``job`` ships, rebuilt from its source and globals
    (``counter`` numbers the rebuilt names)."""
    namespace = {"__name__": "ropelab_exercise"}
    for g in job["globals"]:
        namespace[g["name"]] = _rebuild_global(g, counter)
    tree = ast.parse(job["source"])
    if not job.get("keep_decorator"):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == job["function"]:
                node.decorator_list = []
    else:
        from numba import cuda

        namespace[DEVICE_JIT] = cuda.jit
        _inline_device_helpers(tree)
    counter[0] += 1
    exec(compile(tree, f"<shipped kernel {counter[0]}>", "exec"), namespace)  # noqa: S102
    return namespace[job["function"]]


def _inline_device_helpers(tree) -> None:
    """Rebuild each helper's decorator as ``cuda.jit(device=True, inline="always", ...)``.

    Without a CUDA driver numba-cuda cannot compile a kernel that calls a helper it compiles
    apart (it asks the driver for the device's compute capability and links the two through
    it); inlined, the kernel compiles anywhere, as the optimiser would mostly have inlined a
    small helper anyway.  So every helper is inlined, however its decorator is spelt:
    ``@cuda.jit`` bare or with ``fastmath``, ``device=True`` or not, an eager signature (dropped:
    the kernel's call types it), ``inline="never"``, or ``jit`` imported under another name
    (which in the grading process is the simulator's).  Its other keywords (``fastmath``,
    ``opt``...) stay.  A plain Python function (no decorator) stays plain: numba refuses it."""
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or not node.decorator_list:
            continue
        keywords = []
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call):
                keywords += [k for k in deco.keywords if k.arg not in ("device", "inline")]
        keywords += [ast.keyword(arg="device", value=ast.Constant(True)),
                     ast.keyword(arg="inline", value=ast.Constant("always"))]
        node.decorator_list = [ast.Call(func=ast.Name(id=DEVICE_JIT, ctx=ast.Load()), args=[],
                                        keywords=keywords)]
    ast.fix_missing_locations(tree)


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
    return rebuild_source(g, counter)


def rebuild_job(job: dict, counter: list):
    """(In the child.)  The kernel a shipped ``job`` describes: rebuilt from source, or a
    package function (called with its factory arguments, when it is a factory)."""
    if job["kind"] == "source":
        return rebuild_source(job, counter)
    fn = _rebuild_global({**job, "name": "_"}, counter)
    if job.get("factory_args") is not None:
        fn = fn(*job["factory_args"])
    return fn


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


def _ptx_and_ir(fn, signature: str) -> tuple[str, str]:
    """(In the child.)  The PTX of ``fn`` (fast-math, cc 9.0) and numba's LLVM IR before NVVM,
    from one compile: numba-cuda's compile_ptx keeps the IR in the library it builds, and this
    is its body (numba-cuda 0.30)."""
    from numba.cuda import compiler

    lib, _ = compiler._compile_pyfunc_with_fixup(fn, signature, device=False, fastmath=True,
                                                 cc=engine.CC, abi="numba")
    return lib.get_asm_strs(cc=engine.CC)[0], lib.get_llvm_str()


def compile_rows(tasks: list[dict]):
    """(In the child.)  Rebuild and compile each ``{key, job, signature}``; one row each."""
    counter = [0]
    for task in tasks:
        job = task["job"]

        def work(job=job, signature=task["signature"]):
            fn = rebuild_job(job, counter)
            text, ir = _ptx_and_ir(fn, signature)
            return {**count_ptx(text), **count_extras(text), **passes.count_passes(text),
                    "divrem_source": ir_divisions.count_ir_divisions(ir)}

        yield engine.attempt({"key": task["key"]}, work, describe=useful_lines)


def compile_in_child(tasks: dict) -> dict[str, dict]:
    """``{key: row}`` of ``{key: (job, signature)}``, compiled in one child."""
    payload = [{"key": k, "job": job, "signature": sig} for k, (job, sig) in tasks.items()]
    rows = {}
    # A bar only for a batch (--verify, --save-census): a check compiles one or two kernels in
    # seconds, and its verdict is the output that matters.
    for row in engine.run_child("ropelab.measure.census.shipped", payload, total=len(payload),
                                label="learner census", show=len(payload) > 2):
        rows[row.pop("key")] = row
    if len(rows) != len(tasks):
        raise CensusError(f"the census child answered {len(rows)} of {len(tasks)} kernels")
    return rows
