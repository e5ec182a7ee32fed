"""One row of the prediction's GPU run, and the CSV files they go to (:mod:`.timings` and
:mod:`.gpu_child` both write them).

A row says which entry (set, key, step, label), on which timing case, with which launches
(grid x block as the GPU saw them), what became of it (``status``: ``ok``, ``wrong``,
``error``, ``fault``, ``skipped``, or ``dry`` in a dry run) and, when timed, the medians and
p20/p80 of the kernel and of a device copy of the same bytes.
"""

from __future__ import annotations

import csv
from pathlib import Path

COLUMNS = ("set", "key", "step", "label", "kind", "case", "bytes_moved", "status", "error",
           "launches", "regs", "median_us", "p20_us", "p80_us", "repeats", "copy_us",
           "copy_p20_us", "copy_p80_us", "host_us", "fill_us", "seconds", "predicted_us",
           "features")


def gather(directories, training: bool) -> list:
    from .entries import load_set, training_entries

    out = []
    for d in directories:
        out += load_set(d)
    if training:
        out += training_entries()
    return out


def row(entry, step=None, **fields) -> dict:
    row = {c: "" for c in COLUMNS}
    row.update({"set": entry.set, "key": entry.key, "step": entry.step_id, "label": entry.label,
                "kind": getattr(step, "kind", "")})
    row.update({k: v for k, v in fields.items() if k in row})
    return row


class Writer:
    """One CSV per set under ``out`` (``<prefix>-<set>-<stamp>.csv``), a row flushed as soon
    as it is known."""

    def __init__(self, out: Path, prefix: str, stamp: str):
        self.out, self.prefix, self.stamp, self.files = Path(out), prefix, stamp, {}
        self.counts = {}
        self.out.mkdir(parents=True, exist_ok=True)

    def write(self, row: dict) -> None:
        if row["set"] not in self.files:
            name = f"{self.prefix}-{row['set']}-{self.stamp}.csv"
            handle = open(self.out / name, "w", newline="")
            writer = csv.DictWriter(handle, COLUMNS)
            writer.writeheader()
            self.files[row["set"]] = (handle, writer)
        handle, writer = self.files[row["set"]]
        writer.writerow(row)
        handle.flush()
        self.count(row)

    def count(self, row: dict) -> None:
        key = (row["set"], row["status"])
        self.counts[key] = self.counts.get(key, 0) + 1

    def summary(self) -> str:
        sets = dict.fromkeys(s for s, _ in self.counts)
        return "; ".join(f"{s}: " + ", ".join(f"{n} {status}" for (t, status), n in
                                               sorted(self.counts.items()) if t == s)
                         for s in sets)

    def close(self) -> None:
        for handle, _ in self.files.values():
            handle.close()


def dims_text(d) -> str:
    d = list(d)
    while len(d) > 1 and d[-1] == 1:
        d.pop()
    return ",".join(map(str, d))


def error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
