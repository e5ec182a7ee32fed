"""The kernels a learner's launch function launched, found in the grading parent without
running any of the learner's code.

A launch step's census judges the kernel the learner's function launched.  That launch
happened in the grading child, and a kernel object cannot cross back as data, so the child
names it (:class:`~.launch_records.KernelRef`: the file, first line and name of its Python
function's code).  The parent holds its own copy of the launch function (the child is a
fork of it) and finds the kernel there by looking, statically, at what the function's code can
reach: the names it uses, looked up in its globals, its closure and its defaults; the plain
functions of the same notebook or module it calls, the same way; and the functions defined
inside any of them (code objects among their constants, rebuilt here over their globals; a
kernel made inside a launch function has no object anywhere else).

Nothing of the learner's runs to find it: only dictionaries, cells and code objects are read,
and attributes through :func:`inspect.getattr_static`.  A kernel the search does not reach
(built by ``exec``, or by a call into another module) has no census, and the verdict says so:
a step's census rules are never skipped.  The child's word says which of the reachable kernels
ran; every other reachable kernel of the learner's that takes the contract's arguments is
judged too, so that a forged record cannot point the census at a clean decoy while another
kernel did the work.
"""

from __future__ import annotations

import inspect
import types

MAX_DEPTH = 6  # helper functions calling helper functions


def static(obj, attr: str, default=None):
    """``obj.attr`` looked up without running any of ``obj``'s code (no property, no
    ``__getattr__``): the grader reads what it was handed before anything of it runs."""
    try:
        return inspect.getattr_static(obj, attr, default)
    except Exception:  # noqa: BLE001
        return default


def function_behind(obj):
    """The plain Python function behind a ``@cuda.jit`` kernel, or ``obj`` if it is one, or
    None (as :func:`.kernel_census.python_function`, statically)."""
    for attr in ("py_func", "fn"):  # a CUDADispatcher / the simulator's FakeCUDAKernel
        fn = static(obj, attr)
        if inspect.isfunction(fn):
            return fn
    return obj if inspect.isfunction(obj) else None


def _code_key(code) -> tuple:
    return (code.co_filename, code.co_firstlineno, code.co_name)


def _rebuilt(code, namespace: dict):
    """A function over ``namespace`` from a nested function's code object (empty cells for its
    free variables: the census refuses a closure with its own words)."""
    cells = tuple(types.CellType() for _ in code.co_freevars) or None
    return types.FunctionType(code, namespace, code.co_name, None, cells)


def _values_of(fn) -> list:
    """What ``fn``'s code can name: its globals for the names it uses, its closure's cells,
    its defaults (plain dictionary and cell reads; nothing of the objects runs)."""
    code = fn.__code__
    namespace = fn.__globals__
    found = []
    names = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names |= set(c.co_names)
        stack += [k for k in c.co_consts if inspect.iscode(k)]
    for name in sorted(names):
        if dict.__contains__(namespace, name):
            found.append(dict.get(namespace, name))
    for cell in fn.__closure__ or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    found += list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    return found


def reachable(fn) -> dict:
    """``{code key: (python function, kernel object or None)}`` of every function ``fn`` (a
    plain launch function) can reach statically; see the module docstring."""
    found: dict = {}
    home = fn.__globals__
    todo, visited = [(fn, 0)], set()
    while todo:
        current, depth = todo.pop()
        key = _code_key(current.__code__)
        if key in visited or depth > MAX_DEPTH:
            continue
        visited.add(key)
        for const in current.__code__.co_consts:  # functions defined inside this one
            if inspect.iscode(const):
                nested = _rebuilt(const, current.__globals__)
                found.setdefault(_code_key(const), (nested, None))
                todo.append((nested, depth + 1))
        for value in _values_of(current):
            inner = function_behind(value)
            if inner is None:
                continue
            kernel = value if inner is not value else None
            k = _code_key(inner.__code__)
            if kernel is not None:
                found[k] = (inner, kernel)
            elif k not in found:
                found[k] = (inner, None)
                if inner.__globals__ is home:  # a plain helper of the same notebook: follow it
                    todo.append((inner, depth + 1))
    found.pop(_code_key(fn.__code__), None)
    return found


def _arity(signature: str | None) -> int | None:
    if not signature:
        return None
    from numba.core import sigutils

    try:
        args, _ = sigutils.normalize_signature(signature)
    except Exception:  # noqa: BLE001
        return None
    return len(args)


def resolve(fn, refs: list, signature: str | None):
    """``(python functions to census, None)`` for the learner's launched kernels ``refs``, or
    ``(None, why)`` when one of them cannot be found; see the module docstring."""
    from .kernel_census import python_function

    if not inspect.isfunction(python_function(fn) or fn):
        return None, "the launch function is not a plain Python function"
    fn = python_function(fn) or fn
    found = reachable(fn)
    chosen, keys = [], set()
    for ref in refs:
        hit = next((f for key, (f, _) in found.items() if ref.same_code(f.__code__)), None)
        if hit is None:
            return None, (f"{ref.name}, the kernel {fn.__name__} launched, is nowhere the "
                          f"grader can find it without running your code (the names "
                          f"{fn.__name__} uses, and the functions defined inside it)")
        chosen.append(hit)
        keys.add(_code_key(hit.__code__))
    arity = _arity(signature)
    for key, (inner, kernel) in found.items():
        module = getattr(inner, "__module__", "") or ""
        if kernel is None or key in keys or module == "ropelab" or module.startswith("ropelab."):
            continue
        if arity is not None and inner.__code__.co_argcount == arity:
            chosen.append(inner)  # a kernel of the contract's shape it could have run
            keys.add(key)
    return chosen, None
