"""Bench of the fused QK-RMSNorm + RoPE backward: one GPU run, recorded in
``data/bench_backward/``.

``python -m ropelab.measure.bench.backward [--shapes flux_1024,...] [--repeats N]`` times, on
the production shapes in bfloat16 (flux_1024, qwen_image_1024, zimage_1024), in both layouts:

* ``copy``: a device copy of the qkv rows; its GB/s is every row's roof;
* ``ropelab:fwd+bwd``: what autograd runs through ``ropelab.torch_ops``: the functional forward
  in one pass (``fused_qknorm_rope(qkv, out=out)``: read ``qkv``, write the result) and the
  backward (two-stage weight gradient);
* ``ropelab:bwd`` and ``ropelab:bwd:atomic``: the backward alone through the public function;
* ``ropelab:bwd:kernel`` and ``ropelab:bwd:kernel:atomic``: the backward's launches alone,
  pre-bound (no host checks: what the kernels cost); ``ropelab:fwd+bwd:kernel`` the same inside
  autograd's sequence; ``ropelab:bwd:kernel:uU`` each warp loading U units before it computes
  any, on that build's one-wave grid, and ``ropelab:bwd:kernel:uU:blocksN`` its grid capped at
  N blocks (a sweep);
* ``torch.compile:fwd+bwd`` and ``torch.compile:bwd``: the same math in PyTorch (float32
  math on bfloat16 storage), compiled, differentiated by autograd (buffer donation off, see
  :func:`.backward_calls.compiled_pair`);
* ``liger:fwd+bwd`` and ``liger:bwd`` (NeoX only; Liger's RoPE has no GPT-J layout):
  Liger-Kernel's RMSNorm then RoPE, chained; skipped with the reason when ``liger_kernel`` is
  not installed;
* ``determinism:two_stage`` / ``determinism:atomic``: the weight gradient of ``RUNS`` backward
  runs on the same inputs, compared bit for bit with the first (rows that differ, largest
  difference).

**The bytes each row must move** (:func:`bytes_for`), per token, with ``row`` the bytes of one
qkv row and ``qk`` those of its Q and K heads: the backward reads ``dy`` (the row) and ``x``
(Q and K) and writes ``dx`` (the row): ``2 row + qk``; an out-of-place forward reads and writes
the row: ``2 row``; together ``4 row + qk``.  ``frac_of_copy`` is that count over the row's
time divided by the copy's rate: the share of the copy roof the row reaches.  (Records before
2026-12-07 timed the forward of an older autograd path, a copy of ``qkv`` then the kernel in
place on the copy, ``2 row + 2 qk``: their ``fwd+bwd`` rows moved more than the count.)
"""

from __future__ import annotations

import argparse
import sys

from ...shapes import PRODUCTION_SHAPES
from . import backward_calls as calls
from .kinds import BENCH_BACKWARD, TIMING, format_rows
from .record import method_text, save
from .stats import gbps, quantiles, summarize

SHAPES = ("flux_1024", "qwen_image_1024", "zimage_1024")
DTYPE, ITEMSIZE = "bfloat16", 2
BLOCK_CAPS = (264, 396, 528, 660, 792)  # the grid's cap swept: 2 .. 6 blocks an H200 SM
UNITS_SWEEP = (1, 2, 3, 4)  # units a warp loads before it computes (the kernel's units_per_pass)


def bytes_for(part: str, shape, itemsize: int) -> int:
    """Bytes a ``part`` ("backward", "forward", "forward+backward", "copy") must move."""
    row = shape.tokens * shape.row * itemsize
    qk = shape.tokens * (shape.heads_q + shape.heads_k) * shape.head_dim * itemsize
    return {"backward": 2 * row + qk, "forward": 2 * row, "forward+backward": 4 * row + qk,
            "copy": 2 * row}[part]


def make_row(entry, shape, layout, dtype, part, itemsize, samples_us, copy_gbps, *,
             runs_differing=None, max_abs_diff=None, note="") -> dict:
    """One row; without samples (a skipped entry, a determinism row) its times are None."""
    moved = bytes_for(part, shape, itemsize)
    if samples_us:
        timing = summarize(samples_us, moved, copy_gbps, rounded=False)
    else:
        timing = dict.fromkeys(TIMING, None) | {"bytes_moved": moved, "repeats": 0,
                                                 "copy_gbps": copy_gbps}
    return BENCH_BACKWARD.row(timing, entry=entry, shape=shape.name, layout=layout, dtype=dtype,
                              part=part, runs_differing=runs_differing,
                              max_abs_diff=max_abs_diff, note=note)


def _todo(arrays, shape, interleave: bool) -> list[tuple]:
    """``(entry, part, make)`` for one layout; ``make()`` returns the launcher to time."""
    a = (arrays, shape, interleave)
    todo = [("ropelab:fwd+bwd", "forward+backward", lambda: calls.ropelab_forward_backward(*a)),
            ("ropelab:bwd", "backward", lambda: calls.ropelab_backward(*a)),
            ("ropelab:bwd:atomic", "backward", lambda: calls.ropelab_backward(*a, "atomic")),
            ("ropelab:bwd:kernel", "backward", lambda: calls.ropelab_backward_kernel(*a)),
            ("ropelab:bwd:kernel:atomic", "backward",
             lambda: calls.ropelab_backward_kernel(*a, "atomic")),
            ("ropelab:fwd+bwd:kernel", "forward+backward",
             lambda: calls.ropelab_forward_backward(*a, kernel=True))]
    # Bytes in flight: warps resident (fewer blocks, fewer warps; more blocks than fit, a
    # second partial wave) times the units each loads at once (more registers, fewer blocks fit).
    for u in UNITS_SWEEP:  # each build at its own one-wave grid, then capped
        todo.append((f"ropelab:bwd:kernel:u{u}", "backward",
                     lambda u=u: calls.ropelab_backward_kernel(*a, units_per_pass=u)))
        todo += [(f"ropelab:bwd:kernel:u{u}:blocks{b}", "backward",
                  lambda b=b, u=u: calls.ropelab_backward_kernel(*a, max_blocks=b,
                                                                 units_per_pass=u))
                 for b in BLOCK_CAPS]
    return todo


