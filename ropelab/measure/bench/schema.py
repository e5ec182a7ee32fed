"""A record kind's row schema, and the one text formatter every bench prints its rows with.

A :class:`Schema` is the column list of one record kind (in the order the record keeps) and the
cells of its text table.  ``schema.row(...)`` builds a row in that order and refuses a missing
or an unknown column, so a bench cannot write a record whose rows disagree with the others of
its kind; ``schema.format(rows)`` prints them.  Every kind is declared in :mod:`.kinds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


class RowError(ValueError):
    """A row that does not have exactly its kind's columns."""


def _value(key: str, fmt: str):
    """``row[key]`` formatted with ``fmt``, or an empty cell when it is None."""
    def get(row: dict) -> str:
        v = row[key]
        return "" if v is None else format(v, fmt)
    return get


@dataclass(frozen=True)
class Cell:
    """One column of a text table: its head, its width and alignment, and its text for a row."""

    head: str
    width: int
    text: Callable[[dict], str]
    align: str = ">"

    def fit(self, s: str) -> str:
        return f"{s:{self.align}{self.width}}"


def text(key: str, width: int, head: str | None = None) -> Cell:
    """A left-aligned text cell."""
    return Cell(head or key, width, _value(key, ""), "<")


def number(key: str, width: int, fmt: str, head: str | None = None) -> Cell:
    """A right-aligned number (``fmt``: a format spec such as ``.2f``)."""
    return Cell(head or key, width, _value(key, fmt))


def percent(key: str = "frac_of_copy", width: int = 8, head: str = "of copy") -> Cell:
    """A fraction shown as a percentage with one decimal."""
    def get(row):
        v = row[key]
        return "" if v is None else f"{100 * v:.1f}%"
    return Cell(head, width, get)


def host(width: int = 8) -> Cell:
    """Median host enqueue time, ``!`` when the row may include host time (``host_bound``);
    empty for records made before host times were kept."""
    def get(row):
        if row.get("host_us") is None:
            return ""
        return f"{row['host_us']:.0f}{'!' if row.get('host_bound') else ''}"
    return Cell("host us", width, get)


HOST_BOUND_NOTE = "! = enqueueing took >= 80% of the fill's GPU time: that row may include host time"


def host_bound_note(rows: list[dict]) -> list[str]:
    """The footnote of :func:`host`, when a row carries the ``!``."""
    return [HOST_BOUND_NOTE] if any(r.get("host_bound") for r in rows) else []


@dataclass(frozen=True)
class Schema:
    """The columns of one record kind, in record order, and its text table.

    ``notes(rows)`` returns lines printed under the table (footnotes, the target a bench
    reports against).
    """

    kind: str
    columns: tuple[str, ...]
    cells: tuple[Cell, ...] = ()
    notes: Callable[[list[dict]], list[str]] = field(default=lambda rows: [])

    def row(self, values: dict | None = None, **more) -> dict:
        """``values`` (and ``more``) as a row in column order; a missing or an unknown column
        raises :class:`RowError` naming it."""
        given = dict(values or {}, **more)
        missing = [c for c in self.columns if c not in given]
        unknown = [k for k in given if k not in self.columns]
        if missing or unknown:
            raise RowError(f"a {self.kind} row needs exactly the columns {list(self.columns)}; "
                           f"missing {missing}, unknown {unknown}")
        return {c: given[c] for c in self.columns}

    def check(self, rows: list[dict]) -> None:
        """Refuse rows whose columns are not this kind's, in its order."""
        for i, r in enumerate(rows):
            if tuple(r) != self.columns:
                raise RowError(f"{self.kind} row {i} has columns {list(r)}, expected "
                               f"{list(self.columns)}")

    def format(self, rows: list[dict]) -> str:
        """The text table: a head line, a rule, one line per row, then the notes.  Lines end
        at their last character (an empty last cell leaves no trailing blanks)."""
        head = " ".join(c.fit(c.head) for c in self.cells).rstrip()
        lines = [head, "-" * len(head)]
        lines += [" ".join(c.fit(c.text(r)) for c in self.cells).rstrip() for r in rows]
        return "\n".join(lines + list(self.notes(rows)))
