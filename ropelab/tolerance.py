"""How far a float32 kernel may stray from the float64 reference, and why: one error model per mode.

A kernel's accuracy depends on how it gets cos and sin, so each way has its own model
(:class:`Mode`), and :func:`rope_atol` is the one entry point: ``rope_atol(max_abs_x, angle,
mode=...)``.  :func:`mode_for` says which mode a call of ``ropelab.rope`` is in.

Notation: ``A = max|x|``; ``a`` the attention factor that scales cos and sin (1 without YaRN);
the budget is relative to ``S = A * max(a, 1)``; ``M`` the largest angle in radians (largest
position times largest frequency, :func:`max_angle`); ``u = 2**-24``, the float32 unit roundoff
(one rounding to nearest changes a value by at most ``u`` times its magnitude).  For one pair
``(x0, x1)``, ``|x0| , |x1| <= A``: an error ``d`` in the angle moves an output by at most
``sqrt(2) A d``, and errors of at most ``e`` in cos and sin move it by at most ``2 A e``
(Cauchy-Schwarz, twice).

``8 u`` (every mode): the rotation's own float32 arithmetic.  Two products and a difference
give at most ``2 sqrt(2) u A a``; scaling cos and sin by the float32 attention factor (its
rounding, then the product's) at most ``2 sqrt(2) u A a`` more; the rest covers the rounding of
sin/cos values themselves (``sqrt(2) u A a`` for a correctly rounded table) and slack.

``Mode.PRECISE`` (``fastmath=False``: libdevice ``sinf``/``cosf``/``powf``)
    ``S * (8 u + sqrt(2) * 4 u * M)``.  The angle is a float32 product ``position * inv_freq``
    whose ``inv_freq`` is a float32 (a rounded table value, or a float32 ``pow`` of a rounded
    exponent): the product's rounding and the frequency's few-ulp error grow with the angle,
    ``4 u M`` radians in all.
``Mode.FAST`` (``fastmath=True``, what ships)
    ``S * (8 u + sqrt(2) * (4 u + 3e-7) * M + 2e-6)``.  Fast-math turns ``pow`` into
    ``lg2.approx`` + ``ex2.approx`` (relative error about ``2**-22``) and sin/cos into
    ``sin.approx``/``cos.approx``, whose absolute error grows about linearly with the angle: at
    most 1.35e-7 per radian of the angle's upper bound on the H200 (``data/sincos_error``:
    1.1e-3 below 1e4 rad, 1.0e-2 below 1e5 rad), budgeted twice, ``3e-7 * M``; ``2e-6`` covers
    small angles (3.4e-7 measured below 1 rad).
``Mode.CACHE`` (``freq_table`` with ``cache=True``)
    ``S * 8 u``, whatever the position.  cos and sin are computed in float64 on the host and
    rounded once to float32, so each is off by at most ``u``; the kernel forms no angle at all.
    Scaled and rounded again (``3 u`` in all, ``3 sqrt(2) u A a`` on the output) and rotated
    (``2 sqrt(2) u A a``): ``7.1 u`` in all, within ``8 u``.  Holds for every position below
    the cache's ``max_positions`` (the API refuses the others).
``Mode.REDUCED`` (``freq_table`` with ``reduce_angle=True``)
    ``S * (8 u + sqrt(2) * e_angle + 2 * e_sincos)``, for ``|position|`` up to
    :data:`REDUCED_MAX_POSITION` ``= 2**24`` (``freq_table.REDUCE_LIMIT``): every such integer is
    exact in float32.  The kernel (``freq_table.reduced_angle``) works in turns: the frequency in turns
    ``T = f / (2 pi)`` is a float32 head ``h`` plus tail ``l``; with ``p`` the position,
    ``t = p h`` rounded, ``err = fma(p, h, -t)`` (exact), ``frac = (t - trunc(t)) + (err + p l)``,
    angle ``= frac * float32(2 pi)``.  With ``N = M / (2 pi)`` the largest number of turns:

    * turns lost before the final sum: ``h + l`` misses ``T`` by ``u**2 T`` (and float64's
      ``2**-52 T``), ``p l`` rounds by ``u**2 N``, ``err + p l`` (at most ``2 u N``) by
      ``2 u**2 N``: under ``5 * 2**-48 * N`` turns in all;
    * ``|frac| <= F = 1 + 2**-23 N``; the final sum rounds by ``u F`` turns, and
      ``float32(2 pi)`` and the product by ``2 u F`` turns more;
    * so ``e_angle = 2 pi (5 * 2**-48 N + 3 u F)``: 1.1e-6 rad at 131072 and 1.7e-6 rad at
      ``2**24`` (frequency 1), independent of the position but for that ``F``;
    * ``e_sincos``: sin/cos of an angle below ``2 pi F`` (about 8.3 rad), where even
      ``sin.approx`` is accurate: 1.2e-6 at most between 1 and 10 rad on the H200
      (``data/sincos_error``), budgeted twice, 2.5e-6 (or the fast rule ``3e-7 * 2 pi F`` if
      larger).  The same budget serves both builds (libdevice's error there is ~1e-7).

    Beyond ``2**24`` the position itself rounds to float32 (a whole radian off at ``2**24 + 1``
    for a frequency of 1): no budget exists there, and :func:`rope_atol` refuses one (the API
    refuses such positions for this mode before launch).

The models are bounds for tests, not measurements.  ``tests/test_tolerance.py`` checks every
row of the recorded H200 precision run (``data/precision``) against its mode's budget, and that
the budget is not so loose that an error ten times it would pass unnoticed.
"""

