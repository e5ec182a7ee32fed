"""Which branches split a warp: the integer registers of one warp evaluated lane by lane.

A warp whose lanes disagree on a branch runs both arms, one after the other: the even lanes
load, wait and store, then the odd lanes do.  The round count of :mod:`.ptx` must then chain
the arms (two memory latencies), where a branch the whole warp takes together costs one arm's.
Lane steps (:mod:`.lanes`) cannot tell the two apart: ``i & 1`` steps by nothing an address
notices, yet it alternates from lane to lane.

:func:`divergent_branches` therefore runs the kernel's integer arithmetic for the 32 lanes of
one warp with concrete values (as many lanes as the block has threads, up to 32): the first warp of the second block (``%ctaid.x`` = 1, away from
the grid's ragged end), the launch's block shape, and the integer parameters the launch passes
(sizes, strides, scalars).  Anything it cannot know (a pointer, a loaded value, a float) is
unknown, and so is every result that depends on it; a branch whose guard is unknown is taken
to keep the warp together.  One pass in program order: a register written in two places holds
the later value, and a loop's registers their first pass's, which is all a guard on the lane's
parity or on a bound needs.
"""

from __future__ import annotations

from .lanes import immediate, registers

WARP = 32
_UNIFORM_GUESS = {"%nctaid.x": 1024, "%nctaid.y": 1, "%nctaid.z": 1,
                  "%ctaid.x": 1, "%ctaid.y": 0, "%ctaid.z": 0}
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
            "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
            "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
            "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b,
            "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b}


def _bits(parts: list) -> tuple[int, bool]:
    """(width, signed) of an instruction's last integer type suffix (64-bit signed when none)."""
    for p in reversed(parts):
        if p[:1] in "sub" and p[1:] in ("8", "16", "32", "64"):
            return int(p[1:]), p[0] == "s"
        if p == "pred":
            return 1, False
    return 64, True


