"""Recorded GPU measurements under ``data/``: one JSON file per run and kind, with provenance.

Every record carries what makes its numbers mean something: the GPU, driver and CUDA versions,
the numba / numba-cuda / numpy versions, the date, the method, and the rows themselves.  A
record made on the simulator is refused: its numbers would describe a Python interpreter.

File layout: ``data/<kind>/<kind>-<gpu-slug>-<YYYYMMDD>T<HHMMSS>.json`` (named to the second of
the run's start, from ``meta["date"]``; a save never overwrites another run's file, and the
repeated saves of one run pass ``replace``) with
``{"schema": 1, "kind": ..., "meta": {...}, "method": "...", "columns": [...], "rows": [...]}``.
A CSV copy of the rows sits beside it for spreadsheets.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import re
from pathlib import Path

from .. import resources

SCHEMA = 1
REQUIRED_META = ("gpu", "compute_capability", "driver", "cuda_driver_api", "numba", "numba_cuda",
                 "numpy", "python", "date")
DATA_DIR = resources.data_dir()  # a checkout's data/, else the installed package's copy


class RecordError(RuntimeError):
    pass


def metadata() -> dict:
    """Provenance of a measurement made now, on the current target."""
    from ..target import SIMULATED, describe

    if SIMULATED:
        raise RecordError("refusing to record measurements made on the Numba CUDA simulator: "
                          "its times and float errors say nothing about a GPU")
    meta = describe()
    meta["date"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return meta


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def save(kind: str, rows: list[dict], *, method: str, meta: dict | None = None,
         directory: Path | str | None = None, replace: Path | str | None = None) -> Path:
    """Write rows (a list of flat dicts with the same keys) and their provenance; return the path.

    A save never overwrites an existing record: a second run started in the same second gets a
    ``-2`` suffix.  ``replace`` (a path an earlier save of this run returned) rewrites that
    record instead, for runs that save partial results as they go.
    """
    meta = meta if meta is not None else metadata()
    validate_meta(meta)
    if not rows:
        raise RecordError(f"no rows to record for {kind!r}")
    columns = list(rows[0])
    for i, row in enumerate(rows):
        if list(row) != columns:
            raise RecordError(f"row {i} has columns {list(row)}, expected {columns}")
    if replace is not None:
        directory, stem = Path(replace).parent, Path(replace).stem
    else:
        directory = (Path(directory) if directory is not None
                     else resources.writable_data_dir() / kind)
        # The date and time of the run (not just the day): two runs on one day keep two records.
        stamp = re.sub(r"[^0-9T]", "", meta["date"])[:15]  # 2026-12-01T06:52:10Z -> 20261201T065210
        base = stem = f"{kind}-{_slug(meta['gpu'])}-{stamp}"
        n = 1
        while (directory / f"{stem}.json").exists():
            n += 1
            stem = f"{base}-{n}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.json"
    record = {"schema": SCHEMA, "kind": kind, "meta": meta, "method": method, "columns": columns,
              "rows": rows}
    path.write_text(json.dumps(record, indent=1, default=_jsonable) + "\n")
    with open(directory / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _jsonable(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot store {type(value).__name__} in a record")


def validate_meta(meta: dict) -> None:
    missing = [k for k in REQUIRED_META if not meta.get(k)]
    if missing:
        raise RecordError(f"record metadata lacks {', '.join(missing)}")
    if meta.get("target") != "gpu":
        raise RecordError("records hold GPU measurements only")


def validate(record: dict) -> dict:
    """Check a loaded record's schema; return it."""
    for key in ("schema", "kind", "meta", "method", "columns", "rows"):
        if key not in record:
            raise RecordError(f"record lacks {key!r}")
    if record["schema"] != SCHEMA:
        raise RecordError(f"unknown record schema {record['schema']}")
    validate_meta(record["meta"])
    for i, row in enumerate(record["rows"]):
        if list(row) != record["columns"]:
            raise RecordError(f"row {i} has columns {list(row)}, expected {record['columns']}")
    return record


def load(kind: str, directory: Path | str | None = None) -> dict:
    """The newest record of ``kind`` (by date in its metadata)."""
    directory = Path(directory) if directory is not None else DATA_DIR / kind
    paths = sorted(directory.glob(f"{kind}-*.json"))
    if not paths:
        raise FileNotFoundError(f"no recorded {kind!r} data under {directory}")
    records = [validate(json.loads(p.read_text())) for p in paths]
    return max(records, key=lambda r: r["meta"]["date"])
