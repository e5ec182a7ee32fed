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
