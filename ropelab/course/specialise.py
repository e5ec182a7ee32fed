"""A kernel's source as one build compiles it: the branches on build constants resolved.

A kernel factory (``make_kernel`` of the fused kernel, of its backward) fixes constants in
Python (``E``, ``PACKED``, ``VEC4``, ``CACHE`` ...) and returns code that reads them as plain
names; Numba compiles them in, and a branch on one of them is gone from the builds where it is
false.  The full source holds every build's branches.  A lesson about one build shows
:func:`specialised`: the same marked region, read from the package file as
:func:`~ropelab.course.display.excerpt` reads it, with

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

from .display import region_text

WIDTH = 96  # the header's comment lines wrap here, as the package's code does


class SpecialiseError(ValueError):
    """The region cannot be specialised (a one-line ``if``, two builds' constants disagree)."""


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


def _same(a, b) -> bool:
    try:
        return bool(a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
    except Exception:
        return False


# --------------------------------------------------------------------------------------------
# Deciding expressions
# --------------------------------------------------------------------------------------------

_UNKNOWN = object()
_EVALUABLE = (ast.Expression, ast.Constant, ast.Name, ast.Load, ast.UnaryOp, ast.BinOp,
              ast.BoolOp, ast.Compare, ast.unaryop, ast.operator, ast.boolop, ast.cmpop)


class _Decider:
    def __init__(self, constants: dict):
        self.constants = constants
        self.deciding: list[str] = []  # names that decided something, in order

    def value(self, node):
        """The value of ``node`` when the constants decide it, else ``_UNKNOWN``."""
        names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
        if not all(isinstance(n, _EVALUABLE) for n in ast.walk(node)):
            return _UNKNOWN
        if not all(n in self.constants for n in names):
            return _UNKNOWN
        value = eval(compile(ast.Expression(node), "<build constant>", "eval"),
                     {"__builtins__": {}}, dict(self.constants))
        self.deciding += names
        return value

    def truth(self, node):
        """True or False when the constants decide the truth of a test, else ``_UNKNOWN``; for
        ``and`` / ``or``, one decisive operand is enough."""
        value = self.value(node)
        if value is not _UNKNOWN:
            return bool(value)
        if isinstance(node, ast.BoolOp):
            decisive = isinstance(node.op, ast.Or)  # True decides an or, False an and
            for operand in node.values:
                if self.truth(operand) is decisive:
                    return decisive
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.truth(node.operand)
            return _UNKNOWN if inner is _UNKNOWN else not inner
        return _UNKNOWN


def _paren(node, text: str) -> str:
    return f"({text})" if isinstance(node, (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda)) else text


# --------------------------------------------------------------------------------------------
# The text: line edits driven by the syntax tree
# --------------------------------------------------------------------------------------------

class _Edits:
    """Edits of a region's lines (1-based, as the syntax tree numbers them)."""

    def __init__(self, text: str, decider: _Decider):
        self.lines = text.split("\n")
        self.tree = ast.parse(text)
        self.decide = decider
        self.drop: set[int] = set()
        self.dedent = [0] * (len(self.lines) + 2)
        self.segments: dict[int, list] = {}  # line -> [(start byte, end byte, text)]
        self.replace: dict[int, str] = {}  # line -> new text (before its dedent)
        self.elif_to_if: set[int] = set()  # "elif" lines that become "if" lines

    # -- small helpers -----------------------------------------------------------------------
    def line(self, i: int) -> str:
        return self.lines[i - 1]

    def segment(self, node) -> str:
        return ast.get_source_segment("\n".join(self.lines), node)

    def comment_after(self, i: int, col_bytes: int) -> str | None:
        """The ``# ...`` comment at the end of line ``i`` after byte column ``col_bytes``."""
        rest = self.line(i).encode()[col_bytes:].decode()
        at = rest.find("#")
        return rest[at:].strip() if at >= 0 else None

    def keep_comment(self, i: int, col: int, comment: str | None):
        """Line ``i`` (a removed ``if`` / ``else`` line) becomes its comment, or goes."""
        if comment:
            self.replace[i] = " " * col + comment
            self.drop.discard(i)
        else:
            self.drop.add(i)

    def drop_range(self, first: int, last: int):
        self.drop.update(range(first, last + 1))

    def shift(self, first: int, last: int, by: int):
        for i in range(first, last + 1):
            self.dedent[i] += by

    def else_line(self, node) -> int:
        """The ``else:`` line of an ``if`` with a plain ``else`` branch."""
        for i in range(node.body[-1].end_lineno + 1, node.orelse[0].lineno):
            if self.line(i).strip().startswith("else"):
                return i
        raise SpecialiseError(f"line {node.lineno}: no 'else:' line found")

    def is_elif(self, node) -> bool:
        return (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)
                and self.line(node.orelse[0].lineno).lstrip().startswith("elif"))

    # -- statements --------------------------------------------------------------------------
    def block(self, stmts, placeholder: bool = True) -> bool:
        """Specialise a statement list; False when no statement of it is left (then, with
        ``placeholder``, a ``pass`` takes the first one's line)."""
        kept = [self.statement(s) for s in stmts]
        if stmts and not any(kept) and placeholder:
            first = stmts[0]
            comment = self.replace.get(first.lineno, "").strip()
            self.replace[first.lineno] = " " * first.col_offset + "pass" + (
                f"  {comment}" if comment else "")
            self.drop.discard(first.lineno)
        return any(kept)

    def statement(self, node) -> bool:
        if isinstance(node, ast.If):
            return self.if_(node)
        self.expressions(node)
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if stmts and isinstance(stmts[0], ast.stmt):
                self.block(stmts)
        for handler in getattr(node, "handlers", ()):
            self.block(handler.body)
        return True

    def header_end(self, node) -> int:
        end = node.test.end_lineno
        if node.body[0].lineno <= end:
            raise SpecialiseError(f"line {node.lineno}: a one-line 'if' cannot be specialised")
        return end

    def promote(self, stmts, first: int, last: int, by: int) -> bool:
        """Lines ``first..last`` (a branch taken) move ``by`` columns left."""
        self.shift(first, last, by)
        return self.block(stmts, placeholder=False)  # the enclosing block places any pass

    def if_(self, node, elif_=False) -> bool:
        """An ``if`` (or, with ``elif_``, an ``elif`` of an undecided ``if``); False when no
        statement of it is left."""
        truth = self.decide.truth(node.test)
        end = self.header_end(node)
        col = node.col_offset
        body_last = node.body[-1].end_lineno
        header_comment = self.comment_after(end, node.test.end_col_offset)
        if truth is _UNKNOWN:
            self.test(node.test)
            self.block(node.body)
            if self.is_elif(node):
                self.if_(node.orelse[0], elif_=True)
            elif node.orelse:
                self.block(node.orelse)
            return True
        if elif_:
            # An elif of an undecided if: True makes it the last branch ("else:"), False
            # removes it.
            if truth:
                self.drop_range(node.lineno + 1, end)
                self.replace[node.lineno] = " " * col + "else:" + (
                    f"  {header_comment}" if header_comment else "")
                self.block(node.body)
                if node.orelse:
                    self.drop_range(body_last + 1, node.orelse[-1].end_lineno)
                return True
            self.drop_range(node.lineno, body_last)
            if self.is_elif(node):
                return self.if_(node.orelse[0], elif_=True)
            if node.orelse:  # the elif's else stays the undecided if's else
                self.block(node.orelse)
            return True
        if truth:
            self.drop_range(node.lineno, end)
            self.keep_comment(node.lineno, col, header_comment)
            kept = self.promote(node.body, end + 1, body_last, node.body[0].col_offset - col)
            if node.orelse:
                self.drop_range(body_last + 1, node.orelse[-1].end_lineno)
            return kept
        self.drop_range(node.lineno, body_last)
        if not node.orelse:
            return False
        if self.is_elif(node):
            inner = node.orelse[0]
            self.elif_to_if.add(inner.lineno)
            return self.if_(inner)
        at = self.else_line(node)
        self.drop_range(body_last + 1, at)
        self.keep_comment(at, col, self.comment_after(at, self.line(at).encode().index(b":") + 1))
        return self.promote(node.orelse, at + 1, node.orelse[-1].end_lineno,
                            node.orelse[0].col_offset - col)

    # -- expressions -------------------------------------------------------------------------
    def test(self, node):
        """An undecided test: drop its decided ``and`` / ``or`` operands."""
        if isinstance(node, ast.BoolOp):
            neutral = isinstance(node.op, ast.And)  # True is neutral in an and, False in an or
            left = [v for v in node.values if self.decide.truth(v) is not neutral]
            if len(left) < len(node.values):
                self.edit(node, f" {'and' if neutral else 'or'} ".join(
                    _paren(v, self.segment(v)) for v in left))
                return
        self.expressions(node)

    def expressions(self, node):
        """Decided leading operands of ``and`` / ``or`` and decided conditional expressions
        inside a statement (its nested statements are handled on their own)."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                continue
            if isinstance(child, ast.IfExp):
                truth = self.decide.truth(child.test)
                if truth is not _UNKNOWN:
                    taken = child.body if truth else child.orelse
                    self.edit(child, _paren(taken, self.segment(taken)))
                    continue
            if isinstance(child, ast.BoolOp):
                stop = isinstance(child.op, ast.Or)  # a leading True ends an or
                values = list(child.values)
                while len(values) > 1:
                    v = self.decide.value(values[0])
                    if v is _UNKNOWN or not isinstance(v, bool):
                        break
                    if v is stop:
                        values = [values[0]]
                        break
                    values.pop(0)
                if len(values) < len(child.values):
                    text = (repr(self.decide.value(values[0])) if len(values) == 1
                            and self.decide.value(values[0]) is not _UNKNOWN else
                            f" {'or' if stop else 'and'} ".join(
                                _paren(v, self.segment(v)) for v in values))
                    self.edit(child, text)
                    continue
            self.expressions(child)

    def edit(self, node, text: str):
        if node.lineno != node.end_lineno:
            return  # a decided part of a multi-line expression stays as written
        self.segments.setdefault(node.lineno, []).append((node.col_offset, node.end_col_offset, text))

    # -- output ------------------------------------------------------------------------------
    def render(self) -> str:
        out = []
        for i in range(1, len(self.lines) + 1):
            if i in self.drop:
                continue
            if i in self.replace:
                line = self.replace[i]
            else:
                raw = self.line(i).encode()  # the tree's columns count UTF-8 bytes
                for start, end, text in sorted(self.segments.get(i, ()), reverse=True):
                    raw = raw[:start] + text.encode() + raw[end:]
                line = raw.decode()
                if i in self.elif_to_if:  # after the edits: their columns are the elif's
                    line = line.replace("elif", "if", 1)
            cut = min(self.dedent[i], len(line) - len(line.lstrip(" ")))
            out.append(line[cut:].rstrip())
        text = "\n".join(out)
        while "\n\n\n" in text:
            text = text.replace("\n\n\n", "\n\n")
        return text.strip("\n")


# --------------------------------------------------------------------------------------------
# The public calls
# --------------------------------------------------------------------------------------------

def specialise_text(text: str, constants: dict, decider: _Decider | None = None):
    """``text`` (Python source) with the branches that ``constants`` decide resolved, and the
    names that decided them; empty text when no statement of it is left."""
    decider = decider or _Decider(constants)
    edits = _Edits(text, decider)
    if not edits.block(edits.tree.body, placeholder=False):
        return "", []
    return edits.render(), list(dict.fromkeys(decider.deciding))


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
            text = label + ", ".join(f"{k} = {shown(v)}" for k, v in items.items())
            return textwrap.wrap(text, WIDTH - 2, initial_indent="# ", subsequent_indent="#   ",
                                 break_on_hyphens=False)

        constants = {k: v for k, v in self.read.items() if _is_constant(v)}
        helpers = {k: v for k, v in self.read.items() if not _is_constant(v)
                   and shown(v) != k}  # a helper under its own name needs no line
        lines = textwrap.wrap(f"{self.where}, region '{self.region}', as the build {self.build} "
                              "compiles it: the branches it does not take removed (every build's "
                              "source: course.excerpt)", WIDTH - 2, initial_indent="# ",
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
    where, text = region_text(fn, region)
    values = build_values(fn)
    constants = {k: v for k, v in values.items() if _is_constant(v) and k not in set(keep)}
    decider = _Decider(constants)
    out, _ = specialise_text(text, constants, decider)
    if not out.strip():
        raise SpecialiseError(f"the build {fn.__qualname__} runs none of region {region!r}")
    named = [n.id for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Name)]
    order = sorted(set(named) & set(values), key=named.index)
    read = {k: values[k] for k in order if k not in set(keep)}
    decided = {k: constants[k] for k in dict.fromkeys(decider.deciding) if k not in read}
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
