"""Reading ncu's raw CSV export into one summary row per kernel (tested on a synthetic
export): units, stall states, block limits, and matching results to the launched cases."""

from __future__ import annotations

import csv
import io
import re

from .. import cases as _cases


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
PERMISSION_ERRORS = ("ERR_NVGPUCTRPERM", "permission to access NVIDIA GPU Performance Counters")
UNKNOWN_NAME = re.compile(r"(failed to find|could not find|unknown|invalid)\s+(metric|section)",
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
        "options": _cases.options_label(case["options"]) or "-", "shape": case["shape"],
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
