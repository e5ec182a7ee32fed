"""Thread maps read off the real kernels: run a variant under the Numba CUDA simulator with arrays
that remember which (block, thread) touched each element.

On a GPU host the trace runs in a child process with the simulator forced (numba-cuda fixes its
target once per process), so a notebook on any machine can draw who-writes-what.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass

import numpy as np

from .. import kernels
from ..kernels.launch import launch
from ..problem import RopeProblem
from ..target import SIMULATED


class _WatchedArray:
    """A flat array stand-in that records which simulated CUDA thread writes each element.

    The simulator hands non-NumPy kernel arguments to the kernel unchanged and runs every CUDA
    thread as a Python thread carrying its ``blockIdx`` and ``threadIdx``, so indexing through
    this object tells us who touched what.  Reads are recorded too (``reader``): in-place
    kernels read and write the same buffer.
    """

    def __init__(self, data: np.ndarray, writer: np.ndarray | None, reader: np.ndarray | None):
        self.data = data
        self.writer = writer
        self.reader = reader
        self.size = data.size
        self.shape = data.shape

    @property
    def _ary(self):
        # Launchers that check alignment (pack4) read a simulator array's host buffer here.
        return self.data

    def _who(self):
        t = threading.current_thread()
        block, thread = t.blockIdx, t.threadIdx
        return block.x, block.y, thread.x, thread.y

    def __getitem__(self, i):
        if self.reader is not None:
            self.reader[i] = self._who()
        return self.data[i]

    def __setitem__(self, i, value):
        if self.writer is not None:
            self.writer[i] = self._who()
        self.data[i] = value

    def __len__(self):
        return self.size


@dataclass
class ThreadMap:
    """Which thread of which block wrote each element of a ``[tokens, row]`` output.

    ``block`` and ``thread`` are int arrays of shape ``[tokens, row]`` holding ``blockIdx.x``
    and ``threadIdx.x`` of the writer (``-1``: nobody wrote it).  ``grid`` and ``block_dim``
    are the launch configuration the variant chose.
    """

    variant: str
    tokens: int
    row: int
    grid: tuple[int, int]  # (blocks in x, blocks in y)
    block_dim: tuple[int, int]  # (threads in x, threads in y)
    block: np.ndarray
    thread: np.ndarray

    @property
    def launched(self) -> int:
        """CUDA threads the launch created."""
        return self.grid[0] * self.grid[1] * self.block_dim[0] * self.block_dim[1]

    @property
    def busy(self) -> int:
        """Threads that wrote at least one element."""
        written = self.block >= 0
        pairs = set(zip(self.block[written].tolist(), self.thread[written].tolist()))
        return len(pairs)

    @property
    def elements_per_thread(self) -> float:
        return float((self.block >= 0).sum()) / max(self.busy, 1)

    def global_thread(self) -> np.ndarray:
        """``blockIdx.x * blockDim.x + threadIdx.x`` of each element's writer (1-D grids)."""
        g = self.block * self.block_dim[0] + self.thread
        return np.where(self.block >= 0, g, -1)

    def summary(self) -> str:
        blocks = self.grid[0] * self.grid[1]
        return (f"{self.variant}: {self.tokens} tokens x {self.row} floats, grid {self.grid[0]}"
                f"{'' if self.grid[1] == 1 else ' x ' + str(self.grid[1])} "
                f"block{'' if blocks == 1 else 's'} of "
                f"{self.block_dim[0]}{'' if self.block_dim[1] == 1 else ' x ' + str(self.block_dim[1])}"
                f" threads: {self.launched} launched, {self.busy} busy, "
                f"{self.elements_per_thread:g} floats per busy thread")


def _normalize_dims(value) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        dims = tuple(int(v) for v in value) + (1, 1)
        return dims[0], dims[1]
    return int(value), 1


