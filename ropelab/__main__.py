"""Command line: ``python -m ropelab {info,check}``."""

from __future__ import annotations

import argparse
import sys


def _info(args) -> int:
    from . import format_description

    print(format_description())
    return 0


def _check(args) -> int:
    from .check import format_rows, run_checks

    rows = run_checks(variants=args.variant or None, fastmath=not args.precise)
    print(format_rows(rows))
    return 0 if all(r.passed for r in rows) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ropelab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="where kernels run: GPU or simulator, and versions")
    p.set_defaults(func=_info)
    p = sub.add_parser("check", help="run every kernel against the float64 reference")
    p.add_argument("--variant", action="append", help="only this variant (repeatable)")
    p.add_argument("--precise", action="store_true", help="compile without fast-math")
    p.set_defaults(func=_check)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