from __future__ import annotations

import enum
import math

import numpy as np

F32_EPS = 2.0**-24  # u in the docstring
ROTATION = 8 * F32_EPS  # the rotation's own rounding, every mode
# Fast-math sin/cos: absolute error per radian of the angle bound (twice the H200's measured
# 1.35e-7), and the small-angle floor.
FAST_SINCOS_PER_RAD = 3e-7
FAST_SINCOS_FLOOR = 2e-6
# sin.approx below 10 rad: twice the H200's 1.22e-6 (data/sincos_error, 1 .. 10 rad).
SINCOS_BELOW_10_RAD = 2.5e-6
# float32(position) is exact up to 2**24; reduce_angle's budget is derived up to here (the
# same number as ropelab.kernels.freq_table.REDUCE_LIMIT, which the API enforces).
REDUCED_MAX_POSITION = 2**24


class Mode(enum.Enum):
    """How a kernel obtains cos and sin; each has its own error model (see the module docstring)."""

    FAST = "fastmath"
    PRECISE = "precise"
    CACHE = "cache"
    REDUCED = "reduce_angle"

    @property
    def max_position(self) -> int | None:
        """The largest position the model covers (None: no limit of its own)."""
        return REDUCED_MAX_POSITION if self is Mode.REDUCED else None


def mode_for(*, fastmath: bool, cache: bool = False, reduce_angle: bool = False, **_other) -> Mode:
    """The mode of a ``ropelab.rope`` call from its ``fastmath`` and variant options.

    ``cache`` and ``reduce_angle`` are ``freq_table``'s options; other variants' options (e.g.
    ``pairs_per_thread``, ``max_positions``) do not change how cos and sin are obtained.
    """
    if cache:
        return Mode.CACHE
    if reduce_angle:
        return Mode.REDUCED
    return Mode.FAST if fastmath else Mode.PRECISE


def max_angle(positions, freqs, attention_factor: float = 1.0) -> float:
    """The largest rotation angle in radians: largest |position| times largest frequency."""
    pmax = float(np.max(np.abs(positions))) if np.size(positions) else 0.0
    return pmax * float(np.max(freqs)) if np.size(freqs) else 0.0


def reduced_angle_error(angle: float) -> float:
    """Bound on the angle error (radians) of the reduce_angle path for angles up to ``angle``."""
    turns = abs(angle) / (2 * math.pi)
    frac = 1.0 + 2.0**-23 * turns
    return 2 * math.pi * (5 * 2.0**-48 * turns + 3 * F32_EPS * frac)