def _trace_here(variant: str, tokens: int, hidden: int, threads_per_block: int | None,
                heads: int, layout: dict, options: dict) -> dict:
    if not SIMULATED:
        raise RuntimeError("tracing needs the simulator in this process")
    module = kernels.get(variant)
    head_dim = hidden // heads
    rotary_dim = layout.get("rotary_dim") or head_dim
    problem = RopeProblem(tokens, heads, head_dim, rotary_dim,
                          interleave=layout.get("interleave", True))
    n = problem.elements
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    who = np.full((n, 4), -1, dtype=np.int64)
    out = _WatchedArray(np.zeros(n, np.float32), who, None)
    dims = {}

    class _Positions(_WatchedArray):
        def __getitem__(self, i):
            # Any thread reads a position: note the launch shape the simulator is running.
            manager = threading.current_thread()._manager
            dims.setdefault("grid", manager._grid_dim)
            dims.setdefault("block", manager._block_dim)
            return self.data[i]

    positions = _Positions(np.arange(tokens, dtype=np.int32), None, None)
    plan = module.plan(problem, options, threads=threads_per_block)
    launch(plan, (_WatchedArray(x, None, None), out, positions))
    if not dims:  # a kernel that reads no position: fall back to what the plan says
        dims = {"grid": _normalize_dims(plan.grid), "block": _normalize_dims(plan.block)}
    return {
        "variant": variant, "tokens": tokens, "row": problem.row,
        "grid": list(_normalize_dims(tuple(dims["grid"]))),
        "block_dim": list(_normalize_dims(tuple(dims["block"]))),
        "block": who[:, 0].tolist(), "thread": who[:, 2].tolist(),
    }


def _on_simulator(name: str, args: list):
    """Call ``tracing.<name>(*args)`` on the simulator: here, or in a child process on a GPU host
    (numba-cuda picks the simulator or the GPU once per process).  Arguments and result are
    plain JSON."""
    if SIMULATED:
        return json.loads(json.dumps(globals()[name](*args)))
    env = dict(os.environ, ROPELAB_TARGET="simulator", ROPELAB_QUIET="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    code = ("import json, sys; from ropelab.lessons import tracing; "
            f"print(json.dumps(tracing.{name}(*json.loads(sys.argv[1]))))")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(args)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed in the simulator child:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def trace_threads(variant: str, tokens: int, hidden: int, *, threads_per_block: int | None = None,
                  heads: int = 1, interleave: bool = True, rotary_dim: int | None = None,
                  **options) -> ThreadMap:
    """Run ``variant`` on a ``[tokens, hidden]`` input and record the writer of every element.

    Keep the shape small (a few hundred threads): the simulator runs one Python thread per
    CUDA thread.  ``hidden`` is split into ``heads`` heads of ``hidden // heads`` floats;
    ``options`` go to the variant's ``prepare`` (e.g. ``cache=True`` for ``freq_table``).
    """
    layout = {"interleave": bool(interleave), "rotary_dim": rotary_dim}
    raw = _on_simulator("_trace_here", [variant, tokens, hidden, threads_per_block, heads, layout,
                                        options])
    shape = (raw["tokens"], raw["row"])
    return ThreadMap(raw["variant"], raw["tokens"], raw["row"], tuple(raw["grid"]),
                     tuple(raw["block_dim"]), np.array(raw["block"]).reshape(shape),
                     np.array(raw["thread"]).reshape(shape))


@dataclass
class FusedMap:
    """Who wrote each element of a fused ``qkv`` buffer ``[tokens, heads_total, head_dim]``.

    ``warp`` is the global warp number ``(blockIdx.y * warps_per_block + threadIdx.x // 32)``
    within the token's block column, ``lane`` is ``threadIdx.x % 32``; ``-1`` where nothing was
    written (the V heads).  ``token`` is the writer's token, ``blockIdx.x * tokens_per_block +
    threadIdx.y`` (a block holds a row of warps for each of ``tokens_per_block`` tokens).
    """

    heads: tuple[int, int, int]
    head_dim: int
    grid: tuple[int, int]
    block_dim: int  # threads in x: warps per token times 32
    token: np.ndarray
    warp: np.ndarray
    lane: np.ndarray
    heads_per_warp: int = 1
    tokens_per_block: int = 1
    storage: str = "float32"

    @property
    def elements_per_lane(self) -> int:
        """Consecutive elements of one head a lane writes (read off the trace, not assumed)."""
        lanes = self.lane[0, 0]
        return int(np.count_nonzero(lanes == lanes[0]))

    def summary(self) -> str:
        hq, hk, hv = self.heads
        return (f"qkv of {self.token.shape[0]} tokens x ({hq} Q + {hk} K + {hv} V heads) x "
                f"{self.head_dim}: grid {self.grid[0]} x {self.grid[1]} blocks of {self.block_dim} "
                f"threads ({self.block_dim // 32} warps)"
                + (f" x {self.tokens_per_block} tokens" if self.tokens_per_block > 1 else "")
                + f", {self.storage} qkv; each lane holds "
                f"{self.elements_per_lane} consecutive elements of "
                + ("one head" if self.heads_per_warp == 1
                   else f"each of its warp's {self.heads_per_warp} heads"))


