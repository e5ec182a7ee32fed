"""``python -m ropelab bench``: run the sweep on a GPU and record it, or show a recorded run."""

from __future__ import annotations

import sys

from .. import baselines as bl
from .. import charts, records
from .entries import plan
from .overhead import OVERHEAD_METHOD, format_overhead, launch_overhead
from .rows import format_rows, shapes_for, target_summary
from .stats import method_text
from .sweeper import sweep
from .timer import BenchError, Timer, require_gpu


def _kind_dir(root, kind):
    from pathlib import Path

    return None if root is None else Path(root) / kind


def show_recorded(root=None, charts_dir=None) -> int:
    """Print the newest recorded bench (and launch-overhead) data; optionally draw charts."""

    try:
        rec = records.load("bench", _kind_dir(root, "bench"))
    except FileNotFoundError as exc:
        print(f"ropelab bench: {exc}", file=sys.stderr)
        return 1
    m = rec["meta"]
    print(f"recorded {m['date']} on {m['gpu']} (cc {m['compute_capability']}, driver "
          f"{m['driver']}, CUDA {m['cuda_driver_api']}), numba {m['numba']}, numba-cuda "
          f"{m['numba_cuda']}, numpy {m['numpy']}")
    print(f"method: {rec['method']}")
    print(format_rows(rec["rows"]))
    for line in target_summary(rec["rows"]):
        print(line)
    try:
        over = records.load("launch_overhead", _kind_dir(root, "launch_overhead"))
        print()
        print(format_overhead(over["rows"]))
    except FileNotFoundError:
        pass
    if charts_dir:

        for path in charts.save_all(rec, charts_dir):
            print(f"wrote {path}")
    return 0


def run_cli(args) -> int:
    """``python -m ropelab bench``: sweep, record, chart; refuse under the simulator."""

    if args.recorded:
        return show_recorded(args.out, args.charts_dir)
    try:
        require_gpu()
    except BenchError as exc:
        print(f"ropelab bench: {exc}", file=sys.stderr)
        return 2
    if args.overhead_only:
        over = launch_overhead()
        print(format_overhead(over))
        path = records.save("launch_overhead", over, method=OVERHEAD_METHOD.format(
            launches=over[0]["launches"], warmup=100), directory=_kind_dir(args.out, "launch_overhead"))
        print(f"recorded {path}")
        return 0

    groups = [g.strip() for g in args.shapes.split(",") if g.strip()]
    shapes = shapes_for(groups)
    timer = Timer(warmup=args.warmup, repeats=args.repeats)
    entries = plan(args.variant or None, baselines=not args.no_baselines, precise=args.precise)
    method = method_text(timer.l2_bytes, timer.flush_bytes, timer.warmup, timer.repeats)
    meta = records.metadata()
    meta.update(l2_bytes=timer.l2_bytes, flush_bytes=timer.flush_bytes,
                **{f"{k}_version": v for k, v in bl.available().items()})
    saved = {}

    def save(rows):
        if rows:
            saved["bench"] = records.save(args.kind, rows, method=method, meta=meta,
                                          directory=_kind_dir(args.out, args.kind),
                                          replace=saved.get("bench"))  # one file per run

    result = sweep(shapes, entries, timer=timer, budget_s=args.budget_s, on_group_done=save)
    print(format_rows(result.rows))
    for name, shape, reason in result.skipped:
        print(f"skipped {name} on {shape}: {reason}")
    if "bench" in saved:
        print(f"recorded {saved['bench']}")
    if not args.no_overhead:
        over = launch_overhead()
        print(format_overhead(over))
        path = records.save("launch_overhead", over, method=OVERHEAD_METHOD.format(
            launches=over[0]["launches"], warmup=100), meta=meta,
            directory=_kind_dir(args.out, "launch_overhead"))
        print(f"recorded {path}")
    if not args.no_charts and "bench" in saved:

        rec = records.load("bench", _kind_dir(args.out, "bench"))
        for path in charts.save_all(rec, args.charts_dir or saved["bench"].parent / "charts"):
            print(f"wrote {path}")
    return 0
