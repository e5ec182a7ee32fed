"""Command line: ``python -m ropelab {info,check,census,bench,precision,profile,exercises,
progress}``."""

from __future__ import annotations

import argparse
import sys


def _info(args) -> int:
    from . import format_description

    print(format_description())
    return 0


# Exit statuses: 0 ok, 1 a check failed, 2 the command itself was used wrongly (argparse's
# convention), so scripts can tell "the kernels are wrong" from "the call was wrong".
USAGE_ERROR = 2


def _records_need_a_checkout(command: str, wants_default_data: bool) -> bool:
    """True (after saying why, in one line) when ``command`` would write into data/ that an
    installed ropelab does not have: refused before anything is measured, not after."""
    from . import resources

    if not wants_default_data or resources.in_checkout():
        return False
    print(f"ropelab {command}: {resources.NEEDS_CHECKOUT} (--out DIR)", file=sys.stderr)
    return True


def _check(args) -> int:
    from . import kernels
    from .check import format_header, format_row, format_summary, run_checks

    known = set(kernels.VARIANTS) | set(kernels.FUSED)
    unknown = [v for v in (args.variant or []) if v not in known]
    if unknown:
        print(f"ropelab check: unknown variant {', '.join(map(repr, unknown))}; choose from "
              f"{', '.join(sorted(known))}", file=sys.stderr)
        return USAGE_ERROR
    print(format_header(), flush=True)  # each row as it finishes: a simulator run takes a while
    rows = run_checks(variants=args.variant or None, fastmath=not args.precise,
                      on_row=lambda row: print(format_row(row), flush=True))
    print(format_summary(rows))
    return 0 if all(r.passed for r in rows) else 1


def _census(args) -> int:
    from .measure.census import run_cli

    if _records_need_a_checkout("census --save", args.save == ""):
        return USAGE_ERROR

    return run_cli(args)


def _bench(args) -> int:
    from .measure.bench import run_cli

    if _records_need_a_checkout("bench", not args.recorded and args.out is None):
        return USAGE_ERROR

    return run_cli(args)


def _precision(args) -> int:
    from .measure.precision import record_precision
    from .measure.records import RecordError

    if _records_need_a_checkout("precision", args.out is None):
        return USAGE_ERROR
    try:
        result = record_precision(args.out, max_position=args.max_position,
                                  samples_per_bucket=args.samples)
    except RecordError as exc:  # the simulator: nothing measured, nothing written
        print(f"ropelab precision: {exc}", file=sys.stderr)
        return 2
    for v in result["verdict"]:
        print(f"{v['variant']:<18} {v['options']:<18} {v['scaling']:<7} "
              f"fastmath={str(v['fastmath']):<5} worst {v['worst_rel_err']:.2e} x max|x|  {v['advice']}")
    for line in result["skipped"]:
        print("skipped:", line)
    for kind in ("precision", "freq_drift", "sincos_error"):
        print(f"recorded {kind}: {result[kind]}")
    return 0


def _profile(args) -> int:
    from .measure.profile import run_cli

    measuring = not (getattr(args, "list", False) or getattr(args, "recorded", False))
    if _records_need_a_checkout("profile", measuring and args.out is None):
        return USAGE_ERROR

    return run_cli(args)


def _add_profile(sub) -> None:
    from .measure.profile import add_arguments

    p = sub.add_parser("profile", help="Nsight Compute counters of every kernel, on the GPU; recorded")
    add_arguments(p)
    p.set_defaults(func=_profile)


def _exercises(args) -> int:
    from . import SIMULATED
    from .grader import steps, verify

    if args.time:
        if SIMULATED:
            print("ropelab exercises --time: no GPU in this process; nothing to time",
                  file=sys.stderr)
            return 2
        return 0 if verify.time_solutions() else 1
    if args.heldout:
        if args.verify or args.notebook:
            print("ropelab exercises: --heldout grades the held-out sets alone (no --verify, "
                  "no --notebook)", file=sys.stderr)
            return USAGE_ERROR
        if _records_need_a_checkout("exercises --heldout --save-census", args.save_census):
            return USAGE_ERROR
        from .grader import heldout

        return 0 if heldout.run(save_census=args.save_census) else 1
    if not args.verify:
        print(steps.listing())
        return 0
    if _records_need_a_checkout("exercises --save-census", args.save_census):
        return USAGE_ERROR
    if args.notebook and args.save_census:  # the cache is rewritten from what this run used
        print("ropelab exercises: --save-census needs the whole course (no --notebook)",
              file=sys.stderr)
        return USAGE_ERROR
    known = verify.ladder.notebooks()
    unknown = [n for n in args.notebook or () if n not in known]
    if unknown:
        print(f"ropelab exercises: no notebook {', '.join(map(repr, unknown))}; choose from "
              f"{', '.join(known)}", file=sys.stderr)
        return USAGE_ERROR
    return 0 if verify.run(save_census=args.save_census, notebooks=args.notebook) else 1


