"""What the grader is handed, before anything runs: is it a kernel (or, for a launch step, a
plain function), can its source be read, has it still blanks or an empty body, how many
parameters does it take.  Every answer is a value, never an exception, whatever the object.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap

from . import kernel_census
from .grade_types import verdict_of
from .launched import function_behind as _function_behind
from .launched import reachable, static as _static


def blanks(source: str) -> list[str]:
    """The source lines that still hold a ``...`` placeholder, stripped."""
    tree = ast.parse(source)
    lines = source.splitlines()
    rows = sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and node.value is Ellipsis})
    return [lines[r - 1].strip() for r in rows]


def empty_body(source: str) -> bool:
    """True when the first function of ``source`` has only a docstring and ``pass``: a starter
    cell as the step hands it out."""
    tree = ast.parse(source)
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not fns:
        return False
    body = list(fns[0].body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return all(isinstance(n, ast.Pass) for n in body)


def parameter_names(fn) -> list[str]:
    code = fn.__code__
    return list(code.co_varnames[:code.co_argcount])



def _what_is(obj) -> str:
    # repr of a plain function, a kernel or a built-in value runs nothing of the learner's
    # (an object that only has a py_func may have a __repr__ of its own)
    safe = inspect.isfunction(obj) or type(obj) in _kernel_types() \
        or type(obj).__module__ == "builtins" or isinstance(obj, type) \
        and type(obj).__repr__ is type.__repr__
    try:
        text = repr(obj) if safe else f"a {type(obj).__name__} object"
    except Exception:  # noqa: BLE001
        text = f"a {type(obj).__name__} object"
    return text if len(text) <= 60 else text[:57] + "..."


def _kernel_types() -> tuple:
    """The classes ``@cuda.jit`` makes: the simulator's FakeCUDAKernel, numba-cuda's
    CUDADispatcher (whichever of them is loaded)."""
    found = []
    for module, name in (("numba.cuda.simulator.kernel", "FakeCUDAKernel"),
                         ("numba.cuda.dispatcher", "CUDADispatcher")):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def _is_device_function(obj) -> bool:
    if _static(obj, "_device", False) is True:  # the simulator's FakeCUDAKernel
        return True
    options = _static(obj, "targetoptions", None)  # a CUDADispatcher
    return bool(isinstance(options, dict) and options.get("device"))


def identify(ex, obj):
    """``(python function, None)`` when ``obj`` is what the step's kind needs, else
    ``(None, why)``: a kernel step wants a ``@cuda.jit`` kernel, a launch step a plain
    function."""
    fn = _function_behind(obj)
    name = fn.__name__ if fn is not None else ""
    if ex.kind == "launch":
        if fn is not None and fn is obj and name != "<lambda>":
            return fn, None
        if fn is not None and fn is not obj:
            return None, (f"not a launch function: {_what_is(obj)} is a kernel; write a plain "
                          "def (no @cuda.jit) that computes grid and block and launches the "
                          "kernel")
        return None, (f"not a launch function: {_what_is(obj)}; write "
                      f"def {ex.kernel_name}({', '.join(ex.arguments)}): ...")
    if fn is None or fn is obj:
        return None, (f"not a kernel: {_what_is(obj)} is not a @cuda.jit kernel; write "
                      f"@cuda.jit(fastmath=True) on the line above `def {ex.kernel_name}(...)`")
    if type(obj) not in _kernel_types():  # one that only looks like a kernel: its launch
        # could run anything, its py_func name anything else
        return None, (f"not a kernel: {_what_is(obj)}, not what @cuda.jit makes; write "
                      f"@cuda.jit(fastmath=True) on the line above `def {ex.kernel_name}(...)`")
    if _is_device_function(obj):
        return None, (f"not a kernel: {name} is a device function (device=True), which only a "
                      "kernel can call; write @cuda.jit(fastmath=True) without device=True")
    if name == "<lambda>":
        return None, (f"not a kernel: a lambda; write def {ex.kernel_name}(...) under "
                      "@cuda.jit(fastmath=True)")
    return fn, None


def _fingerprint(code) -> tuple:
    """What a code object does, without where it was written (file, lines)."""
    return (code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_argcount, code.co_kwonlyargcount, tuple(
                _fingerprint(c) if inspect.iscode(c) else (type(c).__name__, repr(c))
                for c in code.co_consts))


def _loose(code) -> tuple:
    """A code object's names, constants and arguments, without its bytecode."""
    return (code.co_names, code.co_varnames, code.co_freevars, code.co_argcount, tuple(
        _loose(c) if inspect.iscode(c) else (type(c).__name__, repr(c)) for c in code.co_consts))


