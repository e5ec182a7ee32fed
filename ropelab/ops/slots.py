"""What an op hands the engine: the description of one validated call.

An op (:mod:`.rope`, :mod:`.rows`, :mod:`.qk`, :mod:`.fused`, :mod:`.fused_backward`) checks
its arguments and plans its kernels.  What it returns is a :class:`Call`: the plans, and for
each array a :class:`Slot` that says what the kernels do with it, its *role*:

* ``READ`` — read only (a weight, ``grad``);
* ``WRITE`` — read and written in place (``q``, ``k``, ``qkv``);
* ``OUT`` — written; the engine makes it like its ``source`` slot when the caller passed none,
  and ``out=source`` on an identical layout is the in-place call;
* ``POSITIONS`` — the token positions: the position policy applies, and ``0 .. tokens-1`` stands
  in when the caller passed none;
* ``TABLE`` — a read-only table the caller passes (``cos_sin_cache``);
* ``SCRATCH`` — a buffer the engine makes on every call (partial sums, a result): float32, or
  with ``source_dtype`` the dtype of its ``source`` slot (weight gradients in the weights'
  dtype).

Everything else is derived from the roles, once, the same way for NumPy and device arrays:
which pairs of arrays must not share a byte (:func:`overlap_rules`: every written array against
every other one), which overlaps are fine and the one message a refusal gives
(:func:`overlap_message`), the kernel's view of each array (:func:`kernel_views`, from the
plans' caller dtypes) and its element count (:func:`kernel_elements`).  :mod:`.call` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validate import fail
from .arrays import ArrayInfo

READ, WRITE, OUT, POSITIONS, TABLE, SCRATCH = ("read", "write", "out", "positions", "table",
                                               "scratch")
WRITTEN = frozenset({WRITE, OUT})  # the roles whose memory the kernels change
INT32 = np.dtype(np.int32)
FLOAT32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Slot:
    """One array of a call, in the order of the op's fast-path array tuple (the caller's arrays
    first, then what the engine makes: outputs the caller does not pass, ``SCRATCH``).

    ``obj`` and ``info`` are what the caller passed (None: not passed).  ``source`` (``OUT``):
    the slot it is made like.  ``rows`` (arrays of rows): ``(row stride, row width)`` in bytes,
    for the column rule of :func:`columns_disjoint`.  ``region`` (``WRITE``): the part the kernels
    write, the only part the host route copies back (default: all).  ``size``, ``zero``
    (``SCRATCH``): float32 elements, zeroed before the launches.  ``within`` (``SCRATCH``):
    ``(slot, offset)``: this buffer is ``size`` elements of another one from ``offset`` on (a
    kernel array; an op's result slices the whole buffer, which is one allocation).
    ``align``: the byte alignment the plans need of a buffer the engine makes.
    ``source_dtype`` (``SCRATCH``): the buffer is ``size`` elements of slot ``source``'s dtype,
    from its library, instead of float32 from slot 0's.
    """

    name: str
    role: str
    obj: object = None
    info: ArrayInfo | None = None
    source: int | None = None
    rows: tuple[int, int] | None = None
    region: object = None
    size: int = 0
    zero: bool = False
    within: tuple[int, int] | None = None
    align: int = 0
    source_dtype: bool = False


@dataclass(frozen=True)
class Call:
    """A validated call: its slots, its launches (each plan with its kernel arrays as slot
    indices, in kernel order), ``tokens``, ``result``: the slot whose value the op returns, or
    ``result(values) -> what the op returns`` (``values``: one object per slot, the caller's or
    the one the engine made), ``callers`` (the slots the
    caller passes come first, then what only the engine makes), the ``stream`` argument, and
    the position policy's bound: ``limit`` (None: any int32) and why (``reason``), with the
    opt-in synchronous check of device positions (``check_positions``)."""

    slots: tuple
    launches: tuple
    tokens: int
    result: object  # an int (a slot) or a function of the values
    callers: int  # how many slots the caller passes (the op's fast-path array tuple)
    stream: object = None
    limit: int | None = None
    reason: str = ""
    check_positions: bool = False

    def returned(self, values):
        """What the op returns, from one value per slot."""
        return values[self.result] if isinstance(self.result, int) else self.result(values)

    def index(self, role: str) -> int | None:
        """The first slot with ``role``, or None."""
        return next((i for i, s in enumerate(self.slots) if s.role == role), None)


def check_out(out_info: ArrayInfo, source_info: ArrayInfo, source: str = "x") -> None:
    """An ``OUT`` array the caller passes: its source's shape and dtype, C-contiguous, on the
    same side (host or device) as its source (named ``source`` in the messages)."""
    if out_info.shape != source_info.shape:
        fail(f"out must have the shape of {source} {source_info.shape}, got {out_info.shape}")
    if out_info.dtype != source_info.dtype:
        fail(f"out must have the dtype of {source} ({source_info.dtype}), got {out_info.dtype}")
    if out_info.size and not out_info.c_contiguous:
        fail("out must be C-contiguous")
    if out_info.on_device != source_info.on_device:
        fail(f"{source} and out must both be host (NumPy) arrays or both be device arrays")


def kernel_views(call: Call) -> list:
    """The dtype each slot is handed to the kernels as (from the plans' caller dtypes: bfloat16
    qkv as uint32 words, say); None for a slot no kernel reads."""
    views = [None] * len(call.slots)
    for plan, indices in call.launches:
        for dtype, slot in zip(plan.caller, indices):
            views[slot] = np.dtype(dtype)
    return views


def kernel_elements(call: Call, slot: Slot, view) -> int:
    """How many elements of ``view`` the kernels see: positions one per token, a buffer the
    engine makes its size, any other array its byte range (gaps between rows included)."""
    if slot.role == POSITIONS:
        return call.tokens
    if slot.role == SCRATCH:
        return slot.size
    if slot.info is None:  # an OUT the engine makes: contiguous, like its source
        source = call.slots[slot.source].info
        return source.size * source.dtype.itemsize // view.itemsize
    low, high = slot.info.byte_range()
    return (high - low) // view.itemsize


# ---- overlaps ----------------------------------------------------------------------------------

def columns_disjoint(a_ptr: int, a_row: int, a_width: int, b_ptr: int, b_row: int,
                     b_width: int) -> bool:
    """Whether two arrays of rows (byte addresses, row strides and widths in bytes) whose spans
    interleave touch no common byte: q and k as column slices of one qkv.  They must share the
    row stride, and b's columns, taken relative to a's row start, must fall in the gap after
    a's columns."""
    if a_row != b_row:
        return False
    offset = (b_ptr - a_ptr) % a_row
    return offset >= a_width and offset + b_width <= a_row


def overlap_message(written: Slot, other: Slot, in_place_hint: bool = False) -> str:
    """The one refusal of two arrays that share bytes (``in_place_hint``: ``other`` is what
    ``written`` may be for an in-place call)."""
    verb = "writes" if other.role in WRITTEN else "reads"
    hint = ""
    if in_place_hint:
        hint = f"; pass {written.name}={other.name} for in place, or a separate array"
    elif written.rows is not None and other.rows is not None:
        hint = " (column slices of one buffer are fine where their columns do not interleave)"
    return (f"{written.name} overlaps {other.name}: the kernel writes {written.name} while it "
            f"{verb} {other.name}{hint}")


def _allowed(call: Call, w: int, r: int):
    """``(written pointer, other pointer) -> True`` where two overlapping byte ranges are fine,
    or None where they never are."""
    sw, sr = call.slots[w], call.slots[r]
    in_place = (sw.role == OUT and sw.source == r and sr.role not in WRITTEN
                and (sw.info.shape, sw.info.strides) == (sr.info.shape, sr.info.strides))
    columns = sw.rows is not None and sr.rows is not None
    if columns:
        (w_row, w_width), (r_row, r_width) = sw.rows, sr.rows

        def disjoint(pw, pr):
            return (in_place and pw == pr) or columns_disjoint(pw, w_row, w_width, pr, r_row,
                                                               r_width)
        return disjoint
    return _same_start if in_place else None


def _same_start(written: int, other: int) -> bool:
    return written == other  # in place on an identical layout


def overlap_rules(call: Call, present) -> tuple:
    """``(written, other, written extent, other extent, allowed, message)`` for every pair of
    arrays the caller passed (``present``: slot indices) that live in one address space, hold
    bytes, and of which one is written.  A buffer the engine makes overlaps nothing."""
    present = [i for i in present if call.slots[i].info is not None]
    extents = {}
    for i in present:
        low, high = call.slots[i].info.byte_range()
        extents[i] = high - low
    rules = []
    for w in present:
        if call.slots[w].role not in WRITTEN:
            continue
        for r in present:
            sw, sr = call.slots[w], call.slots[r]
            if r == w or (sr.role in WRITTEN and r < w) or not extents[w] or not extents[r]:
                continue  # two written arrays: one rule for the pair
            if sw.info.on_device != sr.info.on_device:
                continue  # host and device addresses never collide
            rules.append((w, r, extents[w], extents[r], _allowed(call, w, r),
                          overlap_message(sw, sr, sw.role == OUT and sw.source == r)))
    return tuple(rules)


def refuse_overlaps(rules, starts) -> None:
    """Raise the rule's message where two arrays share a byte (``starts``: each slot's lowest
    byte address).  The same function serves the validating path and every cached call."""
    for w, r, ext_w, ext_r, allowed, message in rules:
        pw, pr = starts[w], starts[r]
        if pw < pr + ext_r and pr < pw + ext_w and (allowed is None or not allowed(pw, pr)):
            fail(message)