def _progress(args) -> int:
    from .grader import steps

    if args.reset:
        steps.reset_progress()
    else:
        print(steps.progress())
    return 0


def _add_measuring(sub) -> None:
    p = sub.add_parser("census", help="PTX instruction census of every kernel (no GPU needed)")
    p.add_argument("--sass", action="store_true", help="also count SASS (nvJitLink + nvdisasm)")
    p.add_argument("--no-cache", action="store_true", help="recompile even if a cached census matches")
    p.add_argument("--json", action="store_true", help="print the census as JSON")
    p.add_argument("--save", nargs="?", const="", default=None, metavar="PATH",
                   help="write the census JSON (default data/census/census.json)")
    p.set_defaults(func=_census)
    from .measure.bench.kinds import BENCH, BENCH_FUSED, BENCH_ROWS
    from .measure.bench.shapes import GROUPS

    p = sub.add_parser("bench", help="time kernels and baselines on the GPU and record them")
    p.add_argument("--variant", action="append", help="only this ropelab variant, or one fused "
                   "row by name such as fused_qknorm_rope:neox (fused_qknorm_rope:default: the "
                   "public call at its defaults; repeatable)")
    p.add_argument("--kind", default=BENCH.kind,
                   choices=(BENCH.kind, BENCH_FUSED.kind, BENCH_ROWS.kind),
                   help=f"record kind: {BENCH.kind} (default), {BENCH_FUSED.kind} (a fused-only "
                        f"run) or {BENCH_ROWS.kind} (plain RoPE as models call it: --shapes rows)")
    p.add_argument("--shapes", default="all",
                   help=f"comma list of {', '.join(GROUPS)}, all (all: seed, big, production)")
    p.add_argument("--repeats", type=int, default=50, help="timed repeats per row (default 50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed launches first (default 5)")
    p.add_argument("--no-baselines", action="store_true", help="skip torch / CuPy baselines")
    p.add_argument("--precise", action="store_true", help="also time builds without fast-math")
    p.add_argument("--budget-s", type=float, default=None, help="start no row after this many s")
    p.add_argument("--no-overhead", action="store_true", help="skip the launch-overhead table")
    p.add_argument("--overhead-only", action="store_true", help="only the launch-overhead table")
    p.add_argument("--no-charts", action="store_true", help="do not draw PNG charts")
    p.add_argument("--charts-dir", default=None, help="where charts go (default data/bench/charts)")
    p.add_argument("--out", default=None, help="data root for records (default the repo's data/)")
    p.add_argument("--recorded", action="store_true",
                   help="print the newest recorded run instead of measuring (works anywhere)")
    p.set_defaults(func=_bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ropelab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="where kernels run: GPU or simulator, and versions")
    p.set_defaults(func=_info)
    p = sub.add_parser("check", help="run every kernel against the float64 reference")
    p.add_argument("--variant", action="append", help="only this variant (repeatable)")
    p.add_argument("--precise", action="store_true", help="compile without fast-math")
    p.set_defaults(func=_check)
    _add_measuring(sub)
    p = sub.add_parser("precision", help="error vs position for every kernel, on the GPU; recorded")
    p.add_argument("--out", default=None, help="data root for records (default the repo's data/)")
    p.add_argument("--max-position", type=int, default=131072, help="largest position (131072)")
    p.add_argument("--samples", type=int, default=128, help="positions per power-of-two bucket")
    p.set_defaults(func=_precision)
    _add_profile(sub)
    p = sub.add_parser("exercises", help="the course's graded steps, per notebook; --verify "
                                         "grades the solutions and recorded wrong attempts")
    p.add_argument("--verify", action="store_true",
                   help="solutions must pass, wrong attempts must be rejected with their message")
    p.add_argument("--notebook", action="append", metavar="NN",
                   help="with --verify: only this notebook's steps, e.g. 01 (repeatable)")
    p.add_argument("--heldout", action="store_true",
                   help="grade the held-out learners' kernels (data/heldout): each must get "
                        "the verdict expected of it")
    p.add_argument("--save-census", action="store_true",
                   help="with --verify: write the census cache data/census/exercises.json; "
                        "with --heldout: data/census/heldout.json")
    p.add_argument("--time", action="store_true",
                   help="GPU only: grade every solution on the GPU, timed against a device copy")
    p.set_defaults(func=_exercises)
    p = sub.add_parser("progress", help="the course steps you have passed, per notebook (kept "
                                        "on this machine)")
    p.add_argument("--reset", action="store_true", help="forget them, and the hint levels seen")
    p.set_defaults(func=_progress)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
