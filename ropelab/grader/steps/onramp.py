"""The on-ramp's puzzles (notebooks/00_on_ramp.ipynb): fourteen small kernels before notebook 00.

Each puzzle is one building block that a later notebook uses, from a map to a tiled ``Q K^T``:
ramp.1 map, ramp.2 zip, ramp.3 guard, ramp.4 several blocks, ramp.5 the launch, ramp.6 a 2-D
grid, ramp.7 broadcast (the angle table), ramp.8 the interleaved pair swap (GPT-J), ramp.9 a
row staged in shared memory (the half-split swap, NeoX), ramp.10 a block reduction, ramp.11 a
warp-shuffle reduction, ramp.12 a dot product, ramp.13 a tiled ``Q K^T`` of rotated rows,
ramp.14 a prefix sum.  Every starter is an empty body with the contract in its docstring.

The ids are ``ramp.k`` rather than ``NN.k``: the on-ramp comes before notebook 00 without
renumbering it.  The puzzles have no census (no ``signature``): they teach indexing and
synchronization, and the instruction counts start in notebook 00.

A :class:`Puzzle` is a :class:`~.base.Step` whose verdict ends with one more sentence for
someone on a first kernel, where the grader's own words assume more (what "never written"
means in this puzzle, what an out-of-bounds stop or a race is).  Cases: :mod:`.onramp_cases`;
solutions and recorded wrong attempts: ``notebooks/solutions/00_on_ramp.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...cuda_limits import WARP
from . import onramp_cases as c
from .base import Step
from .contracts import threads_multiple_of

NOTEBOOK = "00_on_ramp"

# What the grader's generic words mean, said once for someone on a first kernel: (status, a
# fragment of the verdict, the note); the first that matches is said.  A verdict that names its
# own cause plainly (not a kernel, the wrong arguments) gets none.
UNWRITTEN = ("out starts with a marker in every element, and an element that still holds it was "
             "stored by no thread: count which thread writes which element (verdict.show() "
             "draws it)")
FIRST_KERNEL = (
    ("wrong", "never written", UNWRITTEN),
    ("out of bounds", "", "an index past the end of an array: the simulator checks every index "
                          "and stops the kernel there; a GPU checks none and would read or "
                          "overwrite other memory without a word"),
    ("race", "", "the threads of a block run in no fixed order, so a value that one thread "
                 "stores in shared memory is safe for another to read only after both have "
                 "passed cuda.syncthreads()"),
    ("error", "illegal launch", "a GPU refuses such a launch before any thread runs: at most "
                                "1024 threads per block, and at least one block"),
    ("error", "did not run", "your function stopped with a Python error before any value was "
                             "checked; the message's last part names it (a name that is not "
                             "defined: import it in the cell, e.g. from numba import cuda, "
                             "float32)"),
    ("stopped", "", "a thread that never reaches the end of the kernel keeps the whole launch "
                    "waiting"),
)


@dataclass(frozen=True)
class Puzzle(Step):
    """A step of the on-ramp; see the module docstring.  ``unwritten`` says what an element no
    thread wrote usually means in this puzzle (else :data:`UNWRITTEN`)."""

    unwritten: str = field(default="", repr=False)  # a hint: not in the printed step

    def first_kernel_note(self, verdict) -> str:
        """The sentence added to a failing verdict, or ""."""
        text = str(verdict)
        for status, fragment, note in FIRST_KERNEL:
            if verdict.status == status and fragment in text:
                own = self.unwritten if note is UNWRITTEN else ""
                return f"first kernel? {own or note}"
        return ""

    def check(self, fn, *, timeout_s: float = 30.0, quiet: bool = False):
        """Grade ``fn`` as every step does (printed, returned), then print the note."""
        verdict = super().check(fn, timeout_s=timeout_s, quiet=quiet)
        note = self.first_kernel_note(verdict)
        if note:
            if not quiet:
                print(note)
            verdict.lines.append(note)
        return verdict


def _puzzle(id, title, kernel_name, task, arguments, contract, launch_text, make_cases, hint,
            bounds_hint, kind="kernel", **more) -> Puzzle:
    return Puzzle(id=id, notebook=NOTEBOOK, kind=kind, title=title, kernel_name=kernel_name,
                  task=task, arguments=arguments, contract=contract, launch_text=launch_text,
                  make_cases=make_cases, hint=hint, bounds_hint=bounds_hint, **more)


_ONE_BLOCK = "one block of n threads: thread i is cuda.threadIdx.x"
_SCALE = ("x, out: float32[n]; scale: float32 (1/sqrt(8)); n: int64, the number of floats")
_ROWS = "x, out: float32[tokens * hidden], rows one after the other"
_GRID_2D = ("a 2-D grid of blocks of 8 x 4 threads: x along the row (8 threads), y along the "
            "tokens (4 rows); blocks enough to cover both, so some threads are past an edge")
_PAST_EDGE = ("a thread past the edge ran the body: the grid is rounded up to whole blocks in "
              "both directions, so guard both: if t < tokens and h < hidden")

STEPS = [
    _puzzle("ramp.1", "Map: one thread squares one float", "square",
            "out[i] = x[i] * x[i] for thread i", ("x", "out"), "x, out: float32[n]",
            _ONE_BLOCK, c.square_cases,
            "thread i = cuda.threadIdx.x reads x[i] and writes out[i] = x[i] * x[i]",
            "there are exactly n threads and n floats: thread i touches element i only"),
    _puzzle("ramp.2", "Zip: two inputs, one output", "weigh",
            "out[i] = x[i] * weight[i] for thread i", ("x", "weight", "out"),
            "x, weight, out: float32[n]", _ONE_BLOCK, c.weigh_cases,
            "thread i multiplies the two floats at the same index: x[i] * weight[i]",
            "there are exactly n threads and n floats in each array: thread i touches element "
            "i only"),
    _puzzle("ramp.3", "Guard: more threads than floats", "scale_guarded",
            "out[i] = x[i] * scale for i < n; threads with i >= n do nothing",
            ("x", "out", "scale", "n"), _SCALE + " (n <= 32)",
            "one block of 32 threads, whatever n is", c.guard_cases,
            "if i < n: out[i] = x[i] * scale",
            "thread i >= n has no float: the block has 32 threads but x holds only n floats, so "
            "guard with if i < n", unwritten="a thread whose float exists did nothing: the "
            "guard must let every i < n through (i < n, not i < n - 1)"),
    _puzzle("ramp.4", "Several blocks: the global thread number", "scale_blocks",
            "the same scaling, with i the thread's number in the whole grid",
            ("x", "out", "scale", "n"), _SCALE,
            "ceil(n / 8) blocks of 8 threads: the last block may have threads past the end",
            c.blocks_cases,
            "i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x (which is cuda.grid(1))",
            "thread i >= n has no float: guard with if i < n",
            unwritten="with cuda.threadIdx.x alone every block writes floats 0 to 7 again and "
                      "the rest stay unwritten: block b's threads own floats 8b to 8b + 7, so "
                      "i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x"),
    _puzzle("ramp.5", "Launch: your grid, your blocks", "launch_scale",
            "launch scale_blocks (puzzle ramp.4) with enough blocks that every float has a "
            "thread", ("x", "out", "scale", "n"),
            _SCALE + "; the arrays are on the device (a GPU's memory, or the simulator's)",
            "yours: threads per block a multiple of 32, at most 1024; every float covered, no "
            "block wholly idle", c.launch_cases,
            "threads = 256; blocks = (n + threads - 1) // threads; "
            "scale_blocks[blocks, threads](x, out, scale, n)",
            "a thread past the last float ran scale_blocks' body: the launch rounds up, so the "
            "kernel (puzzle ramp.4) must guard with i < n", kind="launch",
            unwritten="the grid covers fewer threads than floats: round the number of blocks "
                      "up, (n + threads - 1) // threads, not n // threads",
            # the notebook's text asks for whole warps, as 00.4's does
            launch_rules=(threads_multiple_of(WARP),)),
    _puzzle("ramp.6", "2-D grid: a thread per (token, float)", "weigh_rows",
            "out[t * hidden + h] = x[t * hidden + h] * weight[h] for the thread at column h, "
            "row t", ("x", "weight", "out", "tokens", "hidden"),
            f"{_ROWS}; weight: float32[hidden]; tokens, hidden: int64", _GRID_2D,
            c.weigh_rows_cases,
            "h, t = cuda.grid(2) (x first: the column); element (t, h) is at t * hidden + h",
            _PAST_EDGE, unwritten="cuda.grid(2) returns (x, y): here x is the column h "
                                  "(along hidden) and y the token t; swapped, the threads "
                                  "cover the wrong rectangle"),
    _puzzle("ramp.7", "Broadcast: the angle table", "angle_table",
            "out[t * pairs + j] = positions[t] * inv_freq[j]: a column times a row",
            ("positions", "inv_freq", "out", "tokens", "pairs"),
            "positions: int32[tokens]; inv_freq: float32[pairs]; out: float32[tokens * pairs]; "
            "tokens, pairs: int64", _GRID_2D.replace("the row", "the pairs"), c.angle_cases,
            "j, t = cuda.grid(2); out[t * pairs + j] = float32(positions[t]) * inv_freq[j]",
            "a thread past the edge ran the body: guard both, if t < tokens and j < pairs",
            bounds_hints={"positions": "positions has one entry per token: index it with t, "
                                       "the row; inv_freq has one per pair: index it with j"},
            unwritten="cuda.grid(2) returns (x, y): here x is the pair j and y the token t"),
    _puzzle("ramp.8", "Pair swap, interleaved (GPT-J)", "swap_pairs",
            "each pair (x[2p], x[2p+1]) becomes (-x[2p+1], x[2p])", ("x", "out"),
            f"{_ROWS}, hidden even", "one block per token, one thread per float of its row "
            "(blocks of hidden threads)", c.swap_pairs_cases,
            "i = cuda.grid(1); an even i is a pair's first float, out[i] = -x[i + 1]; an odd i "
            "its second, out[i] = x[i - 1]",
            "each thread owns one float of a row of hidden floats; its partner is the other "
            "float of the pair, i + 1 for an even i and i - 1 for an odd one"),
    _puzzle("ramp.9", "Shared memory: the half-split swap (NeoX)", "rotate_half",
            "stage the token's row in shared memory, then out[j] = -row[j + hidden/2] for "
            "j < hidden/2 and out[j] = row[j - hidden/2] after", ("x", "out"),
            f"{_ROWS}, hidden even and at most {c.ROW_MAX}",
            "one block per token, one thread per float of its row (blocks of hidden threads)",
            c.rotate_half_cases,
            "row = cuda.shared.array(64, float32); row[j] = x[...]; cuda.syncthreads(); then "
            "read row[j + h] or row[j - h], h = hidden // 2 (hidden is cuda.blockDim.x)",
            "the row has hidden floats (cuda.blockDim.x); thread j's partner is j + hidden/2 in "
            "the first half and j - hidden/2 in the second", shared=True),
    _puzzle("ramp.10", "Block reduction: a row's sum of squares", "row_sum_squares",
            "out[row] = the sum of x * x over the block's row of n floats",
            ("x", "out"), f"x: float32[rows * n], n a power of two up to {c.ROW_MAX}; "
            "out: float32[rows]", "one block per row, one thread per float (blocks of n "
            "threads)", c.sum_squares_cases,
            "each thread stores its square in a shared array; after cuda.syncthreads() one "
            "thread (threadIdx.x == 0) adds every float of the row's squares and writes "
            "out[row]",
            "thread j of block r owns float r * n + j (n is cuda.blockDim.x); out has one "
            "float per row: out[r]", shared=True,
            unwritten="one thread of each block must write its row's sum: out[cuda.blockIdx.x]"),
    _puzzle("ramp.11", "Warp shuffle: every lane gets the warp's sum", "warp_sum",
            "out[i] = the sum of the 32 floats of thread i's warp, in every lane",
            ("x", "out"), "x, out: float32[32 * warps]", "one block of 32 threads (one warp) "
            "per 32 floats", c.warp_sum_cases,
            "v = x[i]; then for m = 16, 8, 4, 2, 1: v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m); "
            "out[i] = v",
            "each lane owns one float: i = cuda.grid(1)"),
    _puzzle("ramp.12", "Dot product: one thread, one loop", "dot_rows",
            "out[t] = q[t] . k[t], the sum over i < d of q[t * d + i] * k[t * d + i]",
            ("q", "k", "out", "tokens", "d"),
            "q, k: float32[tokens * d] (a head of d floats per token); out: float32[tokens]; "
            "tokens, d: int64", "ceil(tokens / 32) blocks of 32 threads, one per token",
            c.dot_cases,
            "t = cuda.grid(1); if t < tokens: total = float32(0); for i in range(d): total += "
            "q[t * d + i] * k[t * d + i]; out[t] = total",
            "thread t >= tokens has no token: guard with if t < tokens; token t's head is "
            "q[t * d] to q[t * d + d - 1]"),
    _puzzle("ramp.13", "Tiled Q K^T in shared memory: scores of rotated rows", "qk_scores",
            "out[m * tokens + n] = q[m] . k[n] over heads of 8 floats, each block staging its "
            "8 queries and 8 keys in shared memory", ("q", "k", "out", "tokens"),
            "q, k: float32[tokens * 8] (rows rotated by RoPE at positions 0 .. tokens - 1); "
            "out: float32[tokens * tokens]; tokens: int64, a multiple of 8",
            "a 2-D grid of (tokens / 8, tokens / 8) blocks of 8 x 8 threads: block (bx, by) "
            "scores queries 8 by .. 8 by + 7 against keys 8 bx .. 8 bx + 7", c.scores_cases,
            "thread (tx, ty): tiles[0, ty, tx] = q[(8 by + ty) * 8 + tx] and tiles[1, ty, tx] "
            "= k[(8 bx + ty) * 8 + tx]; cuda.syncthreads(); then the dot product of "
            "tiles[0, ty, :] and tiles[1, tx, :] goes to out[(8 by + ty) * tokens + 8 bx + tx]",
            "q and k hold tokens rows of 8 floats; out holds tokens x tokens scores: query m's "
            "row starts at m * tokens", shared=True),
    _puzzle("ramp.14", "Prefix sum: lengths to offsets", "seq_offsets",
            "out[i] = lengths[0] + ... + lengths[i - 1] for i = 0 .. n (out[0] = 0, out[n] = "
            "the total)", ("lengths", "out", "n"),
            "lengths: int32[n], n <= 31; out: float32[n + 1] (whole numbers, exact in float32)",
            "one block of 32 threads: thread i writes out[i]", c.offsets_cases,
            "thread i <= n adds the lengths before it: for j in range(i): total += lengths[j]",
            "out has n + 1 floats and lengths n: thread i <= n writes out[i] and reads "
            "lengths[j] for j < i only",
            bounds_hints={"lengths": "thread i adds lengths[0 .. i - 1], the sequences before "
                                     "it: j < i, never j = i (thread n would read lengths[n], "
                                     "past the end)"},
            unwritten="out has n + 1 offsets: the last one, out[n], is the total of all the "
                      "lengths, written by thread n"),
]