def _codes(code):
    yield code
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from _codes(const)


def _compiled_as_run(text: str, filename: str):
    """The code objects ``text`` compiles to, both ways Python runs a file or a cell: whole (an
    imported file, ``exec``), and one top-level statement at a time (IPython compiles each
    statement of a cell on its own, so a function defined beside an ``import`` of a module it
    calls sees no import there, and calls the module's function another way)."""
    yield compile(text, filename, "exec", dont_inherit=True)
    for node in ast.parse(text, filename).body:
        yield compile(ast.Module([node], type_ignores=[]), filename, "exec", dont_inherit=True)


def source_is_code(fn, source: str) -> bool:
    """Whether the source text Python shows for ``fn`` (``source``, as
    :func:`.kernel_census.function_source` read it) is the code ``fn`` runs.  The census
    compiles the text and the simulator runs the code object: a file edited after it was
    imported, or a source cache rewritten, would let the one be judged for the other.

    The whole file (or notebook cell) the text comes from is compiled again, as it was the
    first time (the compiler's output depends on the module around a function: a name bound by
    ``import`` is called differently), and the function defined on ``fn``'s first line must
    have ``fn``'s bytecode, names and constants.  A file that no longer compiles as a whole is
    compared by the function's own text, names and constants only."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename)
    try:
        want = _fingerprint(code)
        return any(c.co_name == code.co_name and c.co_firstlineno == code.co_firstlineno
                   and _fingerprint(c) == want
                   for unit in _compiled_as_run("".join(lines), code.co_filename)
                   for c in _codes(unit))
    except (SyntaxError, ValueError):
        pass
    text = textwrap.dedent(source)
    if code.co_freevars:  # compiled inside a function that binds its free variables, as it was
        bound = "".join(f"    {name} = None\n" for name in code.co_freevars)
        text = "def _enclosing():\n" + bound + textwrap.indent(text, "    ")
    try:
        alone = compile(text, code.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    want = _loose(code)
    return any(c.co_name == code.co_name and _loose(c) == want for c in _codes(alone))


def read_source(fn) -> tuple[str | None, str | None]:
    """``(source, None)``, or ``(None, why)`` when Python kept no readable source."""
    try:
        source = kernel_census.function_source(fn)
        ast.parse(source)
        if not source_is_code(fn, source):
            return None, ("the source Python shows for it is not the code that runs (its cell "
                          "or file changed after it ran, or its source was rewritten): run the "
                          "cell that defines it again")
        return source, None
    except (OSError, TypeError):
        return None, ("Python kept no source for it (defined with exec of a string?); define "
                      "it in a notebook cell or a file")
    except SyntaxError:
        return None, ("its source does not parse on its own (two definitions on one line?); "
                      "give it its own def, one statement a line")
    except Exception as exc:  # noqa: BLE001
        return None, f"its source could not be read ({type(exc).__name__}: {exc})"




# What a graded function never needs: a kernel computes from its arguments, a launch function
# computes grid and block and launches.  Importing anything but the numeric modules and the
# standard library's pure iteration and arithmetic helpers (set N's 10.4 built its positions
# with itertools.chain; none of them reads a frame or an attribute by name), evaluating
# text, reading names by string, a private attribute (a frame's, a module's, the grader's) or
# the grader's own records on an argument is reaching past the arguments.
_REACHING = frozenset(("exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                       "getattr", "setattr", "delattr", "breakpoint", "open", "input"))
_IMPORTABLE = ("math", "cmath", "numpy", "numba", "itertools", "functools", "bisect",
               "heapq", "collections", "statistics", "fractions")  # and their submodules
_RECORDS = frozenset(("data", "access", "owner", "read_unwritten", "foreign_write",
                      "host_access", "reader", "foreign_read", "unordered_store", "twice_written",
                      "_order"))  # a recorded argument's (.recording.WatchedArray)


def _imports_only_numbers(node) -> bool:
    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
        alias.name for alias in node.names]
    return (not isinstance(node, ast.ImportFrom) or node.level == 0) and all(
        name.split(".")[0] in _IMPORTABLE for name in names)


def reaching_out(source: str) -> tuple[int, str] | None:
    """(line, what) of the first place ``source`` reaches past its arguments (an import of
    other than ``_IMPORTABLE``; ``exec``, ``getattr`` and the rest of ``_REACHING``; an
    attribute whose name starts with ``_``, a frame's ``f_back`` or a recorded argument's
    ``data``), or None."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not _imports_only_numbers(node):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Name) and node.id in _REACHING:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and (
                node.attr.startswith(("_", "f_", "gi_", "tb_", "co_"))
                or node.attr in _RECORDS):
            found.append((node.lineno, f".{node.attr}"))
    return min(found) if found else None


