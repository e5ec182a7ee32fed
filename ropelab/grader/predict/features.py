"""From a kernel's PTX counts and one launch to the quantities the time model needs.

:func:`launch_features` takes what a machine without a GPU knows about one launch:

- ``counts``: :func:`.ptx.analyze` of the kernel's PTX, plus ``regs`` (registers per thread,
  from nvJitLink's link of that PTX for sm_90);
- ``grid``, ``block``: the launch (x, y, z), and its dynamic shared memory;
- ``dram_bytes``: the bytes of the arrays the launch is given (each read or written once:
  what a cold L2 must bring in or send out at least);

and returns plain numbers of physical meaning, all per launch:

``resident_warps``
    warps one of the H200's 132 SMs holds at once: 32 blocks, 64 warps (2048 threads), 65536
    registers (allocated per warp in units of 256) and 228 KB of shared memory (1 KB of it
    reserved per block) each limit it.
``warps``, ``waves``
    warps that do work (a guard that sends threads home early leaves fewer), and ``warps`` /
    (132 x ``resident_warps``), at least 1: how many times the machine fills up.
``passes``
    times a thread runs its loop body: the bytes each working thread must move over the
    bytes one pass moves (1 for a kernel without a loop; below 1 when the compiler unrolled
    the loop into passes of several iterations that few threads need).
``rounds``, ``hit_rounds``
    memory latencies one thread waits for in series: the PTX's rounds outside the loop, plus
    ``rounds_loop`` for each pass; of the loop's, the share ``miss_loop`` goes past the L1
    (``rounds``) and the rest hits a line an earlier pass fetched (``hit_rounds``).
``issue``
    issue cycles of one warp (see :data:`.issue.ISSUE_CYCLES`), over all its passes.
``sectors``
    32-byte sectors the launch's warps ask the memory system for (L2 traffic), over all passes.
``wavefronts``
    128-byte lines the launch's warps' accesses touch, over all passes: the L1's work, one line
    a cycle per SM.
``blocks``
    the blocks of the grid.
``divergent_branches``
    branches whose guard differs between the lanes of a warp (:mod:`.diverge`): their arms
    run one after the other (what ``rounds`` and the traffic already count; said to the
    learner by ``verdict.time()``).
``warm``
    the share of the launch's array bytes that an earlier launch of the same step was given
    (0 for a step's first launch): those reads hit the L2, whose latency is shorter.
``h2d``, ``h2d_bytes``, ``d2h``, ``d2h_bytes``, ``allocs``
    what a launch step's function asks of the host around its launches (given with the
    step's first launch, 0 on the others and on kernel steps): copies to and from the GPU,
    their bytes, and device allocations (:data:`HOST_COUNTS`).

:mod:`.issue` holds the issue cycles of an instruction class; the model scales their sum by
one fitted constant, which also absorbs the expansion of a PTX instruction into several SASS
ones.
"""

from __future__ import annotations

import math

from ...cuda_limits import WARP
from .issue import ATOMIC_CYCLES, issue_cycles

SMS = 132  # H200 SXM
HOST_COUNTS = ("h2d", "h2d_bytes", "d2h", "d2h_bytes", "allocs")
MAX_BLOCKS_PER_SM = 32
MAX_WARPS_PER_SM = 64
REGISTERS_PER_SM = 65536
SHARED_PER_SM = 228 * 1024
SHARED_RESERVED_PER_BLOCK = 1024


def dims(value) -> tuple:
    """(x, y, z) of a launch dimension given as an int or a sequence."""
    if isinstance(value, int):
        return (value, 1, 1)
    value = tuple(int(v) for v in value)
    return value + (1,) * (3 - len(value))


