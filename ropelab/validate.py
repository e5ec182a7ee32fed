"""Argument checkers shared by every public function: one rule per kind of mistake.

* a wrong *type* (``"10000"`` for ``base``, ``None`` or ``"False"`` for a bool, ``4.0`` for an
  int) is a ``TypeError``;
* a value of the right type that is out of range is a :class:`~ropelab.errors.RopeInputError`.

Strings are never coerced: ``float("1e-6")`` would accept a config file's unparsed text and hide
the bug that produced it.  ``bool`` is not accepted as an int (``True`` is an int in Python, but
``rotary_dim=True`` is a mistake), and NumPy scalars are accepted wherever Python ones are.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import RopeInputError


def fail(msg: str):
    """Raise the value error every checker raises (a function so call sites read as one line)."""
    raise RopeInputError(msg)


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        fail(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        fail(f"{name} must be <= {maximum}, got {value}")
    return value


def check_float(name: str, value, *, above: float | None = None, at_least: float | None = None) -> float:
    """A finite real number (int or float, Python or NumPy; not bool, not str)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        fail(f"{name} must be finite, got {value}")
    if above is not None and not value > above:
        fail(f"{name} must be > {above:g}, got {value:g}")
    if at_least is not None and value < at_least:
        fail(f"{name} must be >= {at_least:g}, got {value:g}")
    return value


def check_options(owner: str, given: dict, allowed: dict) -> None:
    """Refuse keyword options ``owner`` does not have, naming the ones it does."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        if allowed:
            valid = ", ".join(f"{k}={v!r}" for k, v in allowed.items())
            raise TypeError(f"{owner} has no option {', '.join(unknown)}; its options (with "
                            f"defaults) are: {valid}")
        raise TypeError(f"{owner} takes no options, got {', '.join(unknown)}")


# ---- checks both ops make ------------------------------------------------------------------------

FLOAT32_MAX = float(np.finfo(np.float32).max)
INT32_MAX = int(np.iinfo(np.int32).max)


def check_base(base) -> float:
    """RoPE's base: > 1, and representable in float32 (kernels that form ``base ** e`` on the
    GPU receive it as float32; 1e39 would arrive as inf and give wrong angles silently)."""
    base = check_float("base", base, above=1.0)
    if base > FLOAT32_MAX:
        fail(f"base must fit float32 (at most {FLOAT32_MAX:.4g}), got {base:g}")
    return base


def check_rotary_dim(rotary_dim, head_dim: int) -> int:
    """``rotary_dim`` (default ``head_dim``): positive, even, at most ``head_dim``."""
    if rotary_dim is None:
        return head_dim
    rotary_dim = check_int("rotary_dim", rotary_dim)
    if rotary_dim <= 0 or rotary_dim % 2:
        fail(f"rotary_dim must be a positive even number, got {rotary_dim}")
    if rotary_dim > head_dim:
        fail(f"rotary_dim ({rotary_dim}) must not exceed head_dim ({head_dim})")
    return rotary_dim


def check_frequencies(inv_freq: np.ndarray, attention_factor: float) -> None:
    """Refuse frequencies whose float32 angles overflow: the kernels form
    ``float32(position) * float32(inv_freq)``, and every int32 position must give a finite angle
    (``Linear(1e-38)`` would make them inf, and the output NaN, without an error)."""
    top = float(np.max(inv_freq)) if inv_freq.size else 0.0
    if not top * 2.0**31 < FLOAT32_MAX:
        fail(f"the scaled inverse frequencies reach {top:g}; times a position up to 2**31 that "
             f"overflows float32 (largest allowed frequency {FLOAT32_MAX / 2.0**31:.3g})")
    if not abs(attention_factor) < FLOAT32_MAX:
        fail(f"the attention factor {attention_factor:g} does not fit float32")


def check_eps(eps) -> float:
    """RMSNorm's epsilon: >= 0, and not so small that float32 rounds it to 0 (an all-zero head
    would then divide 0 by 0)."""
    eps = check_float("eps", eps, at_least=0.0)
    if eps > FLOAT32_MAX:
        fail(f"eps must fit float32, got {eps:g}")
    if eps > 0 and np.float32(eps) == 0:
        fail(f"eps {eps:g} rounds to 0 in float32 (the kernel's precision); use 0 deliberately "
             f"or a value >= {float(np.finfo(np.float32).smallest_subnormal):.3g}")
    return eps


def check_position_values(values: np.ndarray, limit: int | None = None, reason: str = "") -> None:
    """The position policy of every ropelab op, applied to host positions before any launch.

    * Positions are int32 values.  Host arrays of any integer dtype are accepted when their
      values fit int32; device arrays must be int32.
    * Without a position limit any int32 works: a negative position rotates backwards, as
      ``reference.rope`` and the device path compute it.
    * With a limit (a cos/sin cache of ``max_positions`` rows, ``reduce_angle``'s 2**24) a
      position must lie in ``[0, limit)``.  Host positions outside are refused here; device
      positions are never read on the host: the kernel writes that token as NaN and records the
      position for :func:`ropelab.check_errors`.

    ``reason`` says why the limit exists (it is the plan's ``limit_reason``).
    """
    if values.size == 0:
        return
    lo, hi = int(values.min()), int(values.max())
    if lo < -INT32_MAX - 1 or hi > INT32_MAX:
        fail(f"positions must fit in int32, got values in [{lo}, {hi}]")
    if limit is not None and lo < 0:
        fail(f"position {lo} is out of range: {reason or f'positions must lie in [0, {limit})'}")
    if limit is not None and hi >= limit:
        fail(f"position {hi} is out of range: {reason or f'positions must be below {limit}'}")


def check_positions_array(info, tokens: int) -> None:
    """Shape and dtype of ``positions`` (an :class:`~ropelab.ops.arrays.ArrayInfo`), the one rule
    of every op; their values: :func:`check_position_values`.

    A dtype is a value of the array, so a wrong one is a :class:`RopeInputError` (a float
    array, whatever the data's dtype).  Host positions of any integer dtype and any layout are
    accepted (they are copied to the device as int32); device positions are read where they
    lie, so they must be int32 and contiguous.
    """
    if info.shape != (tokens,):
        fail(f"positions must have shape ({tokens},) (one per token), got {info.shape}")
    if info.dtype.kind not in "iu":
        fail(f"positions must be integers (int32), got {info.dtype}")
    if info.on_device and info.dtype != np.int32:
        fail(f"device positions must be int32, got {info.dtype}")
    if info.on_device and tokens and not info.c_contiguous:
        fail("device positions must be contiguous")
