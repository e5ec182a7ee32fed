"""The recorded rows the model is fitted on, each joined with its kernel's census and launch.

Everything this package reads from other modules is read here, so that a change in the census
engine, the records or the launch plans touches one file:

- the GPU records (:func:`ropelab.measure.records.load`): the newest ``bench`` run (plain
  RoPE, every ropelab variant through the public call), the newest ``controls`` run (the
  controlled kernels, the references and the 128-bit copy) and the newest ``bench_fused`` run
  (the fused QK-norm + RoPE kernel); each row's device copy of the same bytes comes from the
  same run;
- the committed census caches (``data/census/census-sass.json`` for the registered kernels,
  ``data/census/controls.json`` for the controls): PTX and SASS counts, and for the controls the
  SASS load schedule;
- the launch geometry (grid, block, tables) from the kernels' own plans, for the shape of the row.

A row whose kernel has no census (the fused kernel at a partial rotary dim, the cos/sin cache in
16 bits) is left out and listed in :func:`gather`'s ``skipped``, never guessed.  Also left out,
by choice: the bench's ``kernel`` rows (the same kernels launched without the public call: the
same census twice), the bench's own fused rows (the newer ``bench_fused`` run times that code),
and older runs (their kernels may differ from today's census).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .. import records

DATA_DIR = records.DATA_DIR
CENSUS_DIR = DATA_DIR / "census"
SOURCE_KINDS = ("bench", "controls", "bench_fused")


@dataclass
class Row:
    """One recorded (kernel, shape) time with what the model may know about it."""

    kernel: str  # the name the records use (variant, variant:mode or control entry)
    source: str  # the record kind it came from
    shape: str
    dtype: str
    bytes_moved: int
    median_us: float  # the recorded H200 time
    copy_us: float  # a device copy of the same bytes, same run
    census: dict  # PTX (and SASS) counts of the kernel that ran
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    table_bytes: int = 0  # bytes of the lookup tables the kernel reads beyond bytes_moved
    extra: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.kernel}@{self.shape}:{self.dtype}"


def _json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def census_rows() -> dict:
    """Census rows by kernel function name (registered kernels, fast-math builds)."""
    doc = _json(CENSUS_DIR / "census-sass.json")
    return {r["kernel"]: r for r in doc["rows"] if r.get("fastmath") and not r.get("error")}


def control_census() -> dict:
    """Census rows of the controls, by entry name (PTX, SASS and the SASS load schedule)."""
    doc = _json(CENSUS_DIR / "controls.json")
    return {r["name"]: r for r in doc["rows"] if not r.get("error")}


def newest(kind: str) -> tuple[dict, Path]:
    """The newest record of ``kind`` and its file."""
    record = records.load(kind)
    stamp = record["meta"]["date"]
    for path in sorted((DATA_DIR / kind).glob(f"{kind}-*.json")):
        if _json(path)["meta"]["date"] == stamp:
            return record, path
    raise FileNotFoundError(f"no file for the newest {kind} record")


def _copies(record: dict) -> dict:
    """Copy time by (shape, dtype) in one run."""
    out = {}
    for r in record["rows"]:
        if r.get("variant", r.get("entry")) == "copy_d2d":
            out[(r["shape"], r.get("dtype", "float32"))] = float(r["median_us"])
    return out


def _plain_plan(name: str, tokens: int, hidden: int):
    """(kernel function name, grid, block, table bytes) of a plain variant, as the bench ran it."""
    from ... import kernels
    from ...problem import RopeProblem

    variant, _, mode = name.partition(":")
    options = {}
    if mode == "cache":
        options = {"cache": True, "max_positions": tokens}  # as measure.cases sizes it
    elif mode:
        options = {mode: True}
    plan = kernels.VARIANTS[variant].plan(RopeProblem(tokens, 1, hidden, hidden), options)
    tables = sum(int(t.nbytes) for t in plan.tables)
    return (getattr(plan.kernel, "__qualname__", plan.kernel.__name__).split(".")[-1],
            _dims(plan.grid), _dims(plan.block), tables)


def _dims(value) -> tuple:
    """(x, y, z) of a launch dimension given as an int or a tuple."""
    value = tuple(int(v) for v in value) if hasattr(value, "__iter__") else (int(value),)
    return value + (1,) * (3 - len(value))


def _control_plan(name: str, tokens: int, hidden: int):
    from .. import controls

    entry = controls.KERNELS[name]
    grid, threads, _ = entry.config(tokens, hidden)
    return entry.fn.__name__, _dims(grid), _dims(threads), 0


def _fused_plan(name: str, shape: str, dtype: str):
    """(census kernel name, grid, block, table bytes) of the fused kernel, or None."""
    from ... import kernels, reference
    from ...problem import FusedProblem
    from ...shapes import PRODUCTION_SHAPES

    s = PRODUCTION_SHAPES[shape]
    mode = name.partition(":")[2]
    options = {"cache": True, "max_positions": s.tokens} if mode == "cache" else {}
    problem = FusedProblem(s.tokens, s.heads_q, s.heads_k, s.heads_v, s.head_dim, s.rotary_dim,
                           mode != "neox", dtype, 1e-6, 10000.0,
                           inv_freq=reference.inv_freq(s.rotary_dim, 10000.0))
    (variant,) = kernels.FUSED.values()
    plan = variant.plan(problem, options)
    tables = sum(int(t.nbytes) for t in plan.tables)
    return (getattr(plan.kernel, "__qualname__", plan.kernel.__name__).split(".")[-1],
            _dims(plan.grid), _dims(plan.block), tables)


def gather() -> tuple[list[Row], list[str], dict]:
    """(rows, skipped keys with the reason, {kind: (record meta, file name)})."""
    registered, controlled = census_rows(), control_census()
    # The SASS load schedule is in the controls' census only; a registered kernel that is also a
    # control's reference (flat, block2d, pack4, pack4_scalar) takes it from there.
    schedules = {r["kernel"]: r["sass_schedule"] for r in controlled.values()
                 if r.get("sass_schedule")}
    rows, skipped, used = [], [], {}
    for kind in SOURCE_KINDS:
        record, path = newest(kind)
        used[kind] = (record["meta"], path.name)
        copies = _copies(record)
        for r in record["rows"]:
            name = r.get("variant", r.get("entry"))
            family = r.get("family", r.get("role"))
            if family not in ("ropelab", "ropelab_fused", "reference", "control", "roof") \
                    or name == "copy_d2d":
                continue
            dtype = r.get("dtype") or "float32"
            key = f"{name}@{r['shape']}:{dtype}"
            try:
                if kind == "controls":
                    kernel, grid, block, tables = _control_plan(name, r["tokens"], r["hidden"])
                    census = dict(registered.get(kernel, {}), **controlled[name])
                elif kind == "bench":
                    if family != "ropelab":
                        continue
                    kernel, grid, block, tables = _plain_plan(name, r["tokens"], r["hidden"])
                    census = dict(registered[kernel])
                    if kernel in schedules:
                        census["sass_schedule"] = schedules[kernel]
                else:
                    kernel, grid, block, tables = _fused_plan(name, r["shape"], dtype)
                    census = dict(registered[kernel])
            except KeyError as exc:
                skipped.append(f"{key}: no census of its kernel ({exc})")
                continue
            rows.append(Row(name, kind, r["shape"], dtype, int(r["bytes_moved"]),
                            float(r["median_us"]), copies[(r["shape"], dtype)], census,
                            grid, block, tables, {"function": kernel}))
    return rows, skipped, used
