"""The units a warp loads per pass (``backward.UNITS_PER_PASS``) that the sweep found fastest.

Reads the backward bench records of ``scripts/gpu_backward_units.sh``'s sweep
(``ropelab:bwd:kernel:uU`` rows: each build on its own one-wave grid) and prints the U whose
geometric mean of median times over every shape, layout and dtype it was timed on is least;
with ``--table``, every U's geometric mean and each ``uU:blocksN`` cap beside it (stderr).

    python scripts/pick_backward_units.py RECORD.json [RECORD.json ...] [--table]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict

ROW = re.compile(r"^ropelab:bwd:kernel:u(\d+)(?::blocks(\d+))?$")


def geomeans(paths: list[str]) -> dict[tuple[int, int | None], float]:
    """``(U, blocks cap or None) -> geometric mean of median_us`` over the cases timed for every
    build (a case missing for one build is left out for all, so the means compare like with like)."""
    times: dict[tuple, dict[tuple, float]] = defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for row in json.load(f)["rows"]:
                m = ROW.match(row["entry"])
                if m and row["median_us"]:
                    key = (int(m[1]), int(m[2]) if m[2] else None)
                    times[key][(row["shape"], row["layout"], row["dtype"])] = row["median_us"]
    if not times:
        raise SystemExit("no ropelab:bwd:kernel:uU rows in " + ", ".join(paths))
    common = set.intersection(*(set(t) for t in times.values()))
    if not common:
        raise SystemExit("no shape, layout and dtype was timed for every build")
    return {k: math.exp(sum(math.log(t[c]) for c in common) / len(common))
            for k, t in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+")
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args(argv)
    means = geomeans(args.records)
    own = {u: t for (u, cap), t in means.items() if cap is None}
    if args.table:
        for (u, cap), t in sorted(means.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
            print(f"u{u} {'one wave' if cap is None else f'blocks{cap}':>9}  {t:8.2f} us",
                  file=sys.stderr)
    if not own:
        raise SystemExit("no build was timed on its own one-wave grid (only capped rows)")
    print(min(own, key=own.get))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
