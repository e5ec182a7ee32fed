"""``python -m ropelab bench``: run the sweep on a GPU and record it, or show a recorded run."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import baselines as bl
from .. import charts, records
from .kinds import format_rows
from .overhead import launch_overhead, overhead_method
from .record import Recording, method_text, run_meta, save
from .shapes import shapes_for
from .sweeper import plan, sweep, target_summary
from .timer import Timer, refused


def _kind_dir(root, kind):
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
        print(format_rows(over["rows"], "launch_overhead"))
    except FileNotFoundError:
        pass
    if charts_dir:
        for path in charts.save_all(rec, charts_dir):
            print(f"wrote {path}")
    return 0


def _overhead(out, meta=None) -> None:
    rows = launch_overhead()
    print(format_rows(rows, "launch_overhead"))
    path = save("launch_overhead", rows, method=overhead_method(rows[0]["launches"]), meta=meta,
                out=out)
    print(f"recorded {path}")


def run_cli(args) -> int:
    """``python -m ropelab bench``: sweep, record, chart; refuse under the simulator."""

    if args.recorded:
        return show_recorded(args.out, args.charts_dir)
    if refused("ropelab bench"):
        return 2
    if args.overhead_only:
        _overhead(args.out)
        return 0

    groups = [g.strip() for g in args.shapes.split(",") if g.strip()]
    shapes = shapes_for(groups)
    timer = Timer(warmup=args.warmup, repeats=args.repeats)
    entries = plan(args.variant or None, baselines=not args.no_baselines, precise=args.precise)
    meta = run_meta(timer, **{f"{k}_version": v for k, v in bl.available().items()})
    recording = Recording(args.kind, method=method_text(timer), meta=meta, out=args.out)
    # Saved after each group of entries, into this run's one file.
    result = sweep(shapes, entries, timer=timer, budget_s=args.budget_s,
                   on_group_done=recording.save)
    print(format_rows(result.rows))
    for name, shape, reason in result.skipped:
        print(f"skipped {name} on {shape}: {reason}")
    if recording.path:
        print(f"recorded {recording.path}")
    if not args.no_overhead:
        _overhead(args.out, meta)
    if not args.no_charts and recording.path:
        rec = records.load("bench", _kind_dir(args.out, "bench"))
        for path in charts.save_all(rec, args.charts_dir or recording.path.parent / "charts"):
            print(f"wrote {path}")
    return 0
