"""How far a float32 kernel may stray from the float64 reference, and why.

The error budget of one rotated element, for inputs with ``max|x| = A`` and angles up to ``M``
radians:

* float32 rounding of the inputs, products and sums: a few ulps of ``A``  -> ``8 * 2**-24 * A``.
* the angle itself is a float32 product ``position * inv_freq``, and ``inv_freq`` comes from a
  float32 ``pow``: its absolute error grows with the angle, about ``4 * 2**-24 * M`` radians,
  and an angle error ``d`` moves the output by up to ``d * A * sqrt(2)``.
* with fast-math, ``pow`` becomes ``lg2.approx`` + ``ex2.approx`` (relative error ~2**-22) and
  ``sin``/``cos`` become ``sin.approx``/``cos.approx``, whose absolute error grows about
  linearly with the angle: at most 1.35e-7 per radian of the angle's upper bound on the H200
  (``data/sincos_error``: 1.1e-3 below 1e4 rad, 1.0e-2 below 1e5 rad, 0.13 below 1e6 rad).  We
  budget twice that, ``3e-7 * M``.

These are bounds for tests, not measurements: the measured errors live in ``data/``.
"""

from __future__ import annotations

import math

import numpy as np

F32_EPS = 2.0**-24


def max_angle(positions, freqs, attention_factor: float = 1.0) -> float:
    pmax = float(np.max(positions)) if np.size(positions) else 0.0
    return pmax * float(np.max(freqs)) if np.size(freqs) else 0.0


def rope_atol(max_abs_x: float, angle: float, *, fastmath: bool, attention_factor: float = 1.0) -> float:
    """Absolute tolerance for one rotated element (see the module docstring)."""
    per_rad = 4 * F32_EPS + (3e-7 if fastmath else 0.0)
    scale = max(max_abs_x, 1e-30) * max(abs(attention_factor), 1.0)
    return scale * (8 * F32_EPS + math.sqrt(2) * per_rad * angle + (2e-6 if fastmath else 0.0))
