"""PTX and SASS instruction counts of the fused kernel's bfloat16 builds, and of the pack/unpack.

No GPU needed: the kernels are compiled for sm_90 with ``cuda.compile_ptx`` (explicit cc, no
driver) and the PTX is linked with nvJitLink and disassembled with nvdisasm
(:func:`ropelab.measure.census.ptx_to_sass`).  Run with the simulator off::

    NUMBA_ENABLE_CUDASIM=0 ROPELAB_TARGET=gpu ROPELAB_QUIET=1 python scripts/bf16_fused_census.py

It prints one line per fused bfloat16 kernel the census compiles (shipped fast-math build) and
one per tiny conversion kernel (a word unpacked to two float32, scaled, packed back), so a
change to :mod:`ropelab.bf16` shows up as a before/after difference.  Counts, not times: only
a GPU run says whether fewer instructions made the kernel faster.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

# A script's sys.path starts at scripts/, not the working directory: put this checkout's
# ropelab first, not whichever one the environment has installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numba import cuda, float32, types

from ropelab import bf16
from ropelab.measure.census import CC, count_ptx, ptx_to_sass, targets

_SASS_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")
WORDS = types.Array(types.uint32, 1, "C")


def scale_words(words, out):
    """One word in, one word out: unpack both halves, scale, pack."""
    i = cuda.grid(1)
    if i < words.size:
        w = words[i]
        out[i] = bf16.pack2(bf16.unpack_low(w) * float32(1.5), bf16.unpack_high(w) * float32(1.5))


def unpack_only(words, out):
    """Unpack and add the halves: the unpack cost alone (no rounding)."""
    i = cuda.grid(1)
    if i < words.size:
        w = words[i]
        out[i] = cuda.libdevice.float_as_int(bf16.unpack_low(w) + bf16.unpack_high(w))


def _line(name, ptx):
    p = count_ptx(ptx)
    sass = ptx_to_sass(ptx)
    ops = collections.Counter(m.group(1) for m in _SASS_OP.finditer(sass))
    ops.pop("NOP", None)
    cvt = sum(n for op, n in ops.items() if op.startswith(("F2F", "F2FP")))
    has_cvt = "cvt.rn.bf16x2.f32" in ptx
    return (f"{name:<44} PTX {p['instructions']:>5}  f64 {p['f64']}  SASS {sum(ops.values()):>5}"
            f"  F2FP {cvt:>3}  cvt.rn.bf16x2 {'yes' if has_cvt else 'no'}")


def main() -> None:
    for t in targets():
        if t["registry"] != "FUSED" or "bfloat16" not in t["kernel"]:
            continue
        ptx, _ = cuda.compile_ptx(t["fn"], t["signature"], cc=CC, fastmath=True)
        print(_line(t["kernel"], ptx))
    for fn in (scale_words, unpack_only):
        ptx, _ = cuda.compile_ptx(fn, (WORDS, WORDS), cc=CC, fastmath=True)
        print(_line(fn.__name__, ptx))


if __name__ == "__main__":
    main()