def _trace_fused_here(tokens: int, heads: list, head_dim: int, interleave: bool,
                      rotary_dim, warps_per_block, heads_per_warp: int = 1,
                      storage: str = "float32") -> dict:
    if not SIMULATED:
        raise RuntimeError("tracing needs the simulator in this process")
    from ..ops import fused
    from ..ops.arrays import inspect_array
    from ..kernels import fused_qknorm_rope as kernel
    hq, hk, hv = heads
    qkv = np.random.default_rng(0).standard_normal((tokens, (hq + hk + hv) * head_dim))
    qkv = qkv.astype(storage)
    problem = fused.build_problem(inspect_array(qkv, "qkv"), num_heads_q=hq, num_heads_k=hk,
                                  num_heads_v=hv, head_dim=head_dim, rotary_dim=rotary_dim,
                                  interleave=interleave)
    who = np.full((qkv.size, 4), -1, dtype=np.int64)
    buf = _WatchedArray(qkv.ravel().copy(), who, None)
    weights = np.ones(head_dim, np.float32)
    plan = kernel.VARIANT.plan(problem, {"warps_per_block": warps_per_block,
                                         "heads_per_warp": heads_per_warp})
    launch(plan, (buf, _WatchedArray(weights, None, None),
                  _WatchedArray(weights.copy(), None, None),
                  _WatchedArray(np.arange(tokens, dtype=np.int32), None, None)))
    return {"heads": list(heads), "head_dim": head_dim, "grid": list(plan.grid[:2]),
            "block_dim": plan.block[0], "tokens_per_block": plan.block[1],
            "heads_per_warp": heads_per_warp, "who": who.tolist()}


def trace_fused(tokens: int, heads=(2, 2, 1), head_dim: int = 64, *, interleave: bool = True,
                rotary_dim: int | None = None, warps_per_block: int | None = None,
                heads_per_warp: int = 1, storage: str = "float32") -> FusedMap:
    """Run the fused QK-norm + RoPE kernel on a small ``qkv`` and record every writer.

    ``storage`` is ``"float32"`` or ``"float16"``: a 16-bit ``qkv`` gets the 16-bit builds
    (with ``heads_per_warp=2``, half a warp per head and 128-bit words), whose mapping is the
    same for bfloat16; float16 is traced because the simulator's word stores write it element
    by element, so every element keeps its own writer.

    ``heads`` is ``(heads_q, heads_k, heads_v)``.  ``heads_per_warp`` is passed to the launcher
    explicitly (1: one warp per (token, head), the mapping the course draws first), so the map
    does not follow the storage-dependent default.  Runs on the simulator (with ropelab's warp
    shuffle emulation); keep it to a few tokens and heads.
    """
    if storage not in ("float32", "float16"):
        raise ValueError(f"storage must be 'float32' or 'float16' (bfloat16 maps like float16); "
                         f"got {storage!r}")
    raw = _on_simulator("_trace_fused_here", [tokens, list(heads), head_dim, bool(interleave),
                                              rotary_dim, warps_per_block, int(heads_per_warp),
                                              storage])
    who = np.array(raw["who"]).reshape(tokens, sum(heads), head_dim, 4)
    warps_per = raw["block_dim"] // 32
    written = who[..., 0] >= 0
    warp = np.where(written, who[..., 1] * warps_per + who[..., 2] // 32, -1)
    lane = np.where(written, who[..., 2] % 32, -1)
    token = np.where(written, who[..., 0] * raw["tokens_per_block"] + who[..., 3], -1)
    return FusedMap(tuple(raw["heads"]), head_dim, tuple(raw["grid"]), raw["block_dim"],
                    token, warp, lane, raw["heads_per_warp"], raw["tokens_per_block"], storage)
