"""How the census counts: pure functions of PTX or SASS text, tested on hand-written input.

Counting rules (PTX, one compiled kernel at a time; predicated instructions count once):

``instructions``
    Every PTX instruction in the kernel body: lines that are not directives (``.reg``,
    ``.loc`` ...), labels, braces or comments.  ``ld.param`` counts too.
``int_divrem``
    Integer ``div.*``/``rem.*`` instructions (``.s32 .u32 .s64 .u64``).  None of them is one
    machine instruction: a 32-bit one becomes a ~20-instruction sequence in SASS, a 64-bit one
    a call to a longer subroutine.  LLVM guards each 64-bit division with a test "do both
    operands fit in 32 bits?" and emits both paths, so one Python ``//`` on int64 values
    shows up as one ``div.s64`` plus one ``div.u32``.  ``int_divrem_ops`` breaks the count down
    by opcode.
``fdiv_approx``
    ``div.approx`` float divisions (what fast-math makes of ``/``: a reciprocal and a multiply).
``sfu``
    Special-function-unit approximations by name: ``sin``, ``cos``, ``ex2``, ``lg2``, ``rsqrt``,
    ``rcp``, ``sqrt``, ``tanh`` (``*.approx*`` opcodes).  ``math.pow`` under fast-math is one
    ``lg2`` plus one ``ex2``.
``f64``
    Instructions with a ``.f64`` type anywhere in the opcode (``cvt.f64.f32``, ``mul.f64``,
    ``fma.rn.f64`` ...).  ``f64_note`` explains a nonzero count when the fast-math build of the
    same kernel has none: the float64 then comes from libdevice's precise ``sinf``/``cosf``,
    whose slow path (Payne-Hanek range reduction for large angles) is linked in, not from the
    kernel's own arithmetic.
``ld_global`` / ``st_global``
    Global loads and stores by access width in bits (``ld.global.v4.f32`` is 128, ``.nc``
    loads included), as ``{"32": n, "128": m}``.
``ld_local`` / ``st_local`` / ``local_bytes``
    Local-memory (per-thread stack) traffic and the size of the ``__local_depot`` frame.
``calls``
    ``call`` instructions (numba inlines libdevice, so normally zero).
``shfl_ops``
    Warp shuffles by mode, ``{"bfly": n, "idx": m}`` (``shfl.sync.bfly.b32`` ...).
``cvt_packed``
    Conversions that pack two values in one instruction, by packed type
    (``cvt.rn.bf16x2.f32`` counts as ``{"bf16x2": 1}``).
``atomics``
    Atomic read-modify-writes (``atom.*``, and ``red.*``, the ones whose old value is not
    returned) by state space, ``{"global": n, "shared": m}``.

With ``sass=True`` (:mod:`.sass`) the PTX is linked to a cubin through nvJitLink and disassembled with
``nvdisasm`` (pip package ``nvidia-cuda-nvdisasm``); the SASS counts (``sass_*`` fields) are
instructions without NOPs, ``MUFU`` ops by function, ``LDG``/``STG`` by width, and double
precision ops (``D*`` opcodes and ``.F64`` conversions).

The digest of this module's code is part of every census cache key
(:func:`ropelab.measure.census.engine.cache_key`): changing a rule here invalidates every cached
count, with no version number to remember.
"""

from __future__ import annotations

import re

_SFU = ("sin", "cos", "ex2", "lg2", "rsqrt", "rcp", "sqrt", "tanh")
_TYPE_BITS = {"8": 8, "16": 16, "32": 32, "64": 64, "128": 128}


def _instruction_lines(ptx: str):
    """Yield the opcode (e.g. ``ld.global.nc.f32``) of every instruction in ``ptx``."""
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line or line[0] in ".{}()" or line.endswith(":") or line.endswith(","):
            continue
        if line.startswith("@"):  # predicate guard: "@%p1 bra ..." / "@!%p2 ..."
            parts = line.split(None, 1)
            if len(parts) < 2:
                continue
            line = parts[1]
        opcode = line.split(None, 1)[0].rstrip(";")
        if not re.match(r"^[a-z]", opcode):
            continue
        yield opcode


def _access_bits(opcode: str) -> int:
    parts = opcode.split(".")
    lanes = 1
    for p in parts:
        if p in ("v2", "v4", "v8"):
            lanes = int(p[1:])
    bits = 0
    for p in reversed(parts):
        m = re.fullmatch(r"[bfsu](\d+)", p)
        if m and m.group(1) in _TYPE_BITS:
            bits = int(m.group(1))
            break
    return lanes * bits


