"""``python -m ropelab profile``: list the cases, record a profile on a GPU, or show one."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .. import cases as _cases
from .ncu import record_profile
from .parse import KIND, ProfileError
from .report import load, profile_table


def add_arguments(p) -> None:
    p.add_argument("--groups", default=",".join(_cases.GROUPS),
                   help=f"comma list of {', '.join(_cases.GROUPS)} (default all)")
    p.add_argument("--only", default=None, metavar="REGEX", help="only cases whose id matches")
    p.add_argument("--ncu", default=None, help="path to ncu (default: PATH, then /usr/local/cuda*/bin)")
    p.add_argument("--reports", default=None, help="where .ncu-rep, raw CSV and logs go "
                   "(default data/profile/reports, git-ignored)")
    p.add_argument("--out", default=None, help="data root for the record (default the repo's data/)")
    p.add_argument("--timeout-s", type=float, default=240.0, help="limit per ncu run (default 240)")
    p.add_argument("--list", action="store_true", help="print the cases and exit (works anywhere)")
    p.add_argument("--recorded", action="store_true",
                   help="print the newest recorded profile instead of profiling (works anywhere)")


def run_cli(args) -> int:
    from .. import records
    from ...target import SIMULATED

    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    if args.list:
        for c in _cases.plan(groups):
            if not args.only or re.search(args.only, c["id"]):
                print(f"{c['group']:<9} {c['id']}")
        return 0
    if args.recorded:
        try:
            print(profile_table(load(Path(args.out) / KIND if args.out else None), args.only))
        except FileNotFoundError as exc:
            print(f"ropelab profile: {exc}", file=sys.stderr)
            return 1
        return 0
    if SIMULATED:
        print("ropelab profile: needs an NVIDIA GPU and Nsight Compute; the simulator has no hardware "
              "counters (see the recorded profile: python -m ropelab profile --recorded)",
              file=sys.stderr)
        return 2
    try:
        path = record_profile(groups, only=args.only, ncu=args.ncu, reports=args.reports,
                              out=args.out, timeout_s=args.timeout_s,
                              log=lambda s: print(s, file=sys.stderr, flush=True),
                              command=" ".join(["python -m ropelab"] + sys.argv[1:]))
    except (ProfileError, records.RecordError) as exc:
        print(f"ropelab profile: {exc}", file=sys.stderr)
        return 1
    rec = json.loads(path.read_text())
    print(profile_table(rec))
    for group, s in rec["meta"]["groups"].items():
        if s.get("error"):
            print(f"group {group}: {s['error']}", file=sys.stderr)
    print(f"recorded {path}")
    return 0 if all(not s.get("error") for s in rec["meta"]["groups"].values()) else 1