def _reaching_problem(ex, fn, source: str):
    """The refusal when ``fn`` (or, for a launch function, a function of the same notebook it
    can reach) reaches past its arguments, else None."""
    sources = [(fn.__name__, source)]
    if ex.kind == "launch":
        for inner, _ in reachable(fn).values():
            if inner.__globals__ is fn.__globals__:
                text, _ = read_source(inner)
                if text is not None:
                    sources.append((inner.__name__, text))
    for name, text in sources:
        found = reaching_out(text)
        if found is not None:
            line, what = found
            row = text.splitlines()[line - 1].strip() if line <= len(text.splitlines()) else ""
            return verdict_of(ex.id, "error", f"{name} reaches past its arguments: `{what}` "
                              f"(line {line}: `{row}`)",
                              "hint: a kernel computes from its arguments and a launch function "
                              "computes grid and block and launches; neither imports, evaluates "
                              "text, reads names by string or touches private attributes "
                              "(frames, modules, the grader)")
    return None


def numpy_calls(source: str) -> list[str]:
    """The ``np.something(...)`` / ``numpy.something(...)`` calls in ``source``, in order."""
    found = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in ("np", "numpy"):
            name = f"{node.func.value.id}.{node.func.attr}"
            if name not in found:
                found.append(name)
    return found


def intake(ex, kernel):
    """Steps 1-2 before anything runs: the verdict that refuses ``kernel``, or
    ``(python function, name, source)``."""
    fn, refused = identify(ex, kernel)
    if refused is not None:
        return verdict_of(ex.id, "error", refused)
    name = fn.__name__
    if ex.kind == "kernel":
        from .launch_records import KernelRef  # late: launch_records reads the census late too

        ref = KernelRef.of(kernel)
        if ref.borrowed:
            return verdict_of(ex.id, "wrong", f"{name} is ropelab's own kernel (from "
                              f"{ref.module or ref.filename}): the step asks for one you write",
                              "hint: write the kernel in a cell of your own; "
                              f"{KernelRef.BORROWED_HINT}")
    source, unreadable = read_source(fn)
    if source is None:
        return verdict_of(ex.id, "error", f"cannot grade {name}: {unreadable}")
    left = blanks(source)
    if left:
        shown = "; ".join(f"`{line}`" for line in left[:4]) + (" ..." if len(left) > 4 else "")
        return verdict_of(ex.id, "not solved yet", f"{name} still has {len(left)} blank"
                          f"{'s' if len(left) > 1 else ''} (...) to fill in: {shown}",
                          f"task: {ex.task}")
    if empty_body(source):
        return verdict_of(ex.id, "not solved yet", f"{name} has an empty body (pass): write it",
                          f"task: {ex.task}")
    for rule in ex.forbid:
        rows = rule.found_in(source)
        if rows:
            return verdict_of(ex.id, "not solved yet", f"`{rule.what}` is not allowed in this "
                              f"step: {rule.message}",
                              f"  line {rows[0]}: `{source.splitlines()[rows[0] - 1].strip()}`")
    reaching = _reaching_problem(ex, fn, source)
    if reaching is not None:
        return reaching
    params = parameter_names(fn)
    if len(params) != len(ex.arguments):
        return verdict_of(ex.id, "error", f"{name} takes ({', '.join(params)}), but the step "
                          f"calls it with ({', '.join(ex.arguments)})")
    return fn, name, source