def _wrap(value: int, bits: int, signed: bool) -> int:
    value &= (1 << bits) - 1
    if signed and value >> (bits - 1):
        value -= 1 << bits
    return value


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _special(name: str, lane: int, block: tuple) -> int | None:
    bx, by, bz = block
    flat = lane
    if name == "%laneid":
        return lane
    if name.startswith("%tid."):
        return {"x": flat % bx, "y": (flat // bx) % by, "z": flat // (bx * by)}[name[-1]]
    if name.startswith("%ntid."):
        return {"x": bx, "y": by, "z": bz}[name[-1]]
    return _UNIFORM_GUESS.get(name)


def _operand(text: str, values: dict, block: tuple):
    """The operand's lane values (one per thread of the warp), or None where unknown."""
    text = text.strip()
    negate = text.startswith("!")
    text = text.lstrip("!")
    width = _width(block)
    value = immediate(text)
    if value is not None:
        return (value,) * width
    regs = registers(text)
    if not regs or text.startswith("[") or text.startswith("0f") or text.startswith("0d"):
        return None
    reg = regs[0]
    if "." in reg or reg == "%laneid":
        lanes = tuple(_special(reg, lane, block) for lane in range(width))
        return None if None in lanes else lanes
    lanes = values.get(reg)
    if lanes is not None and negate:
        return tuple(not v for v in lanes)
    return lanes


def _width(block: tuple) -> int:
    """Threads in the block's first warp: a block of 16 threads fills half a warp."""
    return min(WARP, block[0] * block[1] * block[2])


def _lane_op(ins, a: list):
    """One lane's result of ``ins`` on its operand values ``a``, or None."""
    head, parts = ins.head, ins.parts
    bits, signed = _bits(parts)
    if head in ("mov", "cvt", "cvta"):
        return a[0]
    if head == "setp":
        cmp = parts[1]
        x, y = a[0], a[1]
        if parts[-1][:1] in "sub":  # integers compare at the type's width and signedness
            unsigned = parts[-1][0] != "s" or cmp in ("lo", "ls", "hi", "hs")
            x, y = _wrap(x, bits, not unsigned), _wrap(y, bits, not unsigned)
        return bool(_COMPARE[cmp](x, y)) if cmp in _COMPARE else None
    if head == "selp":
        return a[0] if a[2] else a[1]
    if bits == 1 and head in ("and", "or", "xor", "not"):
        x = bool(a[0])
        return {"and": lambda: x and bool(a[1]), "or": lambda: x or bool(a[1]),
                "xor": lambda: x != bool(a[1]), "not": lambda: not x}[head]()
    if head in ("div", "rem") and a[1] == 0:
        return None
    ops = {"add": lambda: a[0] + a[1], "sub": lambda: a[0] - a[1],
           "mul": lambda: a[0] * a[1], "mad": lambda: a[0] * a[1] + a[2],
           "shl": lambda: a[0] << a[1],
           "shr": lambda: (a[0] if signed else _wrap(a[0], bits, False)) >> a[1],
           "and": lambda: a[0] & a[1], "or": lambda: a[0] | a[1], "xor": lambda: a[0] ^ a[1],
           "not": lambda: ~a[0], "neg": lambda: -a[0], "abs": lambda: abs(a[0]),
           "min": lambda: min(a[0], a[1]), "max": lambda: max(a[0], a[1]),
           "div": lambda: _trunc_div(a[0], a[1]) if signed else
           _wrap(a[0], bits, False) // _wrap(a[1], bits, False),
           "rem": lambda: a[0] - a[1] * _trunc_div(a[0], a[1]) if signed else
           _wrap(a[0], bits, False) % _wrap(a[1], bits, False)}
    if head not in ops:
        return None
    if head in ("shl", "shr") and not 0 <= a[1] < 128:
        return None
    wide = "wide" in parts  # mul.wide: the result is twice the operands' width
    return _wrap(ops[head](), min(64, 2 * bits) if wide else bits, signed)


def divergent_branches(kernel, params=None, block=None) -> set:
    """Indices of the guarded branches of ``kernel`` (:func:`.ptx.parse`) whose guard differs
    between the lanes of the warp evaluated (see the module docstring).  ``params``: the PTX
    parameters' values (:func:`.lanes.parameter_values`); ``block``: the launch's block shape
    (256 threads when not given)."""
    block = block or (256, 1, 1)
    shape = ((block,) if isinstance(block, int) else tuple(block)) + (1, 1)
    shape = tuple(int(v) for v in shape[:3])
    values = {}
    for reg, index in kernel.params.items():
        if params is not None and index < len(params) and isinstance(params[index], int):
            values[reg] = (int(params[index]),) * _width(shape)
    split = set()
    for k, ins in enumerate(kernel.instructions):
        if ins.head == "bra":
            if ins.guard is not None:
                lanes = values.get(ins.guard)
                if lanes is not None and len(set(map(bool, lanes))) > 1:
                    split.add(k)
            continue
        if not ins.dest:
            continue
        result = None
        if ins.head != "ld" and not ins.space:
            ops = [_operand(t, values, shape) for t in ins.args]
            if ops and None not in ops:
                try:
                    lanes = [_lane_op(ins, [o[lane] for o in ops])
                             for lane in range(_width(shape))]
                except (ArithmeticError, IndexError, TypeError, ValueError):
                    # an operand this evaluation does not model (a float bit pattern, a
                    # divisor that wraps to 0): the result is unknown
                    lanes = [None]
                result = None if None in lanes else tuple(lanes)
        first = ins.dest[0]
        if ins.guard is not None:
            result = None  # written by the lanes whose guard holds only: unknown
        if result is None:
            for d in ins.dest:
                values.pop(d, None)
            continue
        values[first] = result
        if ins.head == "setp" and len(ins.dest) > 1:  # setp's second result, %p | %q: not p
            values[ins.dest[1]] = tuple(not v for v in result)
    return split
