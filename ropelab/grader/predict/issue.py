"""Issue cycles of one warp instruction, by the instruction classes of :mod:`.ptx`.

The figures are fixed from the machine's published rates (instructions a sub-partition of an
SM starts per cycle: 32 lanes of float32, a quarter of that in the special function unit).
Both the PTX analysis (which weighs a warp's heaviest path by them) and the launch features
(a warp's issue cycles) read them here, so neither depends on the other for a constant.
"""

from __future__ import annotations

# A 64-bit integer division is emitted with a 32-bit fast path (counted as div32) that small operands take; the
# 64-bit instruction itself then costs only its test.  Without a 32-bit twin it is a long
# subroutine.
ISSUE_CYCLES = {"alu": 1, "sfu": 8, "fdiv": 9, "div32": 20, "div64": 4, "f64": 4, "shfl": 2,
                "shared": 2, "global": 2, "bar": 4}
DIV64_ALONE = 70
ATOMIC_CYCLES = 8


def issue_cycles(counts: dict, where: str) -> float:
    """Issue cycles of one warp through the instructions ``where`` ("out", "path_out" or
    "loop")."""
    total = sum(ISSUE_CYCLES[c] * counts.get(f"{c}_{where}", 0) for c in ISSUE_CYCLES)
    alone = counts.get(f"div64_{where}", 0) - counts.get(f"div32_{where}", 0)
    if alone > 0:
        total += (DIV64_ALONE - ISSUE_CYCLES["div64"]) * alone
    return float(total)
