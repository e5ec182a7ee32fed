"""Lane steps: how a PTX register changes from one lane of a warp to the next.

:func:`step` gives each instruction's result a *step* (the difference between neighbouring
lanes' values) from its operands' steps, by the rules an address computation needs: ``%tid.x``
and ``%laneid`` step by 1, every other special register, parameter and immediate by 0; sums
add, products scale by a known constant, shifts and divisions by a constant scale down (below
one element per warp the value is one for the whole warp: ``i >> 5``, ``i // n_pairs``), a
remainder by a wide divisor keeps the step, ``i & 31`` keeps it and ``i & -32`` is uniform
across an aligned warp; the sign of an index (``i >> 63``, the rounding term of a signed
division, numba's wraparound test) is 0 for the non-negative indices here; anything else whose
operands all step by 0 steps by 0, and is otherwise unknown (None).  A loaded value steps by 0
when its address does (every lane read the same element), and is unknown otherwise.

:func:`sectors`, :func:`lines` and :func:`useful_bytes` turn an access's width and step into the
32-byte sectors and 128-byte lines a warp touches and the bytes its lanes asked for;
:func:`parameter_values` lays a launch's arguments out as numba passes them, so that a known
parameter (a stride, a row length) gives known steps.
"""

from __future__ import annotations

import math
import re

_SPECIAL_STEP = {"%tid.x": 1.0, "%laneid": 1.0}  # every other special register is warp-uniform
_WARP = 32
_SECTOR = 32
_LINE = 128


def registers(operand: str) -> list:
    return re.findall(r"%[a-z]+\d*(?:\.[xyz])?", operand)


def immediate(operand: str):
    operand = operand.strip()
    try:
        return int(operand, 0)
    except ValueError:
        return None



def _operand(text: str, steps: dict, consts: dict, signs: set):
    """(lane step, constant value or None, is a sign) of one operand."""
    text = text.strip()
    value = immediate(text)
    if value is not None:
        return 0.0, value, False
    regs = registers(text)
    if not regs or text.startswith("["):
        return 0.0, None, False  # a symbol (a shared array's address) or a float literal
    reg = regs[0]
    if reg in _SPECIAL_STEP:
        return _SPECIAL_STEP[reg], None, False
    if "." in reg:  # %ctaid.x, %ntid.y ...: one value for the whole warp
        return 0.0, None, False
    return steps.get(reg, 0.0), consts.get(reg), reg in signs


def step(ins, steps: dict, consts: dict, signs: set):
    """The lane step of ``ins``'s result (None: unknown), its constant value (or None), and
    whether it is the sign of a value (``x >> 63``: 0 for the non-negative indices here)."""
    head = ins.head
    ops = [_operand(a, steps, consts, signs) for a in ins.args if not a.startswith("[")]
    ss = [o[0] for o in ops]
    known = [o[1] for o in ops]
    sign_in = [o[2] for o in ops]
    uniform = all(s == 0 for s in ss)
    if head in ("mov", "cvt", "cvta"):
        return (ss[0] if ss else 0.0), (known[0] if known else None), bool(sign_in and sign_in[0])
    if head == "ld":
        step = steps.get(ins.address, 0.0) if ins.address else 0.0
        return (0.0 if step == 0 else None), None, False
    if head in ("atom", "shfl", "vote", "activemask", "match", "setp", "set"):
        return None, None, False
    if head in ("add", "sub"):
        if None in ss[:2] or len(ss) < 2:
            return None, None, False
        value = None
        if known[0] is not None and known[1] is not None:
            value = known[0] - known[1] if head == "sub" else known[0] + known[1]
        return (ss[0] - ss[1] if head == "sub" else ss[0] + ss[1]), value, False
    if head in ("mul", "mad", "fma") and len(ss) >= 2:
        if ss[0] == 0 and ss[1] == 0:
            product = 0.0
        elif known[1] is not None and ss[0] is not None:
            product = ss[0] * known[1]
        elif known[0] is not None and ss[1] is not None:
            product = ss[1] * known[0]
        else:
            product = None
        if head in ("mad", "fma") and product is not None:
            product = None if len(ss) < 3 or ss[2] is None else product + ss[2]
        return product, None, False
    if head == "shl" and len(ss) == 2 and known[1] is not None:
        return (None if ss[0] is None else ss[0] * 2 ** known[1]), None, False
    if head == "shr" and len(ss) == 2 and known[1] is None and ss[1] == 0:
        # by a uniform amount not known here (a power-of-two row length): a row index
        return (None if ss[0] is None else 0.0), None, bool(sign_in[0])
    if head == "shr" and len(ss) == 2 and known[1] is not None:
        if known[1] in (31, 63):
            return 0.0, None, True
        if sign_in[0]:  # a sign shifted down (the rounding term of a signed division)
            return 0.0, None, True
        return (None if ss[0] is None else _shrunk(ss[0] / 2 ** known[1])), None, False
    if head in ("and", "or", "xor") and len(ss) == 2:
        if None in ss:
            return None, None, False
        if any(sign_in):  # x & sign, x | sign: 0, x for the non-negative indices here
            return (0.0 if head == "and" else max(ss, key=abs)), None, False
        if uniform:
            return 0.0, None, False
        moving, mask = (ss[0], known[1]) if ss[1] == 0 else (ss[1], known[0])
        if head == "and" and mask is not None:
            return _masked(moving, mask), None, False
        if head != "and" and 0.0 in ss:
            # x | row << 6 (the compiler's add of disjoint bits), i ^ 1 (the pair's partner):
            # the moving operand's step, near enough
            return moving, None, False
        return None, None, False
    if head in ("div", "rem") and len(ss) == 2:
        if ss[0] is None or ss[1] is None or ss[1] != 0:
            return None, None, False
        if ss[0] == 0:
            return 0.0, None, False
        divisor = known[1]
        if head == "div":  # by a parameter: taken to be wider than a warp (a row of pairs)
            return (_shrunk(ss[0] / divisor) if divisor else 0.0), None, False
        if divisor and divisor < _WARP * abs(ss[0]):
            return None, None, False
        return ss[0], None, False
    if head == "selp" and len(ss) >= 2:
        a, b = ss[0], ss[1]
        if a is None or b is None:
            return None, None, False
        if a == b or (b == 0 and known[1] == 0):
            return a, None, False
        if a == 0 and known[0] == 0:
            return b, None, False
        # one of two addressings, chosen per launch (a layout flag): the wider step is the
        # one whose accesses touch more lines, and a warp that took either stays within it
        return max(a, b, key=abs), None, False
    if head in ("min", "max") and len(ss) == 2:
        moving = [x for x in ss if x != 0]
        return (0.0 if not moving else moving[0] if len(moving) == 1 and moving[0] is not None
                else None), None, False
    if head in ("neg", "not") and ss:  # -x, and ~x = -x - 1
        return (None if ss[0] is None else -ss[0]), None, False
    return (0.0 if uniform else None), None, False


