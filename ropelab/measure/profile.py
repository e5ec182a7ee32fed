"""``python -m ropelab profile``: Nsight Compute counters for every kernel, recorded under ``data/profile/``.

Why a profiler: a time says *that* a kernel is slower than the copy, not *why*.  Hardware
counters say where the time goes: how much of the DRAM bandwidth a kernel used, how many warps
were resident, what the warps were waiting for.

How (GPU only; the simulator has no counters and the command refuses there):

1. The cases of :mod:`ropelab.measure.cases`: every plain variant (``freq_table`` in each of its
   modes) at 32768 x 4096 and 4096 x 512, the controlled kernels at both shapes, the fused
   kernel in bfloat16 / float16 / float32 and both layouts at the production shapes.
2. One ``ncu`` run per group launches ``python -m ropelab.measure.cases`` (each case launched
   once) with ``--clock-control none`` (the GPU keeps its own clocks, as in the timed runs),
   kernel replay with caches flushed before every pass (ncu's default: cold L2, as the bench),
   ``--kernel-name`` filtered to the kernels the cases run, ``--launch-count`` = the cases, and
   the sections and metrics below; ``--export`` keeps the raw ``.ncu-rep`` (git-ignored).
3. ``ncu --import ... --csv --page raw --print-units base`` gives one row per launch; result
   *i* is matched to launched case *i*, and its kernel name is checked against the case.
4. :func:`summarize` keeps a few numbers per kernel; global load/store widths come from the
   instruction census (``ropelab.measure.census``, ``ropelab.measure.controls``), which compiles the same
   kernels (sectors per request come from the counters).  The record is written by
   :func:`ropelab.measure.records.save`, one file per run.

Reading the fields (``columns`` of the record):

``dram_pct``  DRAM throughput, % of the peak the GPU can sustain, over the kernel's duration.
``dram_read_bytes`` / ``dram_write_bytes``  measured traffic; ``traffic_over_min`` divides it by
    the operation's minimum (x read and written; Q and K for the fused kernel): 1.0 is ideal.
``achieved_occupancy_pct`` / ``theoretical_occupancy_pct``  resident warps per SM, % of 64.
``registers``, ``blocks_per_sm``, ``block_limit``  registers per thread; resident blocks per SM
    and what limits them (``warps``, ``registers``, ``blocks``, ``shared_mem``).
``ld_bits`` / ``st_bits``  global access widths in the compiled code (``128x1,32x1``: one
    128-bit and one 32-bit load instruction per thread), from the census.
``ld_sectors_per_request`` / ``st_sectors_per_request``  32-byte sectors per warp request: 4
    for a coalesced 32-bit access, 16 for 128-bit, 1 for a broadcast (32 lanes, one address).
``issue_active_pct``  cycles in which a scheduler issued an instruction, % of active cycles.
``stall_1`` .. ``stall_3``  the three states warps spent the most cycles in between two issued
    instructions (``long_scoreboard``: waiting for global memory), with ``stall_k_cycles``
    the cycles per issued instruction; ``warp_cycles_per_issue`` is their total.
``xu_pct``  the transcendental (XU/SFU) pipe's busy share: sin, cos, ex2, lg2, rsqrt.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import cases as _cases

PROFILE_VERSION = 1
KIND = "profile"
SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats", "SchedulerStats",
            "WarpStateStats", "ComputeWorkloadAnalysis")
# Requested by name as well, so each field has its counter even where a section changed.
METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__block_size",
    "launch__grid_size",
    "launch__waves_per_multiprocessor",
    "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_eligible.avg.per_cycle_active",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
)
# Warp states, from the WarpStateStats section (name differs across ncu versions).
_STALL = (re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$"),
          re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)\.ratio$"))
_NOT_STALLS = {"selected"}  # the state of a warp that is issuing
_PERMISSION = ("ERR_NVGPUCTRPERM", "permission to access NVIDIA GPU Performance Counters")
_UNKNOWN_NAME = re.compile(r"(failed to find|could not find|unknown|invalid)\s+(metric|section)",
                           re.IGNORECASE)

COLUMNS = (
    "case", "group", "family", "name", "options", "shape", "dtype", "layout", "kernel", "grid",
    "block", "min_bytes", "duration_us", "dram_gbps", "dram_pct", "dram_read_bytes",
    "dram_write_bytes", "traffic_over_min", "achieved_occupancy_pct", "theoretical_occupancy_pct",
    "registers", "blocks_per_sm", "block_limit", "waves", "ld_bits", "st_bits",
    "ld_sectors_per_request", "st_sectors_per_request", "issue_active_pct", "eligible_warps",
    "warp_cycles_per_issue", "stall_1", "stall_1_cycles", "stall_2", "stall_2_cycles", "stall_3",
    "stall_3_cycles", "xu_pct",
)


class ProfileError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# Parsing ncu's raw CSV (tested on a synthetic export)
# --------------------------------------------------------------------------------------------

_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
            "s": 1e9, "second": 1e9}


def to_number(text: str):
    """A CSV cell as a float (thousands separators dropped), or the stripped text if not numeric."""
    t = text.strip().replace(",", "")
    try:
        return float(t)
    except ValueError:
        return text.strip()


def to_base(value, unit: str):
    """Bytes in bytes, times in nanoseconds, rates in bytes per second; other units unchanged."""
    if not isinstance(value, float):
        return value
    unit = unit.strip()
    if unit in _TIME_NS:
        return value * _TIME_NS[unit]
    m = re.fullmatch(r"([KMGT]?)byte(/s(?:econd)?)?", unit)
    if m:
        return value * _SCALE[m.group(1)]
    return value


def short_kernel_name(name: str) -> str:
    """``rope_flat`` from a mangled (``_ZN7ropelab7kernels4flat9rope_flatB2v1...E...``) or
    demangled (``ropelab::kernels::flat::rope_flat[abi:v1](Array<...>)``) kernel name."""
    name = name.strip()
    if name.startswith("_Z"):
        i = 3 if name.startswith("_ZN") else 2
        last = None
        while i < len(name):
            tag = name[i] == "B"  # an ABI tag after the name: B<len><text>
            j = i + 1 if tag else i
            k = j
            while k < len(name) and name[k].isdigit():
                k += 1
            if k == j:
                break
            n = int(name[j:k])
            if not tag:
                last = name[k:k + n]
            i = k + n
        return last or name
    base = re.split(r"[\[(<]", name, maxsplit=1)[0].strip()
    return base.split("::")[-1].split()[-1] if base else name


def parse_raw_csv(text: str) -> list[dict]:
    """One dict per profiled launch: ``id``, ``kernel`` (short name), ``kernel_full``,
    ``metrics`` ({name: value in base units, or text})."""
    rows = list(csv.reader(io.StringIO(text)))
    for h, header in enumerate(rows):
        if "ID" in header and "Kernel Name" in header:
            break
    else:
        raise ProfileError("no ncu raw-page CSV header (ID, Kernel Name) in the export")
    units: dict = {}
    results = []
    for raw in rows[h + 1:]:
        if len(raw) != len(header):
            continue
        row = dict(zip(header, raw))
        if not row["ID"].strip().isdigit():
            if not results and not units:
                units = row  # the line under the header gives each column's unit
            continue
        metrics = {k: to_base(to_number(v), units.get(k, "")) for k, v in row.items()
                   if k not in ("ID", "Kernel Name")}
        results.append({"id": int(row["ID"]), "kernel": short_kernel_name(row["Kernel Name"]),
                        "kernel_full": row["Kernel Name"], "metrics": metrics})
    return sorted(results, key=lambda r: r["id"])


def _num(metrics: dict, *names):
    for n in names:
        v = metrics.get(n)
        if isinstance(v, float):
            return v
    return None


def _ratio(a, b):
    return None if a is None or not b else a / b


def _round(v, digits=2):
    return None if v is None else round(v, digits)


def stalls(metrics: dict) -> list[tuple[str, float]]:
    """Warp states by cycles per issued instruction, largest first (``selected`` excluded)."""
    found = {}
    for pattern in _STALL:
        for k, v in metrics.items():
            m = pattern.match(k)
            if m and isinstance(v, float) and m.group(1) not in _NOT_STALLS:
                found.setdefault(m.group(1), v)
        if found:
            break
    return sorted(found.items(), key=lambda kv: -kv[1])


def block_limit(metrics: dict) -> tuple[float | None, str | None]:
    """(resident blocks per SM, what limits them): the smallest ``launch__occupancy_limit_*``."""
    limits = {k[len("launch__occupancy_limit_"):]: v for k, v in metrics.items()
              if k.startswith("launch__occupancy_limit_") and isinstance(v, float)}
    if not limits:
        return None, None
    low = min(limits.values())
    return low, "+".join(sorted(k for k, v in limits.items() if v == low))


def summarize(case: dict, result: dict, widths: dict | None = None) -> dict:
    """One record row: the case's identity and the fields of the module docstring."""
    m = result["metrics"]
    duration_ns = _num(m, "gpu__time_duration.sum")
    read = _num(m, "dram__bytes_read.sum")
    write = _num(m, "dram__bytes_write.sum")
    traffic = None if read is None or write is None else read + write
    blocks, limit = block_limit(m)
    top = stalls(m)[:3] + [(None, None)] * 3
    ld_req = _num(m, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    st_req = _num(m, "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    ld_sec = _num(m, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    st_sec = _num(m, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
    w = (widths or {}).get(result["kernel"], {})
    row = {
        "case": case["id"], "group": case["group"], "family": case["family"], "name": case["name"],
        "options": _cases._options_label(case["options"]) or "-", "shape": case["shape"],
        "dtype": case["dtype"], "layout": case["layout"], "kernel": result["kernel"],
        "grid": _int(_num(m, "launch__grid_size")), "block": _int(_num(m, "launch__block_size")),
        "min_bytes": case["min_bytes"],
        "duration_us": _round(None if duration_ns is None else duration_ns / 1e3, 3),
        "dram_gbps": _round(_ratio(traffic, duration_ns), 1),  # bytes per ns = GB/s
        "dram_pct": _round(_num(m, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                                "dram__throughput.avg.pct_of_peak_sustained_elapsed")),
        "dram_read_bytes": _int(read), "dram_write_bytes": _int(write),
        "traffic_over_min": _round(_ratio(traffic, case["min_bytes"]), 3),
        "achieved_occupancy_pct": _round(_num(m, "sm__warps_active.avg.pct_of_peak_sustained_active")),
        "theoretical_occupancy_pct": _round(_num(m, "sm__maximum_warps_per_active_cycle_pct")),
        "registers": _int(_num(m, "launch__registers_per_thread")),
        "blocks_per_sm": _int(blocks), "block_limit": limit,
        "waves": _round(_num(m, "launch__waves_per_multiprocessor")),
        "ld_bits": w.get("ld"), "st_bits": w.get("st"),
        "ld_sectors_per_request": _round(_ratio(ld_sec, ld_req)),
        "st_sectors_per_request": _round(_ratio(st_sec, st_req)),
        "issue_active_pct": _round(_num(m, "smsp__issue_active.avg.pct_of_peak_sustained_active",
                                        "sm__inst_issued.avg.pct_of_peak_sustained_active")),
        "eligible_warps": _round(_num(m, "smsp__warps_eligible.avg.per_cycle_active")),
        "warp_cycles_per_issue": _round(_num(m, "smsp__average_warp_latency_per_inst_issued.ratio")),
        "stall_1": top[0][0], "stall_1_cycles": _round(top[0][1]),
        "stall_2": top[1][0], "stall_2_cycles": _round(top[1][1]),
        "stall_3": top[2][0], "stall_3_cycles": _round(top[2][1]),
        "xu_pct": _round(_num(m, "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active")),
    }
    return {c: row[c] for c in COLUMNS}


def _int(v):
    return None if v is None else int(round(v))


def match(launched: list[dict], results: list[dict]) -> list[tuple[dict, dict]]:
    """Pair launched case *i* with profile result *i*; refuse if counts or kernel names disagree."""
    if len(launched) != len(results):
        raise ProfileError(f"{len(results)} profiled kernels for {len(launched)} launched cases: "
                           f"cannot tell which result is which")
    for case, res in zip(launched, results):
        if not _cases.accepts(case, res["kernel"]):
            raise ProfileError(f"profile result {res['id']} ran {res['kernel']!r}, but case "
                               f"{case['id']} launches {case['expect']}")
    return list(zip(launched, results))


# --------------------------------------------------------------------------------------------
# Global access widths, from the instruction census (compiled, not measured)
# --------------------------------------------------------------------------------------------

def _width_text(table: dict) -> str | None:
    if not table:
        return None
    return ",".join(f"{b}x{n}" for b, n in sorted(table.items(), key=lambda kv: -int(kv[0])))


def census_widths() -> tuple[dict, dict]:
    """({kernel: {"ld": "32x3", "st": "32x2"}}, {census: key}) from the PTX and controls censuses."""
    from . import census as ptx
    from . import controls

    widths, keys = {}, {}
    doc = ptx.census()
    keys["ptx"] = doc["key"]
    for r in doc["rows"]:
        if r["shipped"] and not r.get("error"):
            widths[r["kernel"]] = {"ld": _width_text(r["ld_global"]), "st": _width_text(r["st_global"])}
    doc = controls.census()
    keys["controls"] = doc["key"]
    for r in doc["rows"]:
        if not r.get("error"):
            widths.setdefault(r["kernel"], {"ld": _width_text(r["ld_global"]),
                                            "st": _width_text(r["st_global"])})
    return widths, keys


# --------------------------------------------------------------------------------------------
# Running ncu (GPU)
# --------------------------------------------------------------------------------------------

def find_ncu(explicit: str | None = None) -> str | None:
    """``ncu`` on PATH, or in the usual CUDA / Nsight Compute install folders."""
    if explicit:
        return explicit if Path(explicit).is_file() else shutil.which(explicit)
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(Path("/usr/local").glob("cuda*/bin/ncu"), reverse=True)
    candidates += sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"), reverse=True)
    candidates += sorted(Path("/usr/local").glob("NVIDIA-Nsight-Compute*/ncu"), reverse=True)
    return str(candidates[0]) if candidates else None


def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+(\S+)", out)
    return m.group(1) if m else (out.strip().splitlines() or [None])[-1]


def available_metrics(ncu: str) -> set[str] | None:
    """Base metric names the local GPU supports (``ncu --query-metrics``), or None if unknown."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                             timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = {m.group(1) for m in re.finditer(r"^([a-z0-9_]+__[a-z0-9_]+)\b", out, re.M)}
    return names or None


def usable_metrics(available: set[str] | None) -> tuple[list[str], list[str]]:
    """(metrics to request, metrics dropped because this GPU/ncu does not know them)."""
    if available is None:
        return list(METRICS), []
    keep = [m for m in METRICS if m.split(".", 1)[0] in available]
    return keep, [m for m in METRICS if m not in keep]


def kernel_filter(group_cases: list[dict]) -> str:
    names = sorted({e.rstrip("*") for c in group_cases for e in c["expect"]})
    return "regex:" + "|".join(re.escape(n) for n in names)


def ncu_command(ncu: str, report: Path, group_cases: list[dict], plan_path: Path,
                manifest_path: Path, *, sections=SECTIONS, metrics=METRICS) -> list[str]:
    cmd = [ncu, "--clock-control", "none", "--replay-mode", "kernel", "--cache-control", "all",
           "--kernel-name-base", "mangled", "--kernel-name", kernel_filter(group_cases),
           "--launch-count", str(len(group_cases)), "--export", str(report), "--force-overwrite"]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + [sys.executable, "-m", "ropelab.measure.cases", str(plan_path), str(manifest_path)]


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
            "--print-kernel-base", "mangled"]


def _child_env() -> dict:
    env = dict(os.environ, ROPELAB_TARGET="gpu", ROPELAB_QUIET="1", PYTHONUNBUFFERED="1")
    root = str(Path(__file__).resolve().parents[2])  # the child imports this checkout's ropelab
    env["PYTHONPATH"] = os.pathsep.join([p for p in (root, env.get("PYTHONPATH")) if p])
    return env


class Terminated(Exception):
    """SIGTERM arrived (an outer time limit): ncu and its child are gone, earlier groups kept."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _run(cmd, timeout_s, env=None):
    """(exit status or None on timeout, stdout + stderr).  ncu runs in its own process group, and
    the whole group goes on a timeout or any interruption: the Python process ncu launched holds
    the GPU and must not outlive the run."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def profile_group(ncu: str, group_cases: list[dict], reports: Path, *, metrics, timeout_s: float,
                  log=print) -> tuple[list[tuple[dict, dict]], str]:
    """Profile one group; returns (matched (case, result) pairs, the configuration that worked)."""
    group = group_cases[0]["group"]
    reports.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        plan_path, manifest_path = Path(tmp) / "plan.json", Path(tmp) / "manifest.jsonl"
        plan_path.write_text(json.dumps(group_cases))
        report = reports / f"{group}.ncu-rep"
        attempts = [("sections+metrics", SECTIONS, metrics), ("sections", SECTIONS, ()),
                    ("metrics", (), metrics)]
        for label, sections, mets in attempts:
            if not sections and not mets:
                continue
            for stale in (report, manifest_path):
                stale.unlink(missing_ok=True)
            cmd = ncu_command(ncu, report, group_cases, plan_path, manifest_path,
                              sections=sections, metrics=mets)
            log(f"[{group}] {label}: {len(group_cases)} launches under ncu")
            rc, out = _run(cmd, timeout_s, env=_child_env())
            (reports / f"{group}.log").write_text(" ".join(cmd) + "\n\n" + out)
            if any(p in out for p in _PERMISSION):
                raise ProfileError("ncu may not read the GPU's performance counters here "
                                   "(ERR_NVGPUCTRPERM): run as root or with "
                                   "NVreg_RestrictProfilingToAdminUsers=0")
            if rc is None:
                raise ProfileError(f"ncu did not finish the {group} group in {timeout_s:.0f} s")
            if report.exists() and manifest_path.exists():
                break
            errors = "\n".join(line for line in out.splitlines() if "==ERROR==" in line)
            if not _UNKNOWN_NAME.search(errors):  # only a name this ncu lacks is worth a retry
                raise ProfileError(f"ncu failed on the {group} group (exit {rc}): "
                                   f"{(errors or out)[-1500:]}")
        else:
            raise ProfileError(f"ncu knows neither the sections nor the metrics requested: {errors[-1500:]}")
        entries = [json.loads(line) for line in manifest_path.read_text().splitlines()]
        for e in entries:
            if not e["ok"]:
                log(f"[{group}] launch failed, not profiled: {e['id']}: {e['error']}")
        launched_ids = [e["id"] for e in entries if e["ok"]]
        rc, text = _run(import_command(ncu, report), 600)
        if rc != 0:
            raise ProfileError(f"ncu --import failed: {text[-1000:]}")
        (reports / f"{group}.csv").write_text(text)
    by_id = {c["id"]: c for c in group_cases}
    return match([by_id[i] for i in launched_ids], parse_raw_csv(text)), label


METHOD = (
    "Nsight Compute ({ncu}) with --clock-control none (the GPU's own clocks), kernel replay, "
    "--cache-control all (caches flushed before every replay pass: cold L2); one ncu run per group "
    "launches `python -m ropelab.measure.cases`, which launches each case exactly once (plain "
    "variants and the fused kernel through ropelab.rope / ropelab.fused_qknorm_rope on device "
    "arrays, controls through ropelab.measure.controls); --kernel-name filters to the cases' "
    "kernels and --launch-count to their number; result i is matched to launched case i and its "
    "kernel name checked. Counters from the sections {sections} and the metrics listed in meta; "
    "exported with --page raw --print-units base. dram_gbps = (DRAM bytes read + written) / "
    "gpu__time_duration (a profiled, replayed kernel: use the bench for times); ld_bits/st_bits "
    "from the PTX instruction census of the same kernels (compiled, not counted at run time).")


def record_profile(groups=_cases.GROUPS, *, only: str | None = None, ncu: str | None = None,
                   reports: Path | str | None = None, out: Path | str | None = None,
                   timeout_s: float = 240.0, log=print, command: str | None = None) -> Path:
    """Profile the cases of ``groups`` (optionally only ids matching regex ``only``); record them."""
    from . import records

    meta = records.metadata()  # refuses on the simulator
    exe = find_ncu(ncu)
    if exe is None:
        raise ProfileError("ncu (Nsight Compute CLI) not found on PATH or under /usr/local/cuda*/bin, "
                           "/opt/nvidia/nsight-compute; pass --ncu PATH")
    all_cases = _cases.plan(groups)
    if only:
        all_cases = [c for c in all_cases if re.search(only, c["id"])]
    if not all_cases:
        raise ProfileError("no case matches")
    metrics, dropped = usable_metrics(available_metrics(exe))
    # The census compiles (a few seconds per kernel when its cache is stale): in the background,
    # while ncu profiles the first group.
    pool = ThreadPoolExecutor(1)
    census_job = pool.submit(census_widths)
    pool.shutdown(wait=False)
    reports = Path(reports) if reports else records.DATA_DIR / KIND / "reports"
    version = ncu_version(exe)
    meta.update(profile_version=PROFILE_VERSION, ncu=version, ncu_path=exe,
                command=command or f"python -m ropelab profile --groups {','.join(groups)}"
                + (f" --only {only}" if only else ""),
                sections=list(SECTIONS), metrics=metrics, metrics_dropped=dropped,
                clock_control="none", replay_mode="kernel", cache_control="all",
                groups={}, census_keys=None)
    method = METHOD.format(ncu=version, sections=", ".join(SECTIONS))
    directory = Path(out) / KIND if out else None
    rows, path = [], None
    try:  # an outer `timeout` sends SIGTERM: stop cleanly, keeping the groups already recorded
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        previous = None
    try:
        for group in _cases.GROUPS:
            group_cases = [c for c in all_cases if c["group"] == group]
            if not group_cases:
                continue
            t0 = time.perf_counter()
            status = {"cases": len(group_cases)}
            try:
                pairs, config = profile_group(exe, group_cases, reports, metrics=metrics,
                                              timeout_s=timeout_s, log=log)
                if meta["census_keys"] is None:
                    try:
                        widths, meta["census_keys"] = census_job.result()
                    except Exception as exc:  # widths stay unknown; the counters are still good
                        widths, meta["census_keys"] = {}, {"error": str(exc)[:300]}
                rows += [summarize(c, r, widths) for c, r in pairs]
                status.update(profiled=len(pairs), config=config)
            except ProfileError as exc:
                log(f"[{group}] {exc}")
                status.update(profiled=0, error=str(exc)[:1500])
            status["seconds"] = round(time.perf_counter() - t0, 1)
            meta["groups"][group] = status
            if rows:  # saved after every group, into this run's one file
                path = records.save(KIND, rows, method=method, meta=meta, directory=directory,
                                  replace=path)
            if "ERR_NVGPUCTRPERM" in status.get("error", ""):
                break
    except Terminated:
        log("terminated: the groups finished before are recorded")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if path is None:
        raise ProfileError("nothing was profiled: " + json.dumps(meta["groups"]))
    return path


# --------------------------------------------------------------------------------------------
# Reading a recorded profile (works anywhere: notebooks on a laptop)
# --------------------------------------------------------------------------------------------

def load(directory: Path | str | None = None) -> dict:
    """The newest recorded profile (``data/profile/``)."""
    from . import records

    return records.load(KIND, directory)


def select(record: dict, pattern: str | None = None) -> list[dict]:
    """Rows whose case id matches the regex ``pattern`` (all rows when None)."""
    return [r for r in record["rows"] if pattern is None or re.search(pattern, r["case"])]


def _cell(v, fmt="{:.1f}", none=""):
    return none if v is None else fmt.format(v)


def profile_table(record: dict, pattern: str | None = None, *, stalls_shown: int = 2) -> str:
    """A compact text table of the recorded profile, one line per case (regex ``pattern``)."""
    rows = select(record, pattern)
    head = (f"{'case':<44} {'us':>7} {'DRAM%':>6} {'traffic':>7} {'occ%':>9} {'reg':>4} "
            f"{'limit':<9} {'ld/st bits':<15} {'sect/req':>9} {'issue%':>6} {'XU%':>5}  top stalls (cycles/issue)")
    lines = [head, "-" * len(head)]
    for r in rows:
        occ = f"{_cell(r['achieved_occupancy_pct'], '{:.0f}')}/{_cell(r['theoretical_occupancy_pct'], '{:.0f}')}"
        bits = f"{r['ld_bits'] or '?'}/{r['st_bits'] or '?'}"
        sect = f"{_cell(r['ld_sectors_per_request'])}/{_cell(r['st_sectors_per_request'])}"
        top = ", ".join(f"{r[f'stall_{k}']} {r[f'stall_{k}_cycles']:.1f}"
                        for k in range(1, stalls_shown + 1) if r[f"stall_{k}"])
        lines.append(
            f"{r['case'][:44]:<44} {_cell(r['duration_us']):>7} {_cell(r['dram_pct']):>6} "
            f"{_cell(r['traffic_over_min'], '{:.2f}x'):>7} {occ:>9} {_cell(r['registers'], '{}'):>4} "
            f"{(r['block_limit'] or '')[:9]:<9} {bits[:15]:<15} {sect:>9} "
            f"{_cell(r['issue_active_pct']):>6} {_cell(r['xu_pct']):>5}  {top}")
    m = record["meta"]
    lines.append(f"{m['gpu']}, ncu {m.get('ncu')}, {m['date'][:10]}; us = profiled kernel duration "
                 f"(replayed, clocks not locked), traffic = DRAM bytes / minimum bytes")
    return "\n".join(lines)


def plot_profile(record: dict, pattern: str | None = None, field: str = "dram_pct", ax=None):
    """Horizontal bars of one field per case (default DRAM throughput, % of peak)."""
    import matplotlib.pyplot as plt

    rows = [r for r in select(record, pattern) if r.get(field) is not None]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.2))
    ax.barh([r["case"] for r in rows][::-1], [r[field] for r in rows][::-1])
    ax.set_xlabel(field)
    m = record["meta"]
    ax.set_title(f"{field} (Nsight Compute {m.get('ncu')})\n{m['gpu']}, {m['date'][:10]}", fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    return ax.figure


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

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
    from . import records
    from ..target import SIMULATED

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
