"""Measured numbers for the course's prose, each read from the record it comes from.

A notebook source's Markdown (and the README) never types a measured number.  It writes a
placeholder, ``{{ fused.neox_16bit_pct }}``, and ``scripts/notebooks/build.py`` replaces it with the
text of the registry entry of that name while building the notebook, noting in the cell's
metadata which record each number was read from.  When a record changes, the rendered text
changes with it, and ``tests/test_drift.py`` fails until the notebook is rebuilt: prose cannot
quietly disagree with ``data/``.

The registry (:mod:`.numbers_core`) is filled by :mod:`.numbers_plain`, :mod:`.numbers_predict`,
:mod:`.numbers_models`, :mod:`.numbers_fused`, :mod:`.numbers_serving`, :mod:`.numbers_training`, :mod:`.numbers_mlir` and :mod:`.numbers_suite`.  Each entry is a function of no arguments that returns a :class:`Rendered`: the text to put in
the prose and the record it read (a path under ``data/``, or the seed note it quotes).  Keys are
``<topic>.<what>``; the topics follow the records (``bench``, ``fused``, ``controls``,
``profile``, ``history``, ``launch``, ``seed``).

The measured numbers of the README and of ``data/history/README.md`` sit between markers,
``<!--n:KEY-->TEXT<!--/n-->`` (invisible when rendered); ``python -m ropelab.lessons.numbers
--readme`` rewrites the text between them, and ``--check-readme`` exits 1 when one disagrees
with the records.
"""

from __future__ import annotations

import argparse
import re
import sys

from . import numbers_fused, numbers_models, numbers_plain  # noqa: F401  (importing them fills the registry)
from . import numbers_backward, numbers_predict, numbers_serving, numbers_torch  # noqa: F401
from . import numbers_mlir, numbers_suite, numbers_training  # noqa: F401
from .numbers_core import REGISTRY, ROOT, Rendered, newest, number, runs, times_word

__all__ = ["REGISTRY", "Rendered", "number", "newest", "runs", "times_word", "render",
           "render_readme", "PLACEHOLDER", "README_MARK", "MARKED_FILES"]

PLACEHOLDER = re.compile(r"\{\{\s*([\w.:]+)\s*\}\}")
# Markdown files outside the notebooks whose measured numbers are marked and rendered.
MARKED_FILES = ("README.md", "data/history/README.md")
README_MARK = re.compile(r"<!--n:([\w.:]+)-->(.*?)<!--/n-->", re.S)


# ---------------------------------------------------------------------------- rendering


def render(text: str) -> tuple[str, dict[str, str]]:
    """``text`` with every ``{{ key }}`` replaced, and ``{key: record}`` of what was used.

    An unknown key raises KeyError naming it (a typo must not reach a notebook).
    """
    used: dict[str, str] = {}

    def one(match):
        key = match.group(1)
        if key not in REGISTRY:
            raise KeyError(f"no number {key!r} in ropelab.lessons.numbers (known: "
                           f"{', '.join(sorted(REGISTRY))})")
        value = REGISTRY[key]()
        used[key] = value.record
        return value.text

    return PLACEHOLDER.sub(one, text), used


def render_readme(text: str) -> str:
    """The README with the text between every ``<!--n:KEY-->`` and ``<!--/n-->`` re-rendered."""
    def one(match):
        key = match.group(1)
        if key not in REGISTRY:
            raise KeyError(f"README marks an unknown number {key!r}")
        return f"<!--n:{key}-->{REGISTRY[key]().text}<!--/n-->"

    return README_MARK.sub(one, text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Render the course's measured numbers.")
    parser.add_argument("--readme", action="store_true",
                        help="rewrite the marked numbers of README.md and data/history/README.md")
    parser.add_argument("--check-readme", action="store_true",
                        help="exit 1 when a marked number disagrees with the records")
    args = parser.parse_args(argv)
    if args.readme or args.check_readme:
        stale = []
        for name in MARKED_FILES:
            path = ROOT / name
            text = path.read_text()
            fresh = render_readme(text)
            if fresh != text:
                stale.append(name)
                if not args.check_readme:
                    path.write_text(fresh)
            print(f"{name}: {len(README_MARK.findall(fresh))} marked numbers, "
                  + ("agree with the records" if fresh == text else
                     "disagreed" + ("" if args.check_readme else ", rewritten")))
        if args.check_readme and stale:
            print("run: python -m ropelab.lessons.numbers --readme")
            return 1
        return 0
    for key in sorted(REGISTRY):
        value = REGISTRY[key]()
        print(f"{key:<36} {value.text:<22} {value.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
