"""A kernel's source as one build compiles it: the branches on build constants resolved.

A kernel factory (``make_kernel`` of the fused kernel, of its backward) fixes constants in
Python (``E``, ``PACKED``, ``VEC4``, ``CACHE`` ...) and returns code that reads them as plain
names; Numba compiles them in, and a branch on one of them is gone from the builds where it is
false.  The full source holds every build's branches.  A lesson about one build shows
:func:`specialised`: the same marked region, read from the package file as
:func:`~ropelab.lessons.display.excerpt` reads it, with

* every ``if`` / ``elif`` / ``else`` whose test the build constants decide replaced by the
  branch taken (dedented; a branch not taken is removed, with the comments inside it);
* ``and`` / ``or`` / ``x if c else y`` with a decided operand shortened (``FULL or p < n``
  with ``FULL = False`` reads ``p < n``);
* a header naming the build, the constants the text still reads with their values, and the
  ones that decided the removed branches.

Comments and names stay as written; nothing is pasted.  :func:`rebuild` turns the specialised
text back into a kernel, so a test can compile it and compare its PTX with the package
kernel's (``tests/test_specialise.py``).
"""

from __future__ import annotations

import ast
import math
import textwrap
import types
from dataclasses import dataclass

from .branches import SpecialiseError, specialise_text
from .display import MarkerError, region_text

WIDTH = 96  # the header's comment lines wrap here, as the package's code does


# --------------------------------------------------------------------------------------------
# The build's constants: what the kernel and its device functions close over
# --------------------------------------------------------------------------------------------

def _function(obj):
    """The Python function behind a kernel, a dispatcher or a launch plan."""
    obj = getattr(obj, "kernel", obj)  # a Plan or a Variant: its kernel
    fn = getattr(obj, "py_func", obj)
    if not isinstance(fn, types.FunctionType):
        raise SpecialiseError(f"not a kernel function: {obj!r}")
    return fn


def _is_constant(value) -> bool:
    if isinstance(value, (bool, int, float)):
        return True
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.shape == ()


def build_values(kernel) -> dict:
    """Every name the kernel and the device functions it calls close over, with its value: the
    factory's constants and the helpers it picked (``load = load_bf16``)."""
    found: dict = {}
    seen: set[int] = set()

    def visit(fn):
        if id(fn) in seen:
            return
        seen.add(id(fn))
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if name in found and found[name] is not value and not _same(found[name], value):
                raise SpecialiseError(f"{name!r} has two values in one build: "
                                      f"{found[name]!r} and {value!r}")
            found[name] = value
            inner = getattr(value, "py_func", value)
            if isinstance(inner, types.FunctionType) and inner.__module__ == fn.__module__:
                visit(inner)

    visit(_function(kernel))
    return found


def _package(fn) -> str:
    return fn.__module__.rpartition(".")[0]


def _region_text(fn, region: str, values: dict):
    """``(where, text, owner)``: the region in the kernel's own file (owner: the kernel), or
    else in the file of a device function it calls from its package, such as the fused
    kernels' shared lanes module (owner: that device function, whose closure holds the
    constants the region reads)."""
    try:
        return (*region_text(fn, region), fn)
    except MarkerError:
        for value in values.values():
            inner = getattr(value, "py_func", value)
            if (isinstance(inner, types.FunctionType) and _package(inner) == _package(fn)
                    and inner.__module__ != fn.__module__):
                try:
                    where, text = region_text(inner, region)
                except MarkerError:
                    continue
                # the function the region defines (its file holds other device functions too)
                if where.first < inner.__code__.co_firstlineno <= where.last:
                    return where, text, inner
        raise


