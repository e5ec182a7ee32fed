"""Python source with the branches that known constants decide resolved, as text.

:func:`specialise_text` reads the source's syntax tree and edits its lines: an ``if`` / ``elif``
/ ``else`` whose test the constants decide becomes the branch taken, moved left to the ``if``'s
column (a branch not taken goes, with the comments inside it; a comment on a removed ``if`` or
``else`` line stays, on a line of its own); an ``and`` / ``or`` with a decided operand, and a
decided ``x if c else y``, are shortened.  Every other line, comment and name stays as written.
:mod:`.specialise` applies it to a kernel region and one build's constants.
"""

from __future__ import annotations

import ast


class SpecialiseError(ValueError):
    """The text cannot be specialised (a one-line ``if``), or a build's values disagree."""


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


def specialise_text(text: str, constants: dict) -> tuple[str, list[str]]:
    """``text`` (Python source) with the branches that ``constants`` decide resolved, and the
    names that decided them, in order; empty text when no statement of it is left."""
    decider = _Decider(constants)
    edits = _Edits(text, decider)
    if not edits.block(edits.tree.body, placeholder=False):
        return "", []
    return edits.render(), list(dict.fromkeys(decider.deciding))