def occupancy(threads_per_block: int, regs: int, shared_per_block: int) -> dict:
    """Resident blocks and warps per SM, and which limit sets them."""
    warps_per_block = math.ceil(threads_per_block / WARP)
    limits = {"blocks": MAX_BLOCKS_PER_SM,
              "warps": MAX_WARPS_PER_SM // warps_per_block}
    if regs:
        per_warp = math.ceil(max(regs, 1) * WARP / 256) * 256
        limits["registers"] = REGISTERS_PER_SM // (per_warp * warps_per_block)
    if shared_per_block:
        limits["shared"] = SHARED_PER_SM // (shared_per_block + SHARED_RESERVED_PER_BLOCK)
    binding = min(limits, key=limits.get)
    blocks = max(limits[binding], 0)
    return {"blocks_per_sm": blocks, "resident_warps": blocks * warps_per_block,
            "limit": binding}


def launch_features(counts: dict, grid, block, dram_bytes: int, dynamic_shared: int = 0,
                    warm: float = 0.0, host: dict | None = None) -> dict:
    """The model's inputs for one launch (see the module docstring)."""
    if dram_bytes <= 0:
        raise ValueError(f"a launch must move some bytes, got {dram_bytes!r}")
    g, b = dims(grid), dims(block)
    blocks = g[0] * g[1] * g[2]
    per_block = b[0] * b[1] * b[2]
    threads = blocks * per_block
    occ = occupancy(per_block, int(counts.get("regs") or 0),
                    int(counts.get("shared_bytes", 0)) + int(dynamic_shared))
    if occ["resident_warps"] == 0:
        raise ValueError("this block does not fit on an SM (registers or shared memory)")
    # Bytes a warp's lanes ask for once through the code outside loops, and per loop pass.
    # A thread runs one arm of a branch outside loops: its bytes are the heaviest arm's
    # (ptx's arm_share_out), which is what decides how many threads the bytes keep busy.
    once = float(counts.get("arm_share_out", 1.0)) * counts.get("useful_out", 0.0) / WARP
    # A pass runs one arm of a branch inside the loop: its bytes, traffic and instructions are
    # the loop's counts times the heaviest arm's share (ptx's arm_share_loop).
    arm = float(counts.get("arm_share_loop", 1.0))
    per_pass = arm * counts.get("useful_loop", 0.0) / WARP
    per_thread = dram_bytes / threads
    if per_pass > 0:
        # Below 1 when the compiler unrolled the loop (a pass holds several iterations) and
        # the threads need fewer: the unrolled body then runs a fraction of the time.
        passes = max(0.0, (per_thread - once) / per_pass)
        working = threads
    else:
        passes = 1.0
        working = threads if once <= 0 else min(threads, dram_bytes / once)
    warps = max(1.0, working / WARP)
    waves = max(1.0, warps / (SMS * occ["resident_warps"]))
    loop_rounds = counts.get("rounds_loop", 0)
    miss = float(counts.get("miss_loop", 1.0))
    rounds = max(counts.get("rounds", 0) - loop_rounds, 0) + passes * loop_rounds * miss
    hit_rounds = passes * loop_rounds * (1.0 - miss)
    # outside loops, the instructions of the arms a warp runs (ptx's <class>_path_out)
    outside = "path_out" if "alu_path_out" in counts else "out"
    issue = issue_cycles(counts, outside) + passes * arm * issue_cycles(counts, "loop")
    issue += ATOMIC_CYCLES * counts.get("atom", 0)
    # outside loops, the sectors and lines of the arms a warp runs (ptx's *_path_out)
    sectors_out = counts.get("sectors_path_out", counts.get("sectors_out", 0))
    lines_out = counts.get("lines_path_out", counts.get("lines_out", 0))
    sectors = warps * (sectors_out + passes * arm * counts.get("sectors_loop", 0))
    wavefronts = warps * (lines_out + passes * arm * counts.get("lines_loop", 0))
    return {"blocks": float(blocks), "threads_per_block": float(per_block),
            "warps": warps, "resident_warps": float(occ["resident_warps"]),
            "occupancy_limit": occ["limit"], "waves": waves, "passes": passes,
            "rounds": float(rounds), "hit_rounds": float(hit_rounds), "issue": issue,
            "sectors": float(sectors), "wavefronts": float(wavefronts),
            "dram_bytes": float(dram_bytes), "warm": float(warm),
            "divergent_branches": float(counts.get("divergent_branches", 0)),
            "loop_global": float(counts.get("global_loop", 0) > 0),
            **{name: float((host or {}).get(name, 0)) for name in HOST_COUNTS}}