def _budget(mode: Mode, angle: float) -> float:
    """The bracket of the model: the tolerance divided by ``S``."""
    if mode is Mode.CACHE:
        return ROTATION
    if mode is Mode.REDUCED:
        reduced = 2 * math.pi * (1.0 + 2.0**-23 * abs(angle) / (2 * math.pi))
        sincos = max(SINCOS_BELOW_10_RAD, FAST_SINCOS_PER_RAD * reduced)
        return ROTATION + math.sqrt(2) * reduced_angle_error(angle) + 2 * sincos
    if mode is Mode.PRECISE:
        return ROTATION + math.sqrt(2) * 4 * F32_EPS * angle
    return (ROTATION + math.sqrt(2) * (4 * F32_EPS + FAST_SINCOS_PER_RAD) * angle
            + FAST_SINCOS_FLOOR)


def rope_atol(max_abs_x: float, angle: float, *, mode: Mode | None = None,
              fastmath: bool | None = None, attention_factor: float = 1.0,
              max_position: int | None = None) -> float:
    """Absolute tolerance for one rotated element (see the module docstring).

    Give ``mode``, or ``fastmath`` alone as shorthand for ``Mode.FAST`` / ``Mode.PRECISE``.
    ``max_position`` (the largest ``|position|``), when given, is checked against the mode's
    limit: beyond it the model claims nothing and this raises ``ValueError``.
    """
    if (mode is None) == (fastmath is None):
        raise TypeError("rope_atol needs exactly one of mode= or fastmath=")
    if mode is None:
        mode = Mode.FAST if fastmath else Mode.PRECISE
    mode = Mode(mode)
    limit = mode.max_position
    if max_position is not None and limit is not None and max_position > limit:
        raise ValueError(f"no accuracy model for {mode.value} at position {max_position}: it holds "
                         f"up to {limit} (float32 positions are exact only up to 2**24)")
    scale = max(max_abs_x, 1e-30) * max(abs(attention_factor), 1.0)
    return scale * _budget(mode, float(angle))


# ---- the fused QK-RMSNorm + RoPE kernel ------------------------------------------------------

