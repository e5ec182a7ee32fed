"""The integer divisions one pass through a kernel runs, counted on numba's LLVM IR before NVVM
optimizes it: what the source divides, as it is written.

The PTX text is the compiled code after LLVM has transformed the loops: it unrolls a
grid-stride loop, peels an iteration into straight-line code, adds a division for a trip count
(:mod:`.passes` counts that text per pass, and cannot tell a peeled copy or a trip count from a
division of the learner's).  Numba's IR has the loops as written: each ``//`` or ``%`` of the
source is one ``udiv``/``sdiv`` (beside a ``urem``/``srem``: numba computes floor division and
remainder together).  A ``range()`` loop's trip count is a division by the range's step, read
from the range's state (``{start, stop, step}``); it is not counted here: a constant step
compiles to no division, and a step known only at run time is a signed division, which the
PTX census's signed count refuses and names (:mod:`ropelab.grader.census_gates`).

``divrem_source`` is the most ``udiv``/``sdiv`` on one path through the kernel from its entry, each
loop's body once (the edges back to a loop's head removed): the straight-line code and one trip
of every loop on the way, added.  A call of a function of the same module adds that function's
count.
"""

from __future__ import annotations

import re

from .passes import back_edges_and_order, most_on_a_path

_DEFINE = re.compile(r'^define [^@]*@("[^"]+"|[\w.$]+)\(')
_LABEL = re.compile(r'^("[^"]+"|[\w.$-]+):')
_TARGET = re.compile(r'label %("[^"]+"|[\w.$-]+)')
_CALL = re.compile(r'\bcall [^@]*@("[^"]+"|[\w.$]+)\(')
_DIVISION = re.compile(r'= (?:udiv|sdiv)(?: exact)? i\d+ [^,]+, (%"[^"]+"|%[\w.]+|-?\d+)')
_DEF = re.compile(r'^(%"[^"]+"|%[\w.]+) = (.*)$')
_LOAD = re.compile(r'^load [^,]+, (?:ptr|[^ ,]+\*) (%"[^"]+"|%[\w.]+)')
_RANGE_STEP = re.compile(r'^getelementptr inbounds \{i64, i64, i64\}, .*, i32 0, i32 2$')


def _functions(ir: str) -> dict:
    """name -> list of (label, lines) blocks, in text order (the first is the entry)."""
    functions, blocks, name = {}, None, None
    for line in ir.splitlines():
        m = _DEFINE.match(line)
        if m:
            name, blocks = m.group(1).strip('"'), []
            continue
        if blocks is None:
            continue
        text = line.strip()
        if text.startswith("}"):
            functions[name] = blocks
            blocks = None
            continue
        m = _LABEL.match(line)
        if m:
            blocks.append([m.group(1).strip('"'), []])
        elif text and text != "{" and not text.startswith(";"):
            if not blocks:  # an entry block without a label
                blocks.append(["", []])
            blocks[-1][1].append(text)
    return functions


def _successors(lines: list) -> list:
    for line in reversed(lines):
        if line.startswith(("br ", "switch ", "indirectbr ")):
            return [t.strip('"') for t in _TARGET.findall(line)]
        if line.startswith(("ret", "unreachable", "resume")):
            return []
    return []


def _is_range_step(divisor: str, defs: dict) -> bool:
    """``divisor`` is a range's step, loaded from its ``{start, stop, step}`` state."""
    loaded = _LOAD.match(defs.get(divisor, ""))
    return bool(loaded) and bool(_RANGE_STEP.match(defs.get(loaded.group(1), "")))


def count_ir_divisions(ir: str) -> int:
    """``divrem_source`` of a kernel's LLVM IR (see the module docstring)."""
    functions = _functions(ir)
    memo: dict = {}

    def weight(lines: list, stack: tuple, defs: dict) -> int:
        n = 0
        for line in lines:
            m = _DIVISION.search(line)
            n += bool(m) and not _is_range_step(m.group(1), defs)
            m = _CALL.search(line)
            callee = m.group(1).strip('"') if m else None
            if callee in functions:
                n += count(callee, stack)
        return n

    def count(name: str, stack: tuple = ()) -> int:
        if name in memo:
            return memo[name]
        if name in stack:
            return 0  # recursion: numba refuses it on a GPU anyway
        blocks = functions[name]
        index = {label: k for k, (label, _) in enumerate(blocks)}
        succ = [[index[t] for t in _successors(lines) if t in index] for _, lines in blocks]
        defs = {m.group(1): m.group(2) for _, lines in blocks for line in lines
                for m in [_DEF.match(line)] if m}
        w = [weight(lines, stack + (name,), defs) for _, lines in blocks]
        back, order = back_edges_and_order(succ)
        top = most_on_a_path(succ, order, back, lambda b: w[b])
        memo[name] = top
        return top

    called = {m.strip('"') for blocks in functions.values() for _, lines in blocks
              for line in lines for m in _CALL.findall(line)}
    roots = [n for n in functions if n not in called] or list(functions)
    return max((count(n) for n in roots), default=0)
