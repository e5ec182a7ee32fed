"""Time the controlled kernels against their references: ``python -m ropelab.measure.timing``.

Each entry of :data:`ropelab.measure.controls.KERNELS` (references, controls, the 128-bit copy
kernel) and the copy engine's device-to-device copy is timed on each shape with the bench's
:class:`ropelab.measure.bench.Timer`: an L2-evicting fill before every timed launch, CUDA events around
the launch.  The entries take turns: ``rounds`` times, every entry gets ``repeats`` launches,
so a slow drift of clocks or temperature spreads over all of them instead of favouring the
entries timed first.  Each row's ``vs_reference`` is its median over the median of the entry
it controls for (same shape, same run); ``vs_reference_lo``/``hi`` are the smallest and largest
ratio of the per-round medians, an honest spread for the ratio.

Recorded under ``data/controls/`` (one file per run, :func:`ropelab.measure.records.save`).  GPU only.
"""

from __future__ import annotations

import sys

from . import controls

KIND = "controls"
SHAPES = ((4096, 512), (8192, 1024), (32768, 4096))
COPY = "copy_d2d"
COLUMNS = ("entry", "role", "question", "reference", "shape", "tokens", "hidden", "bytes_moved",
           "median_us", "p20_us", "p80_us", "repeats", "gbps", "copy_gbps", "frac_of_copy",
           "vs_reference", "vs_reference_lo", "vs_reference_hi", "host_us", "fill_us", "host_bound")


def entries_for(tokens: int, hidden: int, names=None) -> list[str]:
    return [n for n in controls.KERNELS if (names is None or n in names)
            and controls.applies(n, tokens, hidden)]


def _reference(name: str) -> str | None:
    if name == COPY:
        return None
    e = controls.KERNELS[name]
    return COPY if e.role == "roof" else e.reference


def time_shape(tokens: int, hidden: int, timer, *, rounds: int, repeats: int, names=None) -> list[dict]:
    """Rows for one shape: every applicable entry plus the copy, interleaved over ``rounds``."""
    from .bench import Buffers, host_fields, plain_shape, quantiles, summarize

    shape = plain_shape(tokens, hidden)
    buf = Buffers(shape)
    launches = {COPY: buf.copy}
    for name in entries_for(tokens, hidden, names):
        launches[name] = controls.make_launch(name, tokens, hidden, buf.x, buf.out, buf.positions)
    samples = {n: [] for n in launches}
    per_round = {n: [] for n in launches}
    host = {n: [] for n in launches}
    for _ in range(rounds):
        for name, launch in launches.items():
            got = timer.time(launch, repeats=repeats)
            samples[name] += got
            per_round[name].append(quantiles(got)[0])
            host[name] += list(getattr(timer, "last_host_us", []) or [])
    copy_rate = shape.bytes_moved / quantiles(samples[COPY])[0] / 1e3  # bytes per us -> GB/s
    median = {n: quantiles(s)[0] for n, s in samples.items()}
    rows = []
    for name in launches:
        ref = _reference(name)
        e = controls.KERNELS.get(name)
        ratios = ([a / b for a, b in zip(per_round[name], per_round[ref])]
                  if ref in per_round else [])
        row = {"entry": name, "role": e.role if e else "roof", "question": e.question if e else "roof",
               "reference": ref, "shape": shape.label, "tokens": tokens, "hidden": hidden,
               **summarize(samples[name], shape.bytes_moved, copy_rate),
               "vs_reference": round(median[name] / median[ref], 4) if ref in median else None,
               "vs_reference_lo": round(min(ratios), 4) if ratios else None,
               "vs_reference_hi": round(max(ratios), 4) if ratios else None,
               **host_fields(host[name], getattr(timer, "fill_us", None))}
        rows.append({c: row[c] for c in COLUMNS})
    return rows


def method_text(timer, rounds: int, repeats: int) -> str:
    from .bench import method_text as bench_method

    return (f"{rounds} rounds; in each, every entry gets {repeats} timed launches in turn (drift "
            f"spreads over all entries); vs_reference = median / median of the reference entry "
            f"(same shape, same run), lo/hi = min/max of the per-round median ratios. Launches: "
            f"ropelab.measure.controls.make_launch (arguments built once, the dispatcher called "
            f"directly) for references and controls alike. Timer: "
            + bench_method(timer.l2_bytes, timer.flush_bytes, timer.warmup, repeats))


def format_rows(rows: list[dict]) -> str:
    head = (f"{'entry':<24} {'shape':<11} {'median us':>10} {'of copy':>8} {'vs':<22} "
            f"{'ratio':>6} {'round lo-hi':>13} {'host us':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = "" if r["vs_reference"] is None else f"{r['vs_reference']:.3f}"
        spread = ("" if r["vs_reference_lo"] is None
                  else f"{r['vs_reference_lo']:.3f}-{r['vs_reference_hi']:.3f}")
        frac = "" if r["frac_of_copy"] is None else f"{100 * r['frac_of_copy']:.1f}%"
        host = "" if r["host_us"] is None else f"{r['host_us']:.0f}{'!' if r['host_bound'] else ''}"
        lines.append(f"{r['entry']:<24} {r['shape']:<11} {r['median_us']:>10.2f} {frac:>8} "
                     f"{r['reference'] or '-':<22} {ratio:>6} {spread:>13} {host:>8}")
    return "\n".join(lines)


def main(argv=None) -> int:
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m ropelab.measure.timing", description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default=",".join(f"{t}x{h}" for t, h in SHAPES),
                   help="comma list of TOKENSxHIDDEN (default %(default)s)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--repeats", type=int, default=10, help="timed launches per entry per round")
    p.add_argument("--only", default=None, help="comma list of entries (default all)")
    p.add_argument("--out", default=None, help="data root (default the repo's data/)")
    args = p.parse_args(argv)

    from . import records
    from .bench import BenchError, Timer, require_gpu

    try:
        require_gpu()
    except BenchError as exc:
        print(f"ropelab.measure.timing: {exc}", file=sys.stderr)
        return 2
    shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",") if s]
    names = args.only.split(",") if args.only else None
    timer = Timer(warmup=3, repeats=args.repeats)
    meta = records.metadata()
    meta.update(l2_bytes=timer.l2_bytes, flush_bytes=timer.flush_bytes,
                command="python -m ropelab.measure.timing " + " ".join(argv if argv is not None else sys.argv[1:]),
                census_key=controls.cache_key())
    rows, path = [], None
    for tokens, hidden in shapes:
        rows += time_shape(tokens, hidden, timer, rounds=args.rounds, repeats=args.repeats, names=names)
        print(format_rows([r for r in rows if r["tokens"] == tokens and r["hidden"] == hidden]), flush=True)
        # Saved after every shape (a timeout keeps what finished), into this run's one file.
        path = records.save(KIND, rows, method=method_text(timer, args.rounds, args.repeats), meta=meta,
                          directory=Path(args.out) / KIND if args.out else None, replace=path)
    print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
