"""Training rows from the bench's GPU records: ropelab's variants and the controlled kernels.

The newest ``bench`` run (every plain-RoPE variant through the public call, five shapes from
17 MB to 1 GB) and the newest ``controls`` run (each control beside its reference, three
shapes) were timed on the H200 by the same timer as ``verdict.time()`` (cold L2, events, a
busy GPU), each beside a device copy of the same bytes in the same run.  Each row becomes one
launch: the kernel's plan as that run launched it (grid, block, argument types, tables), with
array arguments of the row's shape, described by :mod:`.learner` as any learner's launch is.

Left out, and listed: the bench's ``kernel`` rows (the same kernels without the public call),
the fused kernel's rows (its kernels are built by a factory, which this path does not ship),
and older runs (their kernels may differ from today's code).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...measure import records

DATA_DIR = records.DATA_DIR
SOURCE_KINDS = ("bench", "controls")


def newest(kind: str) -> tuple[dict, Path]:
    """The newest record of ``kind`` and its file."""
    record = records.load(kind)
    stamp = record["meta"]["date"]
    for path in sorted((DATA_DIR / kind).glob(f"{kind}-*.json")):
        if json.loads(path.read_text())["meta"]["date"] == stamp:
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
    from ... import kernels
    from ...problem import RopeProblem

    variant, _, mode = name.partition(":")
    options = {}
    if mode == "cache":
        options = {"cache": True, "max_positions": tokens}  # as measure.cases sizes it
    elif mode:
        options = {mode: True}
    return kernels.VARIANTS[variant].plan(RopeProblem(tokens, 1, hidden, hidden), options)


def _control_plan(name: str, tokens: int, hidden: int):
    from ...kernels.plan import Plan
    from ...measure import controls

    e = controls.KERNELS[name]
    grid, threads, scalars = e.config(tokens, hidden)
    f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
    return Plan(e.fn, True, grid, threads, (f32, f32) if e.copy_only else (f32, f32, i32),
                scalars=tuple(np.int64(v) if type(v) is int else v for v in scalars))


def plan_launch(plan, tokens: int, hidden: int):
    """The :class:`.learner.Launch` of ``plan`` on host arrays of a tokens x hidden problem."""
    from ...kernels.plan import dim3, jitted
    from .learner import Launch, light

    arrays = [np.empty(tokens * hidden, dtype=d) if k < 2 else np.empty(tokens, dtype=d)
              for k, d in enumerate(plan.caller)]
    args = arrays + list(plan.tables)
    if plan.errors:
        args.append(np.zeros(1, dtype=np.int32))
    args += list(plan.scalars)
    return Launch(jitted(plan.kernel, plan.fastmath), dim3(plan.grid), dim3(plan.block), 0,
                  [light(a) for a in args])


def recorded_rows(progress=None) -> tuple[list[dict], list[str], dict]:
    """(rows for :func:`.model.fit`, skipped keys with the reason, {kind: (meta, file)})."""
    from . import compiled
    from .learner import NotPredictable, describe, features_of

    pending, skipped, used = [], [], {}
    for kind in SOURCE_KINDS:
        record, path = newest(kind)
        used[kind] = (record["meta"], path.name)
        copies = _copies(record)
        for r in record["rows"]:
            name = r.get("variant", r.get("entry"))
            family = r.get("family", r.get("role"))
            key = f"{name}@{r['shape']}:{kind}"
            if name == "copy_d2d" or (kind == "bench" and family != "ropelab") \
                    or (kind == "controls" and family not in ("reference", "control", "roof")):
                continue
            if (r.get("dtype") or "float32") != "float32":
                skipped.append(f"{key}: not float32")
                continue
            plan = (_control_plan if kind == "controls" else _plain_plan)(
                name, r["tokens"], r["hidden"])
            launch = plan_launch(plan, r["tokens"], r["hidden"])
            try:
                (task,) = describe([launch])
            except NotPredictable as exc:
                skipped.append(f"{key}: {exc}")
                continue
            pending.append((key, name, r, copies[(r["shape"], "float32")], launch, task))
    counted = compiled.compiled([p[-1] for p in pending], progress=progress)
    rows = []
    for (key, name, r, copy, launch, _), c in zip(pending, counted):
        try:
            (f,) = features_of([launch], [c])
        except NotPredictable as exc:
            skipped.append(f"{key}: {exc}")
            continue
        rows.append({"key": key, "family": f"records:{name.partition(':')[0]}",
                     "step": None, "source": "records", "measured_us": float(r["median_us"]),
                     "copy_us": float(copy), "bytes_moved": int(r["bytes_moved"]),
                     "launches": [f]})
    return rows, skipped, used