STORAGE_UNIT = {"float32": 0.0, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def fused_atol(normed_max: float, out_max: float, angle: float, storage: str, *, fastmath: bool,
              attention_factor: float = 1.0, cache: bool = False) -> float:
    """Absolute tolerance for one output element of the fused kernel.

    ``normed_max`` is max |RMSNorm output| (before rotation), ``out_max`` max |final output| and
    ``angle`` the largest rotation angle, all from the float64 reference.  Budget:

    * the norm: float32 sum of up to 512 squares, a square root and a division, then two
      products, a few dozen ulps relative (``32 * 2**-24``); fast-math ``sqrt.approx`` and
      ``div.approx`` add about ``2**-21``;
    * the rotation: :func:`ropelab.tolerance.rope_atol` on the normalized values; with the
      cos/sin cache (``cache=True``) no angle is formed on the device, so the budget does not
      grow with it: cos and sin rounded once to float32 (``2**-24`` each, ``sqrt(2)`` of the
      value together), the product with the attention factor and the rotation's two products
      and sum, ``8 * 2**-24`` of the value;
    * the final rounding to the storage dtype: half an ulp, at most ``2**-8`` (bfloat16) or
      ``2**-11`` (float16) of the value.
    """
    norm = normed_max * max(abs(attention_factor), 1.0) * (32 * F32_EPS + (2.0**-21 if fastmath else 0.0))
    if cache:
        rot = normed_max * max(abs(attention_factor), 1.0) * (8 + math.sqrt(2)) * F32_EPS
    else:
        rot = rope_atol(normed_max, angle, fastmath=fastmath, attention_factor=attention_factor)
    return norm + rot + out_max * STORAGE_UNIT[storage]


# ---- the fused backward --------------------------------------------------------------------------

def backward_atol(*, head_dim: int, dy_max: float, n_max: float, w_max: float, inv_r_max: float,
                  dx_max: float, units: int, angle: float, storage: str, fastmath: bool,
                  attention_factor: float = 1.0, cache: bool = False,
                  chain: int | None = None) -> tuple[float, float]:
    """Absolute tolerances ``(dx_atol, dw_atol)`` of the fused backward kernel.

    The statistics come from the float64 reference: ``dy_max`` max |grad|, ``n_max`` max |x/r|,
    ``w_max`` max |weight|, ``inv_r_max`` max ``1/r`` over heads, ``dx_max`` max |dx|;
    ``units`` the number of (token, head) terms summed into one weight gradient, ``chain`` the
    longest run of float32 additions in that sum (default ``units``: a serial sum).  Budget:

    * ``dz``, the inverse rotation of ``dy``: :func:`rope_atol` (the cache's
      ``(8 + sqrt 2) u`` with ``cache``);
    * ``dn = dz * w``: that error times ``|w|``, plus a rounding;
    * ``mean(dn * n)``: a float32 sum of ``head_dim`` products (``head_dim * u`` relative) and
      the error of ``dn`` (``mean|n| <= 1``, since ``mean(n**2) <= 1``);
    * ``dx = (dn - n * mean) / r``: those errors times ``(1 + |n|) / r``, ``1/r`` itself good to
      the forward's norm budget (``32 u``, plus ``2**-21`` with fast-math), and the final rounding
      to the storage dtype;
    * ``dw``: each of ``units`` terms ``dz * n`` carries ``dz``'s error times ``|n|`` and ``n``'s
      relative error, and the float32 sum adds ``chain * u`` of the sum of their magnitudes.
    """
    u = F32_EPS
    att = max(abs(attention_factor), 1.0)
    if cache:
        dz_err = dy_max * att * (8 + math.sqrt(2)) * u
    else:
        dz_err = rope_atol(dy_max, angle, fastmath=fastmath, attention_factor=attention_factor)
    dz_max = dy_max * att * math.sqrt(2)
    dn_max = dz_max * w_max
    dn_err = w_max * dz_err + dn_max * 2 * u
    r_rel = 32 * u + (2.0**-21 if fastmath else 0.0)
    mean_err = head_dim * u * dn_max * n_max + dn_err
    dx_atol = (inv_r_max * (dn_err + n_max * mean_err + 4 * u * dn_max * (1 + n_max))
               + dx_max * r_rel + dx_max * STORAGE_UNIT[storage])
    chain = units if chain is None else chain
    term_max = dz_max * n_max
    dw_atol = units * (dz_err * n_max + term_max * (r_rel + 2 * u)) + chain * u * units * term_max
    return dx_atol, dw_atol


# ---- plain RoPE in 16-bit storage (the rope_rows kernel) --------------------------------------

def rows_atol(max_abs_x: float, angle: float, storage: str, *, fastmath: bool = True,
              attention_factor: float = 1.0, cache: bool = False) -> float:
    """Absolute tolerance for one output element of plain RoPE stored as ``storage``.

    The inputs are exact in float32 (a 16-bit value widens without rounding), so the float32
    budget of :func:`rope_atol` covers the arithmetic (the CACHE mode for a cos/sin cache); the
    dominant term in 16-bit storage is the final rounding of the output, half an ulp: at most
    ``2**-8`` (bfloat16) or ``2**-11`` (float16) of ``|output| <= sqrt(2) * max|x| * a``.
    """
    if cache:
        rot = rope_atol(max_abs_x, angle, mode=Mode.CACHE, attention_factor=attention_factor)
    else:
        rot = rope_atol(max_abs_x, angle, fastmath=fastmath, attention_factor=attention_factor)
    out_max = math.sqrt(2) * max_abs_x * max(abs(attention_factor), 1.0)
    return rot + out_max * STORAGE_UNIT[storage]
