"""Record what compute-sanitizer found while ``python -m ropelab check`` ran (``scripts/sanitize.sh``).

``scripts/sanitize.sh`` runs the check under ``compute-sanitizer --tool memcheck`` (every global
and local access of every kernel checked against its allocation) and ``--tool racecheck``
(shared-memory hazards between threads of a block; ropelab's kernels use no shared memory, so
this one proves a negative), keeps each log, then calls::

    python -m ropelab.measure.sanitizer --sanitizer PATH --run TOOL LOG EXIT_STATUS SECONDS ...

which reads the logs and writes one record under ``data/sanitizer/`` (GPU, versions, date,
command, and per tool: errors found, by kind, and the check's own pass/fail count).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

KIND = "sanitizer"
TARGET_COMMAND = "python -m ropelab check"
COLUMNS = ("tool", "command", "exit_status", "seconds", "errors_total", "memory_errors",
           "api_errors", "api_calls", "hazards", "race_errors", "race_warnings", "leaks",
           "checks_passed", "checks_failed", "summary_found")

_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+)\s+hazards? displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)")
_MEMORY = re.compile(r"^=+\s+(Invalid __\w+__ (?:read|write|atomic)|Misaligned|Out-of-range|"
                     r"Invalid (?:global|shared|local) (?:read|write))", re.M)
_API = re.compile(r"^=+\s+Program hit ", re.M)
_API_CALL = re.compile(r"^=+\s+Program hit (\w+) \(error \d+\).* on CUDA API call to (\w+)\.", re.M)
_LEAK = re.compile(r"^=+\s+Leaked \d+ bytes", re.M)
_CHECKS = re.compile(r"^(\d+) passed, (\d+) failed\s*$", re.M)


def parse_log(text: str) -> dict:
    """Counts from one compute-sanitizer log (the tool's lines start with ``=========``)."""
    total = _ERROR_SUMMARY.findall(text)
    race = _RACE_SUMMARY.findall(text)
    checks = _CHECKS.findall(text)
    if total:
        errors = int(total[-1])
    else:  # racecheck may print only its own summary
        errors = int(race[-1][1]) if race else None
    return {
        "errors_total": errors,
        "memory_errors": len(_MEMORY.findall(text)),
        "api_errors": len(_API.findall(text)),
        "api_calls": api_calls(text),
        "hazards": int(race[-1][0]) if race else None,
        "race_errors": int(race[-1][1]) if race else None,
        "race_warnings": int(race[-1][2]) if race else None,
        "leaks": len(_LEAK.findall(text)),
        "checks_passed": int(checks[-1][0]) if checks else None,
        "checks_failed": int(checks[-1][1]) if checks else None,
        "summary_found": bool(total or race),  # none: the run was cut short (timeout, crash)
    }


def api_calls(text: str) -> str:
    """Which CUDA API calls returned an error, and how often: ``"cuGetProcAddress_v2
    CUDA_ERROR_INVALID_VALUE x34"`` ('' when none).  An API error is not a memory error: a
    library asking the driver for an entry point that this driver does not have is one."""
    counts: dict[tuple[str, str], int] = {}
    for err, call in _API_CALL.findall(text):
        counts[(call, err)] = counts.get((call, err), 0) + 1
    return "; ".join(f"{call} {err} x{n}" for (call, err), n in sorted(counts.items()))


def sanitizer_version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+(\S+)", out)
    return m.group(1) if m else None


def row_for(tool: str, log_text: str, exit_status: int, seconds: float, options: str = "") -> dict:
    row = {"tool": tool, "command": f"compute-sanitizer --tool {tool}{options} {TARGET_COMMAND}",
           "exit_status": int(exit_status), "seconds": round(float(seconds), 1), **parse_log(log_text)}
    return {c: row[c] for c in COLUMNS}


METHOD = ("compute-sanitizer (memcheck: every global/local access of every kernel launched by "
          "`python -m ropelab check` checked against its allocation, plus CUDA API errors; "
          "racecheck: shared-memory hazards, none possible in kernels without shared memory) "
          "around the GPU check of every variant and the fused kernel; counts parsed from each "
          "log's ERROR SUMMARY / RACECHECK SUMMARY lines and the check's own 'N passed, M failed' "
          "line; exit_status is the sanitizer's (the check's own status, or the sanitizer's error "
          "status when it found errors; 124 = cut by the time limit)")


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ropelab.measure.sanitizer", description=__doc__.split("\n")[0])
    p.add_argument("--sanitizer", required=True, help="path of compute-sanitizer")
    p.add_argument("--run", nargs=4, action="append", required=True,
                   metavar=("TOOL", "LOG", "EXIT_STATUS", "SECONDS"))
    p.add_argument("--options", default="", help="extra sanitizer options used (recorded)")
    p.add_argument("--out", default=None, help="data root (default the repo's data/)")
    args = p.parse_args(argv)

    from . import records

    rows = [row_for(tool, Path(log).read_text(errors="replace"), int(rc), float(s), args.options)
            for tool, log, rc, s in args.run]
    try:
        meta = records.metadata()
    except records.RecordError as exc:
        print(f"ropelab.measure.sanitizer: {exc}", file=sys.stderr)
        return 2
    meta.update(sanitizer=sanitizer_version(args.sanitizer), sanitizer_path=args.sanitizer,
                command="scripts/sanitize.sh")
    path = records.save(KIND, rows, method=METHOD, meta=meta,
                      directory=Path(args.out) / KIND if args.out else None)
    for r in rows:
        print(f"{r['tool']:<10} errors {r['errors_total']}  (memory {r['memory_errors']}, api "
              f"{r['api_errors']}, hazards {r['hazards']})  check: {r['checks_passed']} passed, "
              f"{r['checks_failed']} failed  exit {r['exit_status']}  {r['seconds']} s")
    print(f"recorded {path}")
    clean = all(r["summary_found"] and r["errors_total"] == 0 and r["checks_failed"] == 0 for r in rows)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
