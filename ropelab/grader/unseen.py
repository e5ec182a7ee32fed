"""The cases a check runs: the step's fixed cases, then one nobody could have seen before.

A step's cases are fixed (the same inputs every run, so that a verdict is reproducible and the
notebooks' stored outputs hold), which makes their answers public: a notebook cell can compute
them with ``steps.get(...).cases()``, a kernel can return them from a table, a function can
keep the outputs of one call for the next.  So after the fixed cases the grader runs one more,
with inputs drawn for this check alone: every step draws its inputs from
``numpy.random.default_rng(seed)`` (directly or through :func:`.steps.cases.rng_for`), and
:func:`salted` mixes a random salt into that seed, in the building thread only, for as long as
the cases are built.  A function that computes its output from its inputs passes this case
exactly as it passes the fixed ones.  The smallest case of at least :data:`MIN_FRESH` outputs
is the one drawn again: it is cheap to run, and a stored answer is caught on any shape.  Where
the step takes a ``base`` (or a frequency table made from one), it is also built with another
rope base (:data:`.case_base.OTHER_BASES`, chosen by the salt): every fixed case uses the
default 10000, so a kernel that ignores its ``base`` would pass them all; a step that takes the
norm's ``eps`` gets another eps in it too.
"""

from __future__ import annotations

import contextlib
import secrets
import threading

import numpy as np

from .case_base import OTHER_BASES, other_base, other_eps

FRESH = "fresh random inputs"
MIN_FRESH = 4  # outputs of the case redrawn, where a step has one that large
REBASED = frozenset({"base", "inv_freq"})  # arguments a fresh case draws with another base


def new_salt() -> int:
    return secrets.randbits(63)


@contextlib.contextmanager
def salted(salt: int):
    """``numpy.random.default_rng(seed)`` with ``salt`` mixed into an integer seed, for calls
    from this thread inside the block (other threads see NumPy's own)."""
    original = np.random.default_rng
    owner = threading.get_ident()

    def default_rng(seed=None, *args, **kwargs):
        if threading.get_ident() == owner and isinstance(seed, (int, np.integer)) \
                and not isinstance(seed, bool) and seed >= 0:
            seed = [int(salt), int(seed)]
        return original(seed, *args, **kwargs)

    np.random.default_rng = default_rng
    try:
        yield
    finally:
        np.random.default_rng = original


def _same_inputs(a, b) -> bool:
    if a.inputs.keys() != b.inputs.keys():
        return False
    for name, value in a.inputs.items():
        other = b.inputs[name]
        if isinstance(value, np.ndarray):
            if not (isinstance(other, np.ndarray) and value.shape == other.shape
                    and np.array_equal(value, other, equal_nan=value.dtype.kind == "f")):
                return False
        elif value != other:
            return False
    return True


def fresh_case(step, salt: int, fixed: list | None = None):
    """The step's smallest case drawn again with ``salt``, labelled as such; None when the
    step's inputs do not depend on a seed (nothing fresh to draw).  ``fixed``: the step's
    cases, if already built."""
    fixed = step.cases() if fixed is None else fixed
    # a step that takes the base, or a frequency table made from it: a kernel that ignores
    # the argument and recomputes 10000's frequencies passes every fixed case
    # (where the census already refuses every pow, 04's tables, nothing could recompute them)
    no_pow = any(g.counter == "pow" and g.op == "<=" and g.limit == 0 for g in step.gates)
    rebased = other_base(OTHER_BASES[salt % len(OTHER_BASES)]) if REBASED & set(
        step.arguments) and not no_pow else contextlib.nullcontext()
    other = other_eps() if "eps" in step.arguments else contextlib.nullcontext()
    with salted(salt), rebased, other:
        drawn = step.cases()
    # the smallest case of at least MIN_FRESH outputs: a case of one pair tests no base (pair
    # 0's frequency is base ** 0 = 1 whatever the base), so it is not the one redrawn
    sized = [i for i in range(len(fixed)) if fixed[i].expected.size >= MIN_FRESH] or \
        list(range(len(fixed)))
    k = min(sized, key=lambda i: fixed[i].expected.size)
    if len(drawn) != len(fixed) or _same_inputs(fixed[k], drawn[k]):
        scrub(drawn)
        return None
    case = drawn[k]
    scrub(drawn[:k] + drawn[k + 1:])
    case.label = f"{case.label}, {FRESH}"
    return case


def scrub(cases: list) -> None:
    """Drop the answers of built cases no longer needed (a ``diagnose`` closure may hold its
    case in a cycle that outlives the list, answer and all, until the collector runs)."""
    for case in cases:
        case.expected = case.alternatives = case.diagnose = None


def cases(step, salt: int | None) -> list:
    """The fixed cases, then the fresh one (``salt`` None: the fixed cases only)."""
    found = step.cases()
    if salt is not None:
        fresh = fresh_case(step, salt, found)
        if fresh is not None:
            found.append(fresh)
    return found


def is_fresh(case) -> bool:
    return case.label.endswith(FRESH)


FRESH_HINT = ("right on the fixed cases, wrong on inputs drawn for this check alone (with "
              "another rope base, frequency table or eps where the step takes one): out must "
              "be computed from the inputs on every call, every argument included, not stored "
              "or remembered")