def _same(a, b) -> bool:
    try:
        return bool(a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
    except Exception:
        return False


@dataclass(frozen=True)
class Specialised:
    """One region of one build: the text, and what it was specialised with."""

    region: str
    where: str  # the file, relative to the repository
    build: str  # the kernel's name (its ``__qualname__``)
    text: str  # the specialised code, no header
    read: dict  # the build values the text still names, in order of first use
    decided: dict  # the constants that decided the removed branches and are no longer named
    kept: tuple = ()  # constants left undecided on purpose
    values: dict = None  # every build value (for the kept ones' values)

    def header(self) -> str:
        def shown(value):
            inner = getattr(value, "py_func", value)
            if isinstance(inner, types.FunctionType):
                return inner.__name__
            if type(value).__module__ == "numpy":
                return f"{type(value).__name__}({value.item()!r})"
            return repr(value)

        def wrapped(label, items):
            if not items:
                return []
            # Lines break between items, never inside "NAME = value".
            parts = [f"{k} = {shown(v)}" for k, v in items.items()]
            lines, line = [], "# " + label + parts[0]
            for part in parts[1:]:
                if len(line) + 2 + len(part) > WIDTH:
                    lines.append(line + ",")
                    line = "#   " + part
                else:
                    line += ", " + part
            return lines + [line]

        constants = {k: v for k, v in self.read.items() if _is_constant(v)}
        helpers = {k: v for k, v in self.read.items() if not _is_constant(v)
                   and shown(v) != k}  # a helper under its own name needs no line
        lines = textwrap.wrap(f"{self.where}, region '{self.region}', as the build {self.build} "
                              "compiles it: the branches it does not take removed (every build's "
                              "source: lessons.excerpt)", WIDTH - 2, initial_indent="# ",
                              subsequent_indent="# ", break_on_hyphens=False)
        lines += wrapped("constants of this build: ", constants)
        lines += wrapped("device functions it picked: ", helpers)
        lines += wrapped("branches decided by: ", self.decided)
        if self.kept:
            lines += wrapped("left as written (the lesson reads both sides): ",
                             {k: self.values[k] for k in self.kept})
        return "\n".join(lines)

    def __str__(self) -> str:
        return f"{self.header()}\n{self.text}"


def specialise(kernel, region: str, keep=()) -> Specialised:
    """Region ``region`` of ``kernel``'s file as ``kernel`` (one build of a factory, a
    dispatcher, or a launch plan) compiles it.  Names in ``keep`` stay undecided (a lesson that
    discusses both sides of one branch keeps it)."""
    fn = _function(kernel)
    where, text, owner = _region_text(fn, region, build_values(fn))
    values = build_values(owner)
    constants = {k: v for k, v in values.items() if _is_constant(v) and k not in set(keep)}
    out, deciding = specialise_text(text, constants)
    if not out.strip():
        raise SpecialiseError(f"the build {fn.__qualname__} runs none of region {region!r}")
    named = [n.id for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Name)]
    order = sorted(set(named) & set(values), key=named.index)
    read = {k: values[k] for k in order if k not in set(keep)}
    decided = {k: constants[k] for k in deciding if k not in read}
    kept = tuple(k for k in keep if k in values)
    return Specialised(region, where.where, fn.__qualname__, out, read, decided, kept, values)


def specialised(kernel, region: str, keep=()) -> str:
    """The text :func:`specialise` makes, under its header: what a notebook prints."""
    return str(specialise(kernel, region, keep))


def rebuild(kernel, region: str, keep=(), text: str | None = None):
    """``kernel`` with the device function that ``region`` defines compiled from its
    specialised text instead (for a test: the two must compile to the same code).  ``text``
    replaces the specialised text (a test plants a change in it and sees the code differ).

    The specialised function reads the build's values as globals instead of closure cells; Numba
    freezes both as constants.
    """
    fn = _function(kernel)
    spec = specialise(fn, region, keep)
    source = spec.text if text is None else text
    defined = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    if len(defined) != 1:
        raise SpecialiseError(f"region {region!r} does not define exactly one function")
    name = defined[0].name
    if name not in fn.__code__.co_freevars:
        raise SpecialiseError(f"{fn.__qualname__} does not call {name!r}")
    old = dict(zip(fn.__code__.co_freevars, fn.__closure__))[name].cell_contents
    namespace = dict(_function(old).__globals__)
    namespace.update(build_values(old))
    exec(compile(source, f"<{spec.build}: {region}, specialised>", "exec"), namespace)
    cells = tuple(types.CellType(namespace[n]) if n == name else c
                  for n, c in zip(fn.__code__.co_freevars, fn.__closure__))
    out = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, cells)
    out.__qualname__ = fn.__qualname__
    return out
