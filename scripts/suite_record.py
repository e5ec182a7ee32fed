"""Record how long the suite took from a fresh clone, read off the output of ``.ci/run``.

    rm -rf /tmp/ciclone && git clone -q . /tmp/ciclone && (cd /tmp/ciclone && .ci/run) > ci.log 2>&1
    python scripts/suite_record.py ci.log     # -> data/suite/suite-<date>.json

``.ci/run`` prints ``ci: install (INSTALLER) and tests took N s on C cores`` by the shell's
clock, and pytest's own summary line gives the counts and the tests' seconds; the install is the
rest.  The record holds those, the installer, the machine (cores, CPU model, Python) and the
commit measured; the README's suite time is rendered from the newest one
(:mod:`ropelab.lessons.numbers_suite`).  Not a GPU record: ``data/suite/`` has its own format.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The installer in brackets since .ci/run could fall back from uv to pip; older logs lack it.
TOTAL = re.compile(r"^ci: install(?: \(([^)]+)\))? and tests took (\d+) s on (\d+) cores$", re.M)
SUMMARY = re.compile(r"=+ (\d+) passed(?:, (\d+) skipped)?.* in ([\d.]+)s")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def parse(text: str) -> dict:
    """The install and test seconds, cores and counts of one ``.ci/run`` output."""
    total, summary = TOTAL.search(text), SUMMARY.search(text)
    if not (total and summary):
        missing = [name for name, m in (("ci: line", total), ("pytest summary", summary))
                   if not m]
        raise ValueError(f"not the output of a passing .ci/run: no {', '.join(missing)}")
    tests_s = float(summary.group(3))
    return {"installer": total.group(1) or "pip", "install_s": int(total.group(2)) - round(tests_s),
            "tests_s": round(tests_s), "cores": int(total.group(3)), "passed": int(summary.group(1)),
            "skipped": int(summary.group(2) or 0)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path, help="what .ci/run printed")
    ap.add_argument("--commit", help="the commit measured (default: this checkout's HEAD)")
    args = ap.parse_args(argv)
    row = parse(args.log.read_text(errors="replace"))
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                           capture_output=True, text=True).stdout.strip()
    now = dt.datetime.now(dt.timezone.utc)
    record = {"kind": "suite", "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": commit,
              "method": "`.ci/run` on a fresh `git clone` of the commit: a new venv, "
                        f"`{row['installer']}` installs `-e .[test]`, then `python -m pytest` "
                        "(the README's command), no GPU; the tests' seconds are pytest's, the "
                        "install is the rest of the shell's clock",
              "machine": {"cores": os.cpu_count(), "cpu": _cpu_model(),
                          "python": platform.python_version()},
              **row}
    out = REPO / "data" / "suite" / f"suite-{now.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}: install {row['install_s']} s, tests "
          f"{row['tests_s']} s on {row['cores']} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
