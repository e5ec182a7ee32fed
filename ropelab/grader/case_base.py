"""The rope base (and the norm's eps) the steps' cases are built with: the package's default,
or another for a check's fresh case.

Every fixed case uses :data:`BASE` (10000), so a kernel that ignores its ``base`` argument and
hard-codes 10000 would pass them all; :mod:`.unseen` builds the fresh case of a step that takes
``base`` inside :func:`other_base` with one of :data:`OTHER_BASES`.  The case builders read
:func:`base`.  (A module of its own: :mod:`.unseen` and :mod:`.steps.cases` both read it.)
"""

from __future__ import annotations

import contextlib
import threading

from ..freqs import DEFAULT_BASE

BASE = DEFAULT_BASE  # the steps' rope base, the package's default
OTHER_BASES = (500000.0, 1000000.0, 50000.0)
_current = threading.local()


def base() -> float:
    """The rope base of the cases being built: :data:`BASE`, or another inside
    :func:`other_base` (in this thread only)."""
    return getattr(_current, "base", BASE)


@contextlib.contextmanager
def _overriding(name: str, value):
    """``name`` of the cases being built set to ``value`` inside the block (this thread only);
    what it was before comes back after."""
    before = getattr(_current, name, None)
    setattr(_current, name, value)
    try:
        yield
    finally:
        if before is None:
            delattr(_current, name)
        else:
            setattr(_current, name, before)


def other_base(value: float):
    """Cases built inside the block (in this thread) take ``value`` as their rope base."""
    return _overriding("base", float(value))


OTHER_EPS = 0.5  # a fresh case's eps: far enough from 1e-6 that a hard-coded one is wrong


def eps(default):
    """The norm's eps of the cases being built: ``default`` (the step's), or :data:`OTHER_EPS`
    inside :func:`other_eps` (in this thread only), in ``default``'s type."""
    value = getattr(_current, "eps", None)
    return default if value is None else type(default)(value)


def other_eps():
    """Cases built inside the block (in this thread) take :data:`OTHER_EPS` as their eps."""
    return _overriding("eps", OTHER_EPS)