def _masked(moving: float, mask: int):
    """The step of ``x & mask`` for ``x`` stepping by ``moving``: a mask that keeps a run of
    bits from bit t to bit h keeps the step when the run spans a warp's values (``i & 31``,
    ``(8 i) & (2**35 - 8)``), gives one value across an aligned warp when it starts above them
    (``i & -32``: t = 5), and a small value that wraps inside a warp (``i & 1``) counts as
    steady: an address offset by it stays within a few elements (``x[i - (i & 1)]``)."""
    m = mask & (2 ** 64 - 1)
    if m == 0:
        return 0.0
    low = (m & -m).bit_length() - 1
    run = m >> low
    if run & (run + 1):
        return None  # not one run of bits
    high = low + run.bit_length()
    span = _WARP * abs(moving)
    if 2 ** low >= span:
        return 0.0
    if 2 ** high < span:
        return 0.0
    return moving


def _shrunk(value: float) -> float:
    """A step divided down: below one element per warp it is one value across the warp."""
    return 0.0 if abs(value) * _WARP <= 1 else value


def parameter_values(args) -> list:
    """The PTX parameters of a numba kernel launched with ``args``, in order: an array is
    ``meminfo, parent, nitems, itemsize, data, shape..., strides...`` (None for the pointers),
    a scalar its value (an int, a float, a bool as 0/1)."""
    out = []
    for a in args:
        shape = getattr(a, "shape", None)
        if shape is not None and not isinstance(a, (int, float)) and len(shape) > 0:
            itemsize = int(getattr(a, "itemsize", 0) or a.dtype.itemsize)
            strides = getattr(a, "strides", None) or _c_strides(shape, itemsize)
            size = 1
            for n in shape:
                size *= int(n)
            out += [None, None, size, itemsize, None, *map(int, shape), *map(int, strides)]
        elif isinstance(a, bool) or type(a).__name__ == "bool_":
            out.append(int(bool(a)))
        elif hasattr(a, "item"):
            out.append(a.item())
        else:
            out.append(a)
    return out


def _c_strides(shape, itemsize) -> list:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= int(n)
    return list(reversed(strides))


def _blocks_touched(width: int, step, unit: int) -> int:
    """Aligned ``unit``-byte blocks one warp's access touches: ``width`` bytes per lane, lanes
    ``step`` bytes apart (0: all lanes on one address; None: unknown, a block per lane)."""
    if step is None:
        return _WARP * max(1, math.ceil(width / unit))
    if step == 0:
        return max(1, math.ceil(width / unit))
    s = abs(step)
    if s >= unit:
        return _WARP * max(1, math.ceil(width / unit))
    return math.ceil(((_WARP - 1) * s + width) / unit)


def sectors(width: int, step) -> int:
    """32-byte sectors one warp's access touches (what the L2 serves)."""
    return _blocks_touched(width, step, _SECTOR)


def lines(width: int, step) -> int:
    """128-byte cache lines one warp's access touches: the L1's wavefronts.  The L1 serves about
    one line per cycle, so a warp whose lanes each land on a line of their own (a row per
    thread, ``q[t * d + i]``) takes 32 cycles where a coalesced access takes one."""
    return _blocks_touched(width, step, _LINE)


def line_use(width: int, step) -> float:
    """The share of the lines a warp's access touches that its lanes use: 1 for a coalesced
    read, 1/32 for a broadcast or a line per lane read 4 bytes at a time."""
    return min(1.0, useful_bytes(width, step) / (_LINE * lines(width, step)))


def useful_bytes(width: int, step) -> float:
    """Bytes a warp's lanes ask for: distinct bytes when their accesses overlap."""
    if step == 0:
        return float(width)
    if step is None or abs(step) >= width:
        return float(_WARP * width)
    return float((_WARP - 1) * abs(step) + width)


def access_bytes(opcode: str) -> int:
    """Bytes one lane moves: ``ld.global.v4.f32`` is 16, ``st.global.u8`` 1."""
    parts = opcode.split(".")
    lanes = next((int(p[1:]) for p in parts if p in ("v2", "v4", "v8")), 1)
    bits = next((int(m.group(1)) for p in reversed(parts)
                 for m in [re.fullmatch(r"[bfsu](\d+)", p)] if m), 32)
    return lanes * bits // 8


