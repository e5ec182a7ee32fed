"""The order of a kernel's memory instructions, read from its PTX and its SASS (no GPU needed).

Counting instructions (``ropelab.measure.census``) says *what* a kernel executes; for a memory-bound kernel
the order matters as much: how many loads a thread has issued before it must wait for the first
one.  A thread that waits after each load keeps fewer bytes in flight, and by Little's law a
GPU needs a fixed number of bytes in flight to reach its bandwidth.

:func:`ptx_memory_order`
    The global loads (``L``), global stores (``S``) and conditional branches (``?``) of a
    kernel's PTX in program order, from the first global access on.  PTX is the order the
    source imposes; ``ptxas`` may move loads earlier, but never past a store that may alias.
:func:`sass_schedule`
    The machine code's order: ``L`` global load, ``S`` global store, ``w`` an instruction that
    needs the result of a load still in flight (the warp stalls there until that load
    returns).  ``max_loads_in_flight`` is the largest number of loads issued and not yet waited
    for.  It is a straight-line reading of the code in address order: a loop is read once,
    both sides of a branch are read in sequence.
"""

from __future__ import annotations

import re

_LDG_WIDTH_BYTES = {"64": 8, "128": 16}


# --------------------------------------------------------------------------------------------
# PTX
# --------------------------------------------------------------------------------------------

def _ptx_body(ptx: str) -> list[str]:
    """Instruction lines of the first ``.entry`` in ``ptx`` (comments and directives dropped)."""
    lines, inside = [], False
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not inside:
            inside = line.startswith(".visible .entry") or line.startswith(".entry")
            continue
        if not line or line[0] in ".{}()" or line.endswith(":"):
            continue
        lines.append(line)
    return lines


def ptx_memory_order(ptx: str) -> dict:
    """``{"order": "L L S S ? L L S S", "loads_before_first_store": 2, "loads": 4, "stores": 4}``."""
    tokens = []
    for line in _ptx_body(ptx):
        guarded = line.startswith("@")
        op = (line.split(None, 2)[1] if guarded else line.split(None, 1)[0]).rstrip(";")
        parts = op.split(".")
        if parts[0] == "ld" and len(parts) > 1 and parts[1] == "global":
            tokens.append("L")
        elif parts[0] == "st" and len(parts) > 1 and parts[1] == "global":
            tokens.append("S")
        elif parts[0] == "bra" and guarded and tokens:  # branches before any access: index math
            tokens.append("?")
    while tokens and tokens[-1] == "?":
        tokens.pop()
    first_store = tokens.index("S") if "S" in tokens else len(tokens)
    return {"order": " ".join(tokens),
            "loads_before_first_store": tokens[:first_store].count("L"),
            "loads": tokens.count("L"), "stores": tokens.count("S")}


# --------------------------------------------------------------------------------------------
# SASS (nvdisasm -c output)
# --------------------------------------------------------------------------------------------

_SECTION = re.compile(r"^//-+ \.text\.(\S+) -+$")
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
_REG = re.compile(r"(?<![A-Za-z0-9_])R(\d+)(?:\.(64|128))?")


def sass_functions(sass: str) -> dict[str, list[str]]:
    """``{function name: [instruction text, ...]}`` in address order, one entry per section."""
    out: dict[str, list[str]] = {}
    current = None
    for line in sass.splitlines():
        m = _SECTION.match(line.strip())
        if m:
            current = m.group(1)
            out[current] = []
            continue
        if current is None:
            continue
        m = _INSTR.search(line)
        if m:
            out[current].append(m.group(1).strip())
    return out


def _kernel_code(sass: str, name: str | None) -> list[str]:
    functions = sass_functions(sass)
    for fname, code in functions.items():
        if (name and name in fname) or (not name and not fname.startswith("__cuda")):
            return code
    raise ValueError(f"no SASS function {'matching ' + repr(name) if name else 'besides helpers'} "
                     f"among {list(functions)}")


def _registers(operand: str) -> set[int]:
    regs = set()
    for m in _REG.finditer(operand):
        first = int(m.group(1))
        span = {"64": 2, "128": 4}.get(m.group(2), 1)
        regs.update(range(first, first + span))
    return regs


def _split(instruction: str) -> tuple[str, list[str]]:
    text = re.sub(r"^@!?U?P\w+\s+", "", instruction)  # predicate guard
    op, _, rest = text.partition(" ")
    operands = [o.strip() for o in rest.split(",")] if rest.strip() else []
    return op, operands


def sass_schedule(sass: str, kernel: str | None = None) -> dict:
    """The order of loads, stores and load-waits in one kernel's SASS (see the module docstring).

    ``kernel`` picks the function by a substring of its (mangled) name; default: the first
    function that is not a compiler helper (``__cuda_sm20_div_u64`` ...).
    """
    pending: list[tuple[set[int], int]] = []  # (destination registers, bytes) per load in flight
    tokens: list[str] = []
    max_loads = max_bytes = 0
    loads_before_wait = None
    for instruction in _kernel_code(sass, kernel):
        op, operands = _split(instruction)
        parts = op.split(".")
        is_load, is_store = parts[0] == "LDG", parts[0] == "STG"
        sources: set[int] = set()
        for o in (operands if is_store else operands[1:]):
            sources |= _registers(o)
        written = set() if is_store or not operands else _registers(operands[0])
        # Reading a load's result (or overwriting it) waits for that load.
        blocking = [p for p in pending if p[0] & (sources | written)]
        if blocking:
            if loads_before_wait is None:
                loads_before_wait = sum(t == "L" for t in tokens)
            tokens.append("w")
            pending = [p for p in pending if p not in blocking]
        if is_load:
            width = next((_LDG_WIDTH_BYTES[p] for p in parts[1:] if p in _LDG_WIDTH_BYTES), 4)
            first = min(written) if written else None  # LDG.E.128 R12 fills R12..R15
            dest = set(range(first, first + max(width // 4, 1))) if first is not None else set()
            pending.append((dest, width))
            tokens.append("L")
            max_loads = max(max_loads, len(pending))
            max_bytes = max(max_bytes, sum(b for _, b in pending))
        elif is_store:
            tokens.append("S")
    return {"order": " ".join(tokens), "max_loads_in_flight": max_loads,
            "max_load_bytes_in_flight": max_bytes,
            "loads_before_first_wait": loads_before_wait if loads_before_wait is not None
            else tokens.count("L")}
