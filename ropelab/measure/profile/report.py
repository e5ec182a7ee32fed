"""Reading a recorded profile (works anywhere: notebooks on a laptop): select, table, plot."""

from __future__ import annotations

import re
from pathlib import Path

from .parse import KIND



def load(directory: Path | str | None = None) -> dict:
    """The newest recorded profile (``data/profile/``)."""
    from .. import records

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