def count_ptx(ptx: str) -> dict:
    """Count instructions in one kernel's PTX by the rules in the module docstring."""
    counts = {
        "instructions": 0, "int_divrem": 0, "int_divrem_ops": {}, "fdiv_approx": 0,
        "sfu": {}, "f64": 0, "ld_global": {}, "st_global": {}, "ld_local": 0, "st_local": 0,
        "local_bytes": 0, "calls": 0, "shfl_ops": {}, "cvt_packed": {}, "atomics": {},
    }
    for opcode in _instruction_lines(ptx):
        counts["instructions"] += 1
        parts = opcode.split(".")
        head = parts[0]
        if head in ("div", "rem") and any(p in ("s32", "u32", "s64", "u64", "s16", "u16")
                                          for p in parts[1:]):
            counts["int_divrem"] += 1
            key = f"{head}.{parts[-1]}"
            counts["int_divrem_ops"][key] = counts["int_divrem_ops"].get(key, 0) + 1
        elif head == "div" and "approx" in parts:
            counts["fdiv_approx"] += 1
        if "approx" in parts and head in _SFU:
            counts["sfu"][head] = counts["sfu"].get(head, 0) + 1
        if "f64" in parts:
            counts["f64"] += 1
        if head in ("ld", "st") and len(parts) > 1:
            space = parts[1]
            if space == "global":
                table = counts["ld_global" if head == "ld" else "st_global"]
                key = str(_access_bits(opcode))
                table[key] = table.get(key, 0) + 1
            elif space == "local":
                counts["ld_local" if head == "ld" else "st_local"] += 1
        if head == "call":
            counts["calls"] += 1
        if head == "shfl" and len(parts) > 2:  # shfl.sync.bfly.b32: keyed by mode
            mode = parts[2]
            counts["shfl_ops"][mode] = counts["shfl_ops"].get(mode, 0) + 1
        if head in ("atom", "red") and len(parts) > 1:  # atom.global.add.f32: by state space
            space = parts[1] if parts[1] in ("global", "shared", "shared::cta") else "generic"
            counts["atomics"][space] = counts["atomics"].get(space, 0) + 1
        if head == "cvt":  # cvt.rn.bf16x2.f32: two values packed by one instruction
            packed = next((p for p in parts[1:] if p.endswith("x2")), None)
            if packed:
                counts["cvt_packed"][packed] = counts["cvt_packed"].get(packed, 0) + 1
    for m in re.finditer(r"\.local\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", ptx):
        counts["local_bytes"] += int(m.group(1))
    return counts


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


def count_sass(sass: str) -> dict:
    """Counts from ``nvdisasm -c`` output: instructions, MUFU ops, LDG/STG widths, double ops."""
    counts = {"sass_instructions": 0, "sass_mufu": {}, "sass_ldg": {}, "sass_stg": {},
              "sass_f64": 0, "sass_calls": 0}
    for m in _SASS_LINE.finditer(sass):
        op = m.group(1)
        if op == "NOP":
            continue
        counts["sass_instructions"] += 1
        parts = op.split(".")
        if parts[0] == "MUFU" and len(parts) > 1:
            counts["sass_mufu"][parts[1]] = counts["sass_mufu"].get(parts[1], 0) + 1
        elif parts[0] in ("LDG", "STG"):
            width = next((p for p in parts[1:] if p in ("64", "128", "U8", "S8", "U16", "S16")),
                         "32")
            table = counts["sass_ldg" if parts[0] == "LDG" else "sass_stg"]
            table[width] = table.get(width, 0) + 1
        if parts[0] in ("DADD", "DMUL", "DFMA", "DSETP", "DMNMX") or "F64" in parts:
            counts["sass_f64"] += 1
        if parts[0] == "CALL":
            counts["sass_calls"] += 1
    return counts


def count_extras(ptx_text: str) -> dict:
    """Counts the exercises grade on, beyond :func:`count_ptx`.

    ``shfl``
        warp shuffles (``shfl.sync.*``).
    ``loads_after_store``
        global loads that come after the first global store in the PTX text.  A store to
        ``out`` may change ``x`` (the two may be the same buffer), so the compiler cannot move
        a later load above it: each such load waits for the stores before it.
    ``sincos``
        ``sin.approx`` plus ``cos.approx`` instructions.
    ``pow_in_loop``
        ``ex2.approx`` instructions (the second half of a fast-math ``pow``) inside a loop:
        between a label and a later branch back to it.  The first half, ``lg2`` of the base,
        is loop-invariant, so the compiler moves it out of the loop; ``ex2`` of the varying
        exponent stays.
    """
    ops, labels, back_edges = [], {}, []
    for raw in ptx_text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if re.fullmatch(r"[$\w]+:", line):
            labels[line[:-1]] = len(ops)
            continue
        if not line or line[0] in ".{}()":
            continue
        if line.startswith("@"):  # a predicated instruction: "@%p1 bra $L__BB0_2;"
            line = line.split(None, 1)[1] if " " in line else ""
        opcode = line.split(None, 1)[0].rstrip(";") if line else ""
        if not re.match(r"^[a-z]", opcode):
            continue
        if opcode.split(".")[0] == "bra":
            target = line.split()[-1].rstrip(";")
            if target in labels:  # defined above: a backward branch closes a loop
                back_edges.append((labels[target], len(ops)))
        ops.append(opcode)
    in_loop = set()
    for start, end in back_edges:
        in_loop.update(range(start, end + 1))
    counts = {"shfl": 0, "loads_after_store": 0, "sincos": 0, "pow_in_loop": 0}
    stored = False
    for k, opcode in enumerate(ops):
        parts = opcode.split(".")
        head, space = parts[0], parts[1] if len(parts) > 1 else ""
        if head == "shfl":
            counts["shfl"] += 1
        elif head == "st" and space == "global":
            stored = True
        elif head == "ld" and space == "global" and stored:
            counts["loads_after_store"] += 1
        elif head in ("sin", "cos") and "approx" in parts:
            counts["sincos"] += 1
        elif head == "ex2" and "approx" in parts and k in in_loop:
            counts["pow_in_loop"] += 1
    return counts
