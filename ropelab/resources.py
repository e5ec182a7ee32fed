"""Where the files ropelab reads live: the one module that knows.

ropelab reads files that are not Python modules: the recorded GPU runs and the census caches
under ``data/``, and the course's notebook sources and exercise solutions.  They live at the top
of the repository (the course layout), and the wheel carries a copy of them inside the package,
under ``ropelab/_bundle/`` with the same relative paths (``setup.py`` copies them at build time).
So there are two places, and this module picks one for the whole process:

* a **source checkout** (this file sits in ``<root>/ropelab/`` and ``<root>`` holds
  ``pyproject.toml`` and ``data/``): the checkout's own files, so an edit, a new record or a
  rebuilt census is seen at once, with no reinstall;
* otherwise an **installed package**: the copy in the package, found through
  :mod:`importlib.resources`.  It is read-only by intent: a run that records (a GPU benchmark,
  ``census --save``, ``exercises --save-census``) needs a checkout or an explicit ``--out``.

Every other module asks here (:func:`data_dir`, :func:`notebook_sources`,
:func:`solutions_dir`) instead of walking up from its own ``__file__``.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources as _importlib_resources
from pathlib import Path

BUNDLE = "_bundle"  # the package folder that holds the wheel's copy of the repository files
# Paths relative to the repository root (and to the bundle, which mirrors them).
DATA = "data"
NOTEBOOK_SOURCES = "scripts/notebooks/src"  # out of the learners' view
SOLUTIONS = "notebooks/solutions"
# What the wheel copies (setup.py reads this list, so the two cannot drift apart).
SHIPPED = (DATA, NOTEBOOK_SOURCES, SOLUTIONS)

NEEDS_CHECKOUT = ("writes under the repository's data/, which an installed ropelab does not have: "
                  "run it from a source checkout (git clone; PYTHONPATH or pip install -e), or "
                  "give an output directory")


class ResourceError(RuntimeError):
    """A file ropelab needs is in neither a source checkout nor the installed package."""


def _checkout_root() -> Path | None:
    root = Path(__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / DATA).is_dir():
        return root
    return None


@lru_cache(maxsize=None)
def root() -> Path:
    """The folder the relative paths above are resolved from: a checkout, or the bundle."""
    checkout = _checkout_root()
    if checkout is not None:
        return checkout
    bundle = _importlib_resources.files("ropelab") / BUNDLE
    # pip installs a wheel as plain files, so the bundle is a real folder; the callers glob and
    # stat it.  A zipped ropelab (zipimport) would not be: say so rather than half-work.
    if not isinstance(bundle, Path) or not bundle.is_dir():
        raise ResourceError(f"ropelab's data files are missing: no source checkout around "
                            f"{Path(__file__).parent}, and no {BUNDLE}/ folder in the installed "
                            f"package (was the wheel built by setup.py's build_py?)")
    return bundle


def in_checkout() -> bool:
    """True when ropelab runs from a source checkout (its files are the repository's)."""
    return _checkout_root() is not None


def data_dir() -> Path:
    """``data/``: recorded runs (one folder per kind) and census caches (``census/``)."""
    return root() / DATA


def notebook_sources() -> Path:
    """The notebooks' percent-format sources (the grader reads the starter cells there)."""
    return root() / NOTEBOOK_SOURCES


def solutions_dir() -> Path:
    """The exercise solutions and recorded wrong attempts, one file per notebook."""
    return root() / SOLUTIONS


def writable_data_dir() -> Path:
    """``data/`` for a run that records into it: only a source checkout has one to write."""
    checkout = _checkout_root()
    if checkout is None:
        raise ResourceError("recording " + NEEDS_CHECKOUT)
    return checkout / DATA
