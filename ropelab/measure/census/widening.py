"""(In the census child.)  Where a kernel computes in float64: the operations of its typed IR
whose operands widened, by source line.

Numba's typing knows what the PTX census cannot: every operation of the typed IR has the types
its operands had and the types the chosen implementation takes.  An operation widens when it
runs in float64 (its implementation takes or returns float64) although some operand is not a
float64: ``pair < n_pairs`` with an int32 and a uint64 (no integer type holds both, so Numba
compares in float64), ``positions[row] * inv_freq[lane]`` (int32 times float32), ``x * 2.0`` (a
bare literal is a float64), ``a / b`` of two integers, ``math.pow(base, 2)``.  Operations on
operands that are float64 already are the consequence, not the cause, and are not reported; nor
are operations whose float64 operand an earlier operation widened.

:func:`compile_rows` is this module's census-child entry (a shipped kernel, :mod:`.shipped`,
typed with the simulator off); the grader words the findings (:mod:`ropelab.grader.widening`).
"""

from __future__ import annotations

import operator

from . import engine, shipped

_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
            operator.floordiv: "//", operator.mod: "%", operator.pow: "**",
            operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
            operator.eq: "==", operator.ne: "!=", operator.iadd: "+=", operator.isub: "-=",
            operator.imul: "*=", operator.itruediv: "/="}


# --------------------------------------------------------------------------------------------
# The child: type the kernel, find the operations that widen
# --------------------------------------------------------------------------------------------

def _type_name(t) -> str:
    text = str(t)
    if text.startswith("Literal[int]"):
        return "int64"
    if text.startswith("Literal[float]"):
        return "float64"
    return text


def _describe(name: str, defs: dict, depth: int = 0) -> str:
    """Source-like words for the IR variable ``name``: its name, or what made a temporary."""
    value = defs.get(name)
    if not name.startswith("$") or value is None:
        return name.split(".")[0]  # a local or an argument (".1": Numba's SSA copies)
    return _words(value, defs, depth)


def _words(value, defs: dict, depth: int = 0) -> str:
    kind = type(value).__name__
    if depth > 3:
        return "..."
    if kind == "Const":
        return f"the literal {value.value!r}"
    if kind in ("Global", "FreeVar"):
        return value.name
    if kind == "Var":
        return _describe(value.name, defs, depth + 1)
    if kind != "Expr":
        return "an expression"
    if value.op == "getattr":
        return f"{_describe(value.value.name, defs, depth + 1)}.{value.attr}"
    if value.op in ("getitem", "static_getitem"):
        index = _field(value, "index_var") or _field(value, "index")
        inner = _describe(index.name, defs, depth + 1) if hasattr(index, "name") else "..."
        return f"{_describe(value.value.name, defs, depth + 1)}[{inner}]"
    if value.op == "call":
        return f"{_describe(value.func.name, defs, depth + 1)}(...)"
    if value.op in ("binop", "inplace_binop"):
        symbol = _SYMBOLS.get(value.fn, "?")
        return (f"({_describe(value.lhs.name, defs, depth + 1)} {symbol} "
                f"{_describe(value.rhs.name, defs, depth + 1)})")
    return "an expression"


def _field(expr, name: str):
    """An IR expression's field, or None (a missing one raises KeyError, not AttributeError)."""
    try:
        return getattr(expr, name)
    except (AttributeError, KeyError):
        return None


def _source(name: str, defs: dict) -> bool:
    """Whether a float64 operand is where float64 enters: a literal, a global number or an
    argument of the kernel, not a value an earlier operation widened."""
    value = defs.get(name)
    while type(value).__name__ == "Var":  # a copy: look through it
        value = defs.get(value.name)
    return type(value).__name__ in ("Const", "Global", "FreeVar", "Arg")


def _origin(name: str, defs: dict) -> str | None:
    """What a named variable was first set from, when that says where its type came from
    (``pair = cuda.threadIdx.x``: an int32)."""
    value = defs.get(name)
    if name.startswith("$") or type(value).__name__ != "Expr" or value.op != "getattr":
        return None
    return _words(value, defs)


def findings(annotation) -> list[dict]:
    """The widening operations of a typed function (``cres.type_annotation``), by line."""
    from numba.core import types

    defs = {}
    for block in annotation.blocks.values():
        for stmt in block.body:
            if type(stmt).__name__ == "Assign":
                defs.setdefault(stmt.target.name, stmt.value)
    typemap, calltypes = annotation.typemap, annotation.calltypes
    found, seen = [], set()
    for block in annotation.blocks.values():
        for stmt in block.body:
            expr = stmt.value if type(stmt).__name__ == "Assign" else None
            if type(expr).__name__ != "Expr" or expr.op not in ("binop", "inplace_binop",
                                                                "call"):
                continue
            sig = calltypes.get(expr)
            if sig is None:
                continue
            operands = [expr.lhs, expr.rhs] if expr.op != "call" else list(expr.args)
            if expr.op == "call":
                callee = typemap.get(expr.func.name)
                if isinstance(callee, types.NumberClass):  # float32(...), uint64(...): a cast
                    continue
            actual = [typemap.get(v.name) for v in operands]
            runs_f64 = types.float64 in tuple(sig.args) or sig.return_type == types.float64
            if not runs_f64 or not actual or all(t == types.float64 for t in actual):
                continue
            if any(t == types.float64 and not _source(v.name, defs)
                   for v, t in zip(operands, actual)):
                continue  # a float64 computed earlier: that earlier operation is the cause
            key = (stmt.loc.line, _field(expr, "fn") if expr.op != "call" else expr.func.name)
            if key in seen:  # a loop's copies of one operation (pair, pair.1 ...)
                continue
            seen.add(key)
            described = []
            for v, t in zip(operands, actual):
                described.append({"words": _describe(v.name, defs), "type": _type_name(t),
                                  "origin": _origin(v.name, defs),
                                  "literal": type(defs.get(v.name)).__name__ == "Const"})
            found.append({"line": stmt.loc.line, "op": expr.op,
                          "symbol": _SYMBOLS.get(_field(expr, "fn"), ""),
                          "callee": _describe(expr.func.name, defs) if expr.op == "call" else "",
                          "operands": described})
    return sorted(found, key=lambda f: f["line"])


def compile_rows(tasks: list[dict]):
    """(In the child.)  Type each ``{key, job, signature}``; one row of findings each."""
    from numba.core import sigutils
    from numba.cuda import compiler

    counter = [0]
    for task in tasks:
        def work(task=task):
            fn = shipped.rebuild_source(task["job"], counter)
            args, ret = sigutils.normalize_signature(task["signature"])
            cres = compiler.compile_cuda(fn, ret, args, fastmath=True, cc=engine.CC)
            return {"findings": findings(cres.type_annotation)}
        yield engine.attempt({"key": task["key"]}, work, describe=shipped.useful_lines)
