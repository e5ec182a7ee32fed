"""A correctly rounded ``cuda.fma`` for the Numba CUDA simulator.

On a GPU, ``cuda.fma(a, b, c)`` is one instruction (``fma.rn.f32`` or ``fma.rn.f64``): the exact
``a * b + c`` rounded once.  The simulator's ``FakeCUDAModule.fma`` is ``a * b + c`` on NumPy
scalars, which rounds twice.  Code that uses an fma to recover a product's rounding error,
``fma(a, b, -(a * b))``, gets 0 there instead of the error: ``freq_table``'s ``reduce_angle``
loses its correction term and the simulator computes something the GPU does not.
:func:`install` replaces it with :func:`fma`.

float32 operands (what numba's ``float32`` signature of ``cuda.fma`` takes):

1. ``p = a * b`` in float64 is exact: two 24-bit significands make at most 48 bits, and the
   exponents of float32 numbers cannot overflow or underflow float64.
2. ``s = p + c`` in float64, and ``e = (p + c) - s`` exactly, with Knuth's TwoSum (six float64
   operations, exact whenever nothing overflows, which float32 inputs cannot make happen).
3. ``e == 0``: ``s`` is the exact result and one cast to float32 rounds it once.
4. ``e != 0``: round the exact ``p + c`` *to odd* at float64's 53 bits: of ``s`` and its
   float64 neighbour on ``e``'s side, which bracket the exact value, take the one whose last
   significand bit is 1.  The cast to float32 then rounds correctly: rounding to odd at
   ``p + 2`` bits or more, then to nearest at ``p`` bits, equals rounding the exact value to
   nearest at ``p`` bits (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
   proved algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008); here
   53 >= 24 + 2.

Why not simply ``float32(float64(a) * b + c)``: that rounds twice to nearest.  When the float64
sum lands exactly on the midpoint between two float32 numbers while the exact sum lies just
off it, the float32 tie rule (to even) can pick the wrong neighbour.  An example the tests use:
``a = -2**-24 * (1 + 2**-15)``, ``b = 1 - 2**-15``, ``c = 1 + 2**-23``; the exact result is
``1 + 2**-24 + 2**-54``, which must round up to ``1 + 2**-23``; float64 drops the ``2**-54`` and
the tie then goes down to ``1``.

float64 operands (numba's other signature; it is also what mixed or Python-float operands
convert to): ``math.fma`` where Python has it (3.13+), else exact rational arithmetic with
:class:`fractions.Fraction`, whose conversion to float is correctly rounded (CPython divides
integers with correct rounding).

Special values (inf, nan) take the plain ``a * b + c`` path, which IEEE arithmetic already
gets right for them.
"""

from __future__ import annotations

import math
import struct
import threading
from fractions import Fraction

import numpy as np

from ..target import SIMULATED

_F32_KINDS = (np.float32, np.float16)  # numba converts float16 to float32 for cuda.fma
# float64 values from here up round to float32 infinity (the midpoint between float32's largest
# number and 2**128 rounds to even, which is 2**128).
_F32_OVERFLOW = 2.0**128 - 2.0**103
_install_lock = threading.Lock()
_original = None  # the simulator's own fma, kept so a test can compare


def _last_bit(x: float) -> int:
    """The lowest significand bit of a float64."""
    return struct.unpack("<q", struct.pack("<d", x))[0] & 1


def _round_to_odd(s: float, e: float) -> float:
    """The exact ``s + e`` (``s`` its float64 rounding to nearest, ``e != 0``) rounded to odd."""
    if _last_bit(s):
        return s
    return math.nextafter(s, math.inf if e > 0 else -math.inf)


def _to_f32(x: float) -> np.float32:
    """Round a float64 to float32 (to nearest even), overflowing to infinity without a warning."""
    if abs(x) >= _F32_OVERFLOW:
        return np.float32(math.copysign(math.inf, x))
    return np.float32(x)


def fma32(a, b, c) -> np.float32:
    """``a * b + c`` rounded once to float32 (operands are float32 values)."""
    a, b, c = float(a), float(b), float(c)
    p = a * b  # exact (see the module docstring)
    s = p + c
    if not math.isfinite(s):
        return _to_f32(s)
    # TwoSum: the exact rounding error of s = fl(p + c).
    bb = s - p
    e = (p - (s - bb)) + (c - bb)
    if e == 0.0:
        return _to_f32(s)
    return _to_f32(_round_to_odd(s, e))


def _fma64_exact(a: float, b: float, c: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        # The sign of an exact zero: a*b + c in floating point gives IEEE's rule here (both
        # -0 gives -0, otherwise +0), and a*b is exact when it cancels a nonzero c.
        return a * b + c
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


_fma64 = getattr(math, "fma", _fma64_exact)


def fma64(a, b, c) -> np.float64:
    """``a * b + c`` rounded once to float64."""
    return np.float64(_fma64(float(a), float(b), float(c)))


def fma(self, a, b, c):
    """``cuda.fma`` under the simulator: float32 when all three operands are, else float64.

    ``self`` is the simulator's fake ``cuda`` module (this becomes one of its methods).
    """
    if isinstance(a, _F32_KINDS) and isinstance(b, _F32_KINDS) and isinstance(c, _F32_KINDS):
        return fma32(a, b, c)
    return fma64(a, b, c)


def install() -> bool:
    """Make the simulator's ``cuda.fma`` the correctly rounded :func:`fma`.

    Idempotent; does nothing on a GPU (returns False there).  Unlike the warp shuffles this
    replaces a function the simulator has: its ``a * b + c`` is known to round twice.
    """
    global _original
    if not SIMULATED:
        return False
    with _install_lock:
        from numba.cuda.simulator.kernelapi import FakeCUDAModule

        if FakeCUDAModule.fma is not fma:
            _original = FakeCUDAModule.fma
            FakeCUDAModule.fma = fma
    return True
