"""Where the simulator's integers wrap and a GPU's do not: a 32-bit sum that overflows, or a
left shift past 32 bits.

On the simulator a kernel's ``uint32``/``int32`` values (and narrower) are NumPy scalars, and
NumPy computes ``uint32 + uint32`` in 32 bits: past 2**32 it wraps, with a RuntimeWarning.
Numba computes the same sum in 64 bits (its integer arithmetic is at least 64 bits wide), so on
a GPU the carry stays.  A kernel that counts on the wrap (an FP8 rebias that adds the
complement ``0xC4000000`` instead of subtracting ``120 << 23``) passes on the simulator and is
wrong on an H200: a held-out learner's was, every code off by 4096.

:func:`refusing` turns that overflow, while the learner's code runs, into :class:`IntegerWrap`
naming the line, unless the line wraps on purpose: the arithmetic sits inside
``uint32(...)`` (or another narrow integer type) or under ``& 0xFFFFFFFF``, which truncates on
both.  A float overflow (NumPy words it the same way) is not an integer wrap: the line must
involve a narrow integer scalar or array.  Only on the simulator; on a GPU it does nothing.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import sys
import warnings

import numpy as np

from ..target import SIMULATED

_NARROW = frozenset({"uint32", "int32", "uint16", "int16", "uint8", "int8"})
_OVERFLOW = "overflow encountered in scalar"


class IntegerWrap(ArithmeticError):
    """A narrow integer sum wrapped on the simulator, where a GPU would keep the carry."""


def _narrow_int(value) -> bool:
    dtype = getattr(value, "dtype", None)
    try:
        dtype = np.dtype(dtype) if dtype is not None else None
    except TypeError:
        return False
    return dtype is not None and dtype.kind in "iu" and dtype.itemsize <= 4


def _statement(filename: str, lineno: int):
    text = linecache.getline(filename, lineno).strip()
    try:
        tree = ast.parse(text)
    except SyntaxError:  # a statement over several lines: not judged
        return text, None
    return text, tree


def _narrow_type(func, scope: dict) -> bool:
    """Whether the called ``func`` (an AST node) is a narrow integer type: numba's
    ``uint32`` under any name, NumPy's, or a name that says so."""
    if isinstance(func, ast.Name):
        name, value = func.id, scope.get(func.id)
    elif isinstance(func, ast.Attribute):
        name, value = func.attr, None
        root = func.value
        if isinstance(root, ast.Name) and root.id in scope:
            value = getattr(scope[root.id], func.attr, None)
    else:
        return False
    bits = getattr(value, "bitwidth", None)
    if isinstance(bits, int) and getattr(value, "signed", None) is not None:
        return bits <= 32  # a numba Integer type
    if isinstance(value, type) and issubclass(value, np.integer):
        return np.dtype(value).itemsize <= 4
    return name in _NARROW


def _wraps_on_purpose(tree, scope: dict) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if _narrow_type(node.func, scope) and any(isinstance(n, ast.BinOp)
                                                      for a in node.args for n in ast.walk(a)):
                return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
            sides = (node.left, node.right)
            masked = any(isinstance(s, ast.Constant) and isinstance(s.value, int)
                         and 0 <= s.value <= 0xFFFFFFFF for s in sides)
            if masked and any(isinstance(s, ast.BinOp) for s in sides):
                return True
    return False


def _frame_at(filename: str, lineno: int):
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == filename and frame.f_lineno == lineno:
            return frame
        frame = frame.f_back
    return None


def _wrap_on_gpu_differs(filename: str, lineno: int) -> str | None:
    """The line's text when its overflow is a narrow integer wrap a GPU would not make."""
    text, tree = _statement(filename, lineno)
    frame = _frame_at(filename, lineno) if tree is not None else None
    if frame is None:
        return None
    scope = {**frame.f_globals, **frame.f_locals}
    if _wraps_on_purpose(tree, scope):
        return None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    if not any(_narrow_int(scope.get(n)) for n in names):
        return None  # a float overflow: the same on both
    return text


# ---- shifts: NumPy keeps a narrow integer's width, numba widens (no warning to catch) ------

_SIMPLE = (ast.Name, ast.Constant, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.operator,
           ast.unaryop, ast.Load, ast.expr_context)
