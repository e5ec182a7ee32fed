"""Write measurement records under ``data/<kind>/`` in :mod:`ropelab.measure.records`' format, one file
per run: ``<kind>-<gpu>-<YYYYMMDD>-<HHMMSS>.json`` (plus a CSV copy of the rows).

``ropelab.measure.records.save`` names a file by day, so a second run on the same day replaces the
first; evidence runs are repeated (before and after a fix), so each keeps its own file.
``ropelab.measure.records.load(kind)`` still returns the newest by the date in its metadata.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from . import records


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _jsonable(value):
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in a record")


def stem(kind: str, meta: dict) -> str:
    """``kind-gpu-YYYYMMDD-HHMMSS`` from the record's metadata (date in ISO 8601, UTC)."""
    stamp = re.sub(r"[^0-9]", "", meta["date"])[:14]
    return f"{kind}-{_slug(meta['gpu'])}-{stamp[:8]}-{stamp[8:14]}"


def save(kind: str, rows: list[dict], *, method: str, meta: dict,
         directory: Path | str | None = None, replace: Path | None = None) -> Path:
    """Validate and write one record; return the JSON path.

    A new name never overwrites an existing file; ``replace`` (a path this run's previous save
    returned) rewrites that record instead, for runs that save partial results as they go.
    """
    records.validate_meta(meta)
    if not rows:
        raise records.RecordError(f"no rows to record for {kind!r}")
    columns = list(rows[0])
    for i, row in enumerate(rows):
        if list(row) != columns:
            raise records.RecordError(f"row {i} has columns {list(row)}, expected {columns}")
    directory = Path(directory) if directory is not None else records.DATA_DIR / kind
    if replace is not None:
        directory, name = Path(replace).parent, Path(replace).stem
    directory.mkdir(parents=True, exist_ok=True)
    if replace is None:
        base = stem(kind, meta)
        name, n = base, 1
        while (directory / f"{name}.json").exists():
            n += 1
            name = f"{base}-{n}"
    record = {"schema": records.SCHEMA, "kind": kind, "meta": meta, "method": method,
              "columns": columns, "rows": rows}
    path = directory / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, default=_jsonable) + "\n")
    with open(directory / f"{name}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path