def _pairs(arrays, shape, interleave: bool, rows: list, copy_gbps: float, layout: str) -> list:
    """torch.compile's (and, NeoX only, Liger's) fwd+bwd and bwd entries; a pair that cannot be
    built becomes two skipped rows that say why."""
    pairs = [("torch.compile", lambda: calls.compiled_pair(arrays, shape, interleave))]
    if not interleave:  # Liger's RoPE has no GPT-J layout
        pairs.append(("liger", lambda: calls.liger_pair(arrays, shape)))
    todo = []
    for label, make in pairs:
        try:
            both, bwd = make()
        except Exception as exc:  # a missing package or feature: say so in the record
            note = f"skipped: {type(exc).__name__}: {exc}"[:200]
            for name, part in (("fwd+bwd", "forward+backward"), ("bwd", "backward")):
                rows.append(make_row(f"{label}:{name}", shape, layout, DTYPE, part, ITEMSIZE, [],
                                     copy_gbps, note=note))
            continue
        todo += [(f"{label}:fwd+bwd", "forward+backward", lambda b=both: b),
                 (f"{label}:bwd", "backward", lambda b=bwd: b)]
    return todo


def run(shapes=SHAPES, *, repeats: int | None = None, timer=None, progress: bool = True,
        entries: tuple = ()) -> list[dict]:
    """Every row on every shape (GPU only: the timer needs one); ``entries``: only the rows
    whose entry starts with one of these (the copy row always; no determinism rows)."""
    from .entries import Buffers
    from .shapes import Shape
    from .timer import Timer

    timer = timer or Timer()
    rows = []
    for name in shapes:
        shape = PRODUCTION_SHAPES[name]
        copy_shape = Shape(name, shape.tokens, heads_q=shape.row // shape.head_dim, heads_k=0,
                           head_dim=shape.head_dim, dtype=DTYPE, heads_v=0)
        copy = timer.time(Buffers(copy_shape).copy, repeats)  # copies the whole qkv row
        copy_gbps = gbps(bytes_for("copy", shape, ITEMSIZE), quantiles(copy)[0])
        rows.append(make_row("copy", shape, "-", DTYPE, "copy", ITEMSIZE, copy, copy_gbps))
        arrays = calls.inputs(shape, DTYPE)
        for interleave in (True, False):
            layout = "gptj" if interleave else "neox"
            todo = _todo(arrays, shape, interleave)
            # The peers' pairs compile when built: only when a wanted entry is theirs.
            if not entries or any(e.startswith(("torch.compile", "liger")) for e in entries):
                todo += _pairs(arrays, shape, interleave, rows, copy_gbps, layout)
            todo = [t for t in todo if not entries or t[0].startswith(tuple(entries))]
            for entry, part, make in todo:
                try:
                    launch = make()
                    launch()  # compile and warm
                    samples, note = timer.time(launch, repeats), ""
                except Exception as exc:
                    samples, note = [], f"failed: {type(exc).__name__}: {exc}"[:200]
                rows.append(make_row(entry, shape, layout, DTYPE, part, ITEMSIZE, samples,
                                     copy_gbps, note=note))
                if progress:
                    print(f"{name} {layout} {entry}: {rows[-1]['median_us']} us "
                          f"({rows[-1]['frac_of_copy']})", file=sys.stderr)
            for dw in () if entries else ("two_stage", "atomic"):
                differing, worst = calls.bit_differences(
                    calls.ropelab_backward(arrays, shape, interleave, dw))
                rows.append(make_row(f"determinism:{dw}", shape, layout, DTYPE, "backward",
                                     ITEMSIZE, [], copy_gbps, runs_differing=differing,
                                     max_abs_diff=worst,
                                     note=f"{calls.RUNS} runs, dw bits vs run 1"))
    return rows


NOTES = ("bfloat16; bytes_moved per bytes_for(): backward 2 row + qk, forward 2 row, "
         "forward+backward 4 row + qk (row: the qkv rows, qk: their Q and K heads); copy_gbps: a "
         "device copy of the qkv rows",
         "determinism rows: weight gradients of RUNS runs compared bit for bit with run 1",
         "torch.compile rows: buffer donation off (torch._functorch.config.donated_buffer=False), "
         "so the bwd-only row can retain the graph and time the compiled backward alone")


def main(argv=None) -> int:
    from .timer import Timer, refused

    parser = argparse.ArgumentParser(prog="python -m ropelab.measure.bench.backward",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help=f"comma list of {', '.join(PRODUCTION_SHAPES)} (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--entries", default="",
                        help="comma list of entry prefixes: only those rows (e.g. ropelab:bwd:kernel)")
    parser.add_argument("--out", default=None, help="data root (default the repo's data/)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.shapes.split(",") if s not in PRODUCTION_SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}")
    if refused(parser.prog):
        return 2
    timer = Timer()
    entries = tuple(e for e in args.entries.split(",") if e)
    rows = run(args.shapes.split(","), repeats=args.repeats, timer=timer, entries=entries)
    print(format_rows(rows, "bench_backward"))
    notes = NOTES + ((f"only the entries starting with {', '.join(entries)}",) if entries else ())
    print(save("bench_backward", rows, method=method_text(timer, *notes, repeats=args.repeats),
               out=args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