_shift_sites: dict = {}  # (filename, line) -> [(left, right) compiled expressions], or []
_has_shift: dict = {}  # code object -> whether its source has a left shift


def _sites(filename: str, lineno: int) -> list:
    """The left shifts of the line whose two operands can be evaluated again safely (names,
    constants, attributes and arithmetic of those: no call, no index), compiled."""
    key = (filename, lineno)
    found = _shift_sites.get(key)
    if found is None:
        text, tree = _statement(filename, lineno)
        found = []
        if tree is not None and "<<" in text:
            for node in ast.walk(tree):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift) and all(
                        isinstance(n, _SIMPLE) for side in (node.left, node.right)
                        for n in ast.walk(side)):
                    found.append(tuple(compile(ast.Expression(side), filename, "eval")
                                       for side in (node.left, node.right)))
            found = found if not _wraps_on_purpose(tree, {}) else []
        _shift_sites[key] = found
    return found


def _shift_lost_bits(frame) -> str | None:
    """The line's text when one of its left shifts of a narrow integer loses bits here (NumPy
    keeps the operand's width) that a GPU keeps (numba widens ``uint32 << int64`` to 64 bits)."""
    code = frame.f_code
    for left, right in _sites(code.co_filename, frame.f_lineno):
        try:
            a = eval(left, frame.f_globals, frame.f_locals)  # noqa: S307  (names and constants)
            b = eval(right, frame.f_globals, frame.f_locals)  # noqa: S307
        except Exception:  # noqa: BLE001  (not yet defined on this line: nothing to say)
            continue
        if not (isinstance(a, np.integer) and a.dtype.itemsize <= 4) or \
                not isinstance(b, (int, np.integer)) or not 0 <= int(b) < 64:
            continue
        exact = int(a) << int(b)
        info = np.iinfo(a.dtype)
        if not info.min <= exact <= info.max:
            return linecache.getline(code.co_filename, frame.f_lineno).strip()
    return None


def _shift_tracer(frame, event, arg):
    """A ``sys.settrace`` function: the lines of functions whose source has a ``<<`` are
    checked by :func:`_shift_lost_bits` before they run."""
    if event != "call":
        return None
    code = frame.f_code
    has = _has_shift.get(code)
    if has is None:
        try:
            lines, _ = inspect.getsourcelines(code)
            has = any("<<" in line for line in lines)
        except (OSError, TypeError):
            has = False
        _has_shift[code] = has
    return _check_line if has else None


def _check_line(frame, event, arg):
    if event == "line":
        text = _shift_lost_bits(frame)
        if text is not None:
            raise IntegerWrap(
                f"line {frame.f_lineno} `{text}`: a left shift of a 32-bit (or narrower) "
                "integer pushed bits past its width here on the simulator, which keeps the "
                "operand's width and drops them; on a GPU Numba computes `uint32 << int` in 64 "
                "bits and keeps them, so the kernel computes something else there.  Shift "
                "less, or drop the bits on purpose: uint32(... << ...) or & 0xFFFFFFFF")
    return _check_line


@contextlib.contextmanager
def refusing():
    """While active (simulator only), a narrow integer overflow in a line that does not wrap on
    purpose raises :class:`IntegerWrap` in the thread that made it, and so does a left shift of
    a narrow integer that loses bits here (no warning says so: a line tracer checks the lines
    of the functions that shift)."""
    if not SIMULATED:
        yield
        return
    from . import block

    with block.checking(_shift_tracer), _sum_wraps():
        yield


@contextlib.contextmanager
def _sum_wraps():
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, RuntimeWarning) and _OVERFLOW in str(message):
            text = _wrap_on_gpu_differs(filename, lineno)
            if text is not None:
                raise IntegerWrap(
                    f"line {lineno} `{text}`: a 32-bit integer sum wrapped here on the "
                    f"simulator ({message}); on a GPU Numba computes it in 64 bits and keeps "
                    "the carry, so the kernel computes something else there.  Keep it in "
                    "range (subtract rather than add a complement), or wrap on purpose: "
                    "uint32(...) around the whole sum")
        return previous(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=_OVERFLOW, category=RuntimeWarning)
        warnings.showwarning = show
        yield
