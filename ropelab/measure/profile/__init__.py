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
4. :func:`~.parse.summarize` keeps a few numbers per kernel; global load/store widths come from the
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

The package: :mod:`.parse` (ncu's CSV to rows), :mod:`.widths` (access widths from the
census), :mod:`.ncu` (running ncu, :func:`record_profile`), :mod:`.report` (a recorded profile
as a table or a chart), :mod:`.cli`.
"""

from .cli import add_arguments, run_cli
from .ncu import (available_metrics, find_ncu, import_command, kernel_filter, ncu_command,
                  ncu_version, profile_group, record_profile, usable_metrics)
from .parse import (COLUMNS, KIND, METRICS, PROFILE_VERSION, SECTIONS, ProfileError, block_limit,
                    match, parse_raw_csv, short_kernel_name, stalls, summarize, to_base,
                    to_number)
from .report import load, plot_profile, profile_table, select
from .widths import census_widths

__all__ = ["COLUMNS", "KIND", "METRICS", "PROFILE_VERSION", "SECTIONS", "ProfileError",
           "add_arguments", "available_metrics", "block_limit", "census_widths", "find_ncu",
           "import_command", "kernel_filter", "load", "match", "ncu_command", "ncu_version",
           "parse_raw_csv", "plot_profile", "profile_group", "profile_table", "record_profile",
           "run_cli", "select", "short_kernel_name", "stalls", "summarize", "to_base", "to_number",
           "usable_metrics"]
