"""Showing code in a lesson: always read from the package, never pasted into a notebook.

Kernel files mark the regions a lesson shows with comment lines, as numba-cuda's own
documentation does for its examples::

    # ex: begin rope_flat
    def rope_flat(x, out, positions, n_pairs, total_pairs, base):
        ...
    # ex: end rope_flat

:func:`excerpt` returns the text between the two lines, dedented, with any nested marker lines
left out.  A notebook then shows the part of a kernel it is about, not a whole module with its
launcher, and the text is always the code that runs.  Marker names are unique across the
package (:func:`markers` refuses duplicates), so a name alone says which region is meant.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^\s*# ex: (?P<kind>begin|end) (?P<name>[A-Za-z0-9_.-]+)\s*$")


class MarkerError(ValueError):
    """A marker is missing, unbalanced or defined twice."""


@dataclass(frozen=True)
class Region:
    path: Path  # the file, absolute
    first: int  # 0-based line index of the first line after "begin"
    last: int  # 0-based line index of the "end" line (exclusive)

    @property
    def where(self) -> str:
        """The file relative to the repository (``ropelab/kernels/flat.py``), for a caption."""
        return self.path.relative_to(PACKAGE.parent).as_posix()


def source(obj) -> str:
    """The source text of a kernel (or any function or module), exactly as ropelab has it."""
    return inspect.getsource(obj)


def scan(text: str, path: Path) -> dict[str, Region]:
    """The regions of one file's text; :class:`MarkerError` on any imbalance."""
    regions: dict[str, Region] = {}
    open_at: dict[str, int] = {}
    for i, line in enumerate(text.splitlines()):
        m = MARKER.match(line)
        if not m:
            continue
        name = m.group("name")
        if m.group("kind") == "begin":
            if name in open_at or name in regions:
                raise MarkerError(f"{path}:{i + 1}: marker {name!r} begins twice")
            open_at[name] = i + 1
        else:
            if name not in open_at:
                raise MarkerError(f"{path}:{i + 1}: 'end {name}' without a 'begin {name}'")
            regions[name] = Region(path, open_at.pop(name), i)
    if open_at:
        name, line = next(iter(open_at.items()))
        raise MarkerError(f"{path}:{line}: 'begin {name}' has no 'end {name}'")
    return regions


def _package_files() -> list[Path]:
    # This file is left out: its docstring shows the marker syntax.
    here = Path(__file__).resolve()
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts and p != here)


@lru_cache(maxsize=None)
def _markers_cached(stamp: tuple) -> dict[str, Region]:
    found: dict[str, Region] = {}
    for path, _ in stamp:
        for name, region in scan(Path(path).read_text(), Path(path)).items():
            if name in found:
                raise MarkerError(f"marker {name!r} is defined in both {found[name].where} and "
                                  f"{region.where}; names must be unique in the package")
            found[name] = region
    return found


def markers() -> dict[str, Region]:
    """Every marked region in the ropelab package, by name (re-read when a file changes)."""
    return _markers_cached(tuple((str(p), p.stat().st_mtime_ns) for p in _package_files()))


def _file_of(obj) -> Path:
    target = getattr(obj, "py_func", obj)  # a numba dispatcher: its Python function
    kernel = getattr(target, "kernel", None)  # a Variant record: its main kernel
    if kernel is not None and not inspect.ismodule(target):
        target = getattr(kernel, "py_func", kernel)
    return Path(inspect.getsourcefile(target)).resolve()


def region_text(obj, name: str) -> tuple[Region, str]:
    """The region ``name`` of the file that defines ``obj`` and its text: dedented, without
    nested marker lines (what :func:`excerpt` prints under its caption, and what
    :mod:`.specialise` specialises)."""
    path = _file_of(obj)
    regions = markers()
    region = regions.get(name)
    if region is not None and path.name == "__init__.py" and region.path.parent == path.parent:
        path = region.path  # a package (kernels.fused_qknorm_rope): its modules hold the regions
    if region is None or region.path != path:
        known = sorted(n for n, r in regions.items() if r.path == path)
        raise MarkerError(f"no region {name!r} in {path.name}; it has: {', '.join(known) or 'none'}")
    lines = path.read_text().splitlines()[region.first:region.last]
    body = textwrap.dedent("\n".join(line for line in lines if not MARKER.match(line)))
    return region, body.strip("\n")


def excerpt(obj, name: str) -> str:
    """The region ``name`` of the file that defines ``obj`` (a module, function, dispatcher or
    ``Variant``), dedented, without nested marker lines, under a one-line caption naming the
    file.

    Raises :class:`MarkerError` when the file has no such region: a lesson that asks for a
    region that was renamed or deleted fails when it is built, not silently.
    """
    region, body = region_text(obj, name)
    return f"# {region.where}, region '{name}'\n{body}"
