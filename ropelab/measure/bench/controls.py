"""The controlled kernels timed against their references, on the GPU.

``python -m ropelab.measure.bench.controls [--shapes 4096x512,...] [--rounds N]`` times each
entry of :data:`ropelab.measure.controls.KERNELS` (references, controls, the 128-bit copy
kernel) and the copy engine's device-to-device copy on each shape with the bench's
:class:`~.timer.Timer`: an L2-evicting fill before every timed launch, CUDA events around the
launch.  The entries take turns: ``rounds`` times, every entry gets ``repeats`` launches,
so a slow drift of clocks or temperature spreads over all of them instead of favouring the
entries timed first.  Each row's ``vs_reference`` is its median over the median of the entry
it controls for (same shape, same run); ``vs_reference_lo``/``hi`` are the smallest and largest
ratio of the per-round medians, an honest spread for the ratio.

Recorded under ``data/controls/`` (one file per run, saved again after each shape).  GPU only.
"""

from __future__ import annotations

import sys

from .. import controls
from .entries import Buffers
from .kinds import CONTROLS, format_rows
from .record import Recording, method_text, run_meta
from .shapes import plain_shape
from .stats import host_fields, quantiles, summarize

KIND = CONTROLS.kind
SHAPES = ((4096, 512), (8192, 1024), (32768, 4096))
COPY = "copy_d2d"


def notes(rounds: int, repeats: int) -> tuple[str, ...]:
    """What a controls record's method adds to the timer's protocol."""
    return (f"{rounds} rounds; in each, every entry gets {repeats} timed launches in turn (drift "
            f"spreads over all entries)",
            "vs_reference = median / median of the reference entry (same shape, same run), "
            "lo/hi = min/max of the per-round median ratios",
            "launches: ropelab.measure.controls.make_launch (arguments built once, the "
            "dispatcher called directly) for references and controls alike")


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
        rows.append(CONTROLS.row(
            summarize(samples[name], shape.bytes_moved, copy_rate),
            **host_fields(host[name], getattr(timer, "fill_us", None)),
            entry=name, role=e.role if e else "roof", question=e.question if e else "roof",
            reference=ref, shape=shape.label, tokens=tokens, hidden=hidden,
            vs_reference=round(median[name] / median[ref], 4) if ref in median else None,
            vs_reference_lo=round(min(ratios), 4) if ratios else None,
            vs_reference_hi=round(max(ratios), 4) if ratios else None))
    return rows


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ropelab.measure.bench.controls",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default=",".join(f"{t}x{h}" for t, h in SHAPES),
                   help="comma list of TOKENSxHIDDEN (default %(default)s)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--repeats", type=int, default=10, help="timed launches per entry per round")
    p.add_argument("--only", default=None, help="comma list of entries (default all)")
    p.add_argument("--out", default=None, help="data root (default the repo's data/)")
    args = p.parse_args(argv)

    from .timer import Timer, refused

    if refused(p.prog):
        return 2
    shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",") if s]
    names = args.only.split(",") if args.only else None
    timer = Timer(warmup=3, repeats=args.repeats)
    command = "python -m ropelab.measure.bench.controls " + " ".join(
        argv if argv is not None else sys.argv[1:])
    meta = run_meta(timer, command=command, census_key=controls.cache_key())
    recording = Recording(KIND, method=method_text(timer, *notes(args.rounds, args.repeats),
                                                   repeats=args.repeats),
                          meta=meta, out=args.out)
    rows = []
    for tokens, hidden in shapes:
        rows += time_shape(tokens, hidden, timer, rounds=args.rounds, repeats=args.repeats, names=names)
        print(format_rows([r for r in rows if r["tokens"] == tokens and r["hidden"] == hidden],
                          KIND), flush=True)
        recording.save(rows)  # after every shape: a timeout keeps what finished
    print(f"recorded {recording.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
