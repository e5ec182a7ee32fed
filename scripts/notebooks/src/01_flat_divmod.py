# %% [markdown]
# # 01 — The flat kernel: one thread per pair, div/mod indexing
#
# The first kernel is the most direct translation of the formula: launch one CUDA [thread](00_rope_in_one_notebook.ipynb#9-glossary) for
# every pair of every token, in one long 1-D [grid](00_rope_in_one_notebook.ipynb#9-glossary), and let each thread work out *which* token
# and pair it owns with an integer division and a remainder.  It is the seed's first CUDA
# kernel, ported to Numba, with two changes: a bounds guard, and positions read from an array.
#
# In this notebook: the idea, the kernel source, the thread map, correctness against the
# float64 reference, an instruction census that shows what the division costs, and the time
# it takes on an H200.

# %% tags=["nbval-ignore-output"]
# Run this first.  It installs ropelab into this kernel where it is missing (a bare Jupyter,
# Colab): from the course's repository when this notebook is in one, else from the course's
# wheel in this folder.  Then it says where your kernels will run.
from pathlib import Path

try:
    import ropelab
except ImportError:
    project = Path("../pyproject.toml")  # there when this notebook sits in the course's repository
    in_repo = project.is_file() and 'name = "ropelab"' in project.read_text()
    # %pip install -q {".." if in_repo else "ropelab-*.whl"}
    import ropelab

import matplotlib.pyplot as plt
import numpy as np

from ropelab.measure import charts, census as ptx
from ropelab import lessons, reference
from ropelab.problem import RopeProblem

print(ropelab.format_description())

# %% [markdown]
# ## The idea
#
# A `[tokens, hidden]` float32 array holds `tokens * hidden / 2` pairs, stored one after the
# other in row-major order.  Number them `0, 1, 2, ...` and give pair number `idx` to global
# thread number `idx`:
#
# ```
# idx   = blockIdx.x * blockDim.x + threadIdx.x     # cuda.grid(1)
# token = idx // n_pairs                            # which row
# pair  = idx %  n_pairs                            # which pair inside the row
# ```
#
# Then the thread computes that pair's frequency `base ** (-2 pair / hidden)`, the angle
# `position[token] * frequency`, a cosine and a sine, and rotates its two floats.  Blocks have
# 256 threads, and there are as many [blocks](00_rope_in_one_notebook.ipynb#9-glossary) as it takes to cover every pair.
#
# ## The kernel
#
# This is the code that runs, printed from `ropelab` (the course never pastes a kernel).
# `lessons.excerpt` prints one region of a kernel file, marked there with `# ex: begin` and
# `# ex: end` comment lines:

# %%
print(lessons.excerpt(ropelab.kernels.flat, "rope_flat"))

# %% [markdown]
# Two details carry the whole course:
#
# * **`float32(...)` around every operand.**  In Numba, a bare literal such as `2.0`, or an
#   integer divided by an integer, is a float64.  One float64 operand turns the whole
#   expression into float64 arithmetic, which an H200 runs at a fraction of its float32 rate.
#   The census below checks that the [fast-math](00_rope_in_one_notebook.ipynb#9-glossary) build contains no float64 instruction at all.
# * **`if idx < total_pairs`.**  The grid is rounded up to whole blocks, so the last block
#   usually has threads with no pair.  The seed kernel has no such guard and reads and writes
#   past the end of both arrays whenever the pair count is not a multiple of 256.
#
# `rope_flat` has no `@cuda.jit` line: `ropelab` applies `cuda.jit(fastmath=True)` to it when it
# first launches it (notebook 00, section 7), with `ceil(pairs / 256)` blocks of 256 threads,
# and passes `n_pairs` as a `uint64` so that the index math above stays unsigned.
#
# ## The thread map
#
# Which thread writes which float?  `lessons.trace_threads` runs the real kernel on the
# simulator with arrays that record the `(blockIdx, threadIdx)` of every write.  With 3 tokens
# of 20 floats and, for the picture, blocks of 8 threads:

# %%
tmap = lessons.trace_threads("flat", tokens=3, hidden=20, threads_per_block=8)
print(tmap.summary())
lessons.plot_thread_map(tmap, label="global")
plt.show()

# %% [markdown]
# Each colour is a block, each number the global thread index.  Pairs are handed out in
# memory order, so consecutive threads touch consecutive floats: loads and stores of a [warp](00_rope_in_one_notebook.ipynb#9-glossary)
# [coalesce](00_rope_in_one_notebook.ipynb#9-glossary) into a few wide memory transactions.  Blocks ignore row boundaries (block 1 holds
# the end of token 0 and the start of token 1), which is why every thread has to divide.
# The last block launched 8 threads for 6 pairs: two threads fail the guard and do nothing.
#
# At a real size the waste is small, and the grid is large:

# %%
for tokens, hidden in [(7, 130), (4096, 1024), (32768, 4096)]:
    problem = RopeProblem(tokens, 1, hidden, hidden)
    blocks, threads = ropelab.kernels.flat.launch_config(problem)
    idle = blocks * threads - tokens * hidden // 2
    print(f"{tokens:>6} x {hidden:<5} -> {blocks:>7} blocks of {threads} threads, {idle:>3} idle")

# %% [markdown]
# ## Correctness
#
# The kernel is checked against the float64 reference on shapes that fill no block evenly,
# with random positions up to 4095, with fast-math (what ships) and without.  Each line states
# the tolerance of `ropelab.tolerance.rope_atol` for that input and the verdict; the raw error
# is shown in the next cell, unchecked, because the simulator computes sines in float64 and a
# GPU in float32.

# %%
rng = np.random.default_rng(1)
results = []
for tokens, hidden in [(1, 2), (7, 130), (3, 2048)]:
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    pos = rng.integers(0, 4096, tokens).astype(np.int32)
    for fastmath in (True, False):
        y = ropelab.rope(x, variant="flat", positions=pos, fastmath=fastmath)
        name = "flat" if fastmath else "flat:exact"
        results.append(lessons.check(name, x, y, pos, fastmath=fastmath))
        print(results[-1].line)

# %%
# NBVAL_IGNORE_OUTPUT
for r in results:
    print(f"{r.variant:<10} {'x'.join(map(str, r.shape)):<8} max|error| {r.max_error:.2e} ({ropelab.TARGET})")

# %% [markdown]
# ## Census: what the division costs
#
# `ropelab.measure.census.census()` compiles every kernel to [PTX](00_rope_in_one_notebook.ipynb#9-glossary) for the H200 (compute capability 9.0),
# in a child process that needs no GPU, and counts instructions by kind.  PTX is the compiler's
# virtual instruction set, one step above the GPU's machine code ([SASS](00_rope_in_one_notebook.ipynb#9-glossary)), and its counts are
# deterministic for the pinned compiler versions, so this cell's output is checked.

# %%
census = ptx.census()
flat_fast = ptx.row(census, "flat", fastmath=True)
flat_exact = ptx.row(census, "flat", fastmath=False)
for label, r in (("fast-math (shipped)", flat_fast), ("precise", flat_exact)):
    print(f"{label:<20} instructions {r['instructions']:>4}, integer div/rem {r['int_divrem']}"
          f" {r['int_divrem_ops']}, float64 {r['f64']}, special functions {r['sfu'] or '-'}")
print("global loads by width :", flat_fast["ld_global"], " stores:", flat_fast["st_global"])

# %% [markdown]
# Read the first line from left to right:
#
# * **Integer division.**  The census lists every `div` and `rem` the compiler emitted.  The
#   kernel divides once, on unsigned 64-bit integers, and gets the remainder with a multiply
#   and a subtraction; the compiler adds a 32-bit copy of the division as a fast path for when
#   both operands fit in 32 bits.  (On *signed* integers Numba keeps Python's floor-division
#   semantics: a signed `div.s64` with sign fix-ups around it, and the census of step 01.1
#   refuses it; the comment in the kernel says why it is unsigned.)  None of these is a
#   hardware instruction: a GPU has no integer
#   divider, and each expands into a sequence of about twenty instructions, the 64-bit one
#   into a longer subroutine.  Notebook 02 removes the division.
# * **Special functions.**  With fast-math, `math.pow` becomes `lg2` and `ex2`, and `math.sin`
#   and `math.cos` become `sin.approx` and `cos.approx`: four calls to the special function
#   unit per pair.  Notebooks 04 and 05 remove most of them.
# * **No float64** in the fast-math build: the `float32(...)` wrapping worked.
# * The precise build is several times longer: [libdevice](00_rope_in_one_notebook.ipynb#9-glossary)'s accurate `sinf`/`cosf` with their
#   slow path for large angles (the float64 there is its range reduction, not our arithmetic).
#
# Loads: three 32-bit loads (the two floats and the position) and two 32-bit stores per
# thread.  The arithmetic is a few dozen instructions for 16 bytes of [traffic](00_rope_in_one_notebook.ipynb#9-glossary), and an H200
# executes instructions much faster than its memory delivers bytes.  Whether the division
# matters is therefore a question for the clock, not for the census.
#
# ## Timing on an H200
#
# Every time in this course comes from `python -m ropelab bench` on a GPU, recorded under
# `data/bench/` with the GPU, driver and versions.  Each call is timed with [CUDA events](00_rope_in_one_notebook.ipynb#9-glossary)
# after a fill kernel has evicted the 60 MB [L2](00_rope_in_one_notebook.ipynb#9-glossary) cache, so the kernel reads from memory as it
# would inside a model (notebook 07 explains why that matters).  The device-to-device copy of
# the same bytes, timed the same way, is the [roof](00_rope_in_one_notebook.ipynb#9-glossary): RoPE reads and writes every float once, so
# it cannot be faster than a copy.
# Each row gives the median of many single launches, their [p20-p80](00_rope_in_one_notebook.ipynb#9-glossary) spread (from the 20th
# to the 80th percentile), the bandwidth that time implies, and its share of the roof.

# %%
bench = lessons.recorded("bench")
if bench is not None:
    print(lessons.provenance(bench))
    print(lessons.bench_table(bench, ["torch_copy", "flat", "cuda_flat"]))

# %%
if bench is not None:
    charts.time_chart(bench, variants=["torch_copy", "flat", "cuda_flat"])
    plt.show()

# %% [markdown]
# How to read them.  The table's `p20-p80 us` column is the range of the middle 60 percent of
# the launches behind each median, and its last column divides by the roof: the fastest
# device copy measured in the run, the copy of the 1 GB shape.  The chart has one panel per
# shape, each on its own linear axis starting at zero (a panel switches to a log axis only
# when one bar is over ten times another), so bar lengths compare directly; the
# whiskers are the same 20-80 percent range, and the dashed line is the copy of that shape's
# own bytes.  On the small shapes the whole difference between the bars is about a
# microsecond, and notebook 07 shows that a recorded time at these sizes moves by several
# percent from one run to the next: read them as "close to the copy", not as a ranking.  The
# 1 GB shape, read from the record:

# %%
if bench is not None:
    big = "32768x4096"
    for v in ("copy_d2d", "torch_copy", "flat", "cuda_flat"):
        r = lessons.bench_row(bench, v, big)
        print(f"{v:<11} {r['median_us']:>7.1f} us  {100 * lessons.share_of_roof(bench, v, big):5.1f}% of the roof")
    twin = lessons.bench_row(bench, "flat", big)["median_us"] / lessons.bench_row(bench, "cuda_flat", big)["median_us"]
    print(f"flat / cuda_flat time ratio: {twin:.2f}")

# %% [markdown]
# `cuda_flat` is the same algorithm compiled by NVIDIA's compiler (notebook 03 returns to it),
# and `flat` now takes the same time as its CUDA C++ twin on every shape.  It did not always:
# with a *signed* thread index, Numba's version paid Python's floor-division fix-ups and a
# negative-index check on every access (the census above counts what is left after the switch
# to unsigned), and the first recorded run had it well behind its twin on the 1 GB shape.
# Both kernels stay clearly below the copy there: a division, a `pow`, a sine and a cosine per
# pair, with one 4-byte load per float, do not keep enough bytes in flight (notebook 03).
# At the seed's sizes (17 to 67 MB) even the copy stays well below the roof: a kernel that
# lasts {{ bench.seed_shapes_us }} spends a noticeable share of it filling and draining the GPU.  Notebook 07
# explains how these times were taken and why the seed's own table could not be trusted.
#
# On a GPU, this cell measures the kernel live with the same method (the output differs from
# machine to machine and is not checked):

# %%
# NBVAL_IGNORE_OUTPUT
print(lessons.live_bench(["flat"]))

# %% [markdown]
# ## Takeaways
#
# * One thread per pair in memory order gives coalesced loads and stores with almost no
#   thought, at the price of an integer division and a remainder per thread.
# * Guard the tail: a grid is a whole number of blocks, the data rarely is.
# * Keep float32 math float32 in Numba: wrap literals and integer operands in `float32()`,
#   and let the census confirm there is no float64 left.
# * The census counts what the compiler emitted; only a recorded GPU run says what it costs.


# %% [markdown]
# ## Build it yourself
#
# Four graded steps take you from a flat thread number to the seed's whole kernel, written by
# you.  Each cell holds a signature, a docstring that states the contract, and `pass`; the cell
# after it grades your function and never stops the notebook.  Solutions and the mistakes the
# grader recognizes: `notebooks/solutions/01_flat_divmod.py`.
#
# The rules of this notebook, enforced by the grader:
#
# * **One unsigned division.**  Make the thread number unsigned first, `i = uint64(idx)`
#   (`cuda.grid(1)` is a signed `int64`), then `token = i // n_pairs`.  The census rejects a
#   signed division (`div.s64`): Numba gives a signed `//` Python's floor semantics.
# * **No `%`.**  Take the pair as `i - token * n_pairs`, a multiply and a subtract.  (Next to
#   `i // n_pairs` the compiler would make that of `i % n_pairs` by itself, so the census
#   cannot tell them apart; the grader reads your source instead.  Written out, the cost is
#   in plain sight.)
# * **No float64.**  `float32(...)` around integer operands: in Numba an `int32` times a
#   `float32` is computed in float64.  So is a comparison of a signed with an unsigned integer
#   (`cuda.threadIdx.x < n_pairs`, an `int32` against a `uint64`): no integer type holds both,
#   so Numba compares them as floats.  Cast one side: `uint64(cuda.threadIdx.x) < n_pairs`.
# * **The census counts the divisions your source runs.**  The limit is on the integer
#   divisions on one path through your kernel's code, each loop's body counted once, read from
#   the code Numba hands the CUDA compiler before it optimizes.  The compiled PTX holds more
#   than you wrote.  One `//` of 64-bit values is a 64-bit division and a 32-bit one on
#   exclusive branches (a fast path for operands that fit in 32 bits).  A grid-stride loop over
#   a signed `cuda.grid(1)` with `//` inside compiles to 12 divisions in the PTX: a trip count
#   the compiler adds, the division in each of four unrolled copies and in the loop that runs
#   the leftover trips; the census counts 1.
#   The same loop over `uint64` values compiles to 2, and counts 1.  A division before a loop
#   and one inside it count 2.
#
# ### Step 01.1: token and pair from a flat index
#
# Before any rotation: the angle of every pair.  Thread `idx` owns pair number `idx` of the
# whole batch, row after row; it finds its token (the row) and its pair within the row, and
# writes `positions[token] * inv_freq[pair]`.  The grader launches `ceil(total_pairs / 64)`
# blocks of 64 threads on 1, 15 and 325 pairs (rows of 1, 5 and 65 pairs).

# %%
from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    """Thread idx < total_pairs writes out[idx] = float32(positions[token]) * inv_freq[pair],
    where pair number idx of the batch is pair `pair` of row `token`.

    out: float32[total_pairs]; positions: int32[tokens]; inv_freq: float32[n_pairs];
    n_pairs: uint64, pairs per row; total_pairs: int64 = tokens * n_pairs.
    One unsigned division, no %, no float64.
    """
    pass

# %%
from ropelab.grader import steps

verdict = steps.check(pair_angles, "01.1")

# %% [markdown]
# `verdict.show()` draws the kernel you just graded on the step's small case: which thread
# wrote each element of `out` (colour = block, number = global thread), which read `x` (where
# the step has one), your output beside the reference with wrong cells outlined, and each
# thread's reads and writes.  With the empty starter nothing is written yet: run it again once
# `pair_angles` has a body, and after every failing verdict.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Step 01.2: the launch
#
# Now launch it yourself: a host function that computes the grid from the shape and calls
# `pair_angles[blocks, threads](...)`.  One thread per pair: `total_pairs` threads, rounded up to
# whole blocks of at most 1024 threads.  The grader records the launch and checks that every
# pair is covered, that no block is wholly idle, and that a GPU would accept it.  Your function
# gets plain Python numbers, as a shape computation gives them; pass each to the kernel with
# the type of step 01.1's contract, `uint64(n_pairs)`: given a Python int, a GPU would compile
# a second `pair_angles` for an int64 `n_pairs`, with the signed division step 01.1 removed.
# The grader refuses such a launch, and holds the kernel you launch to step 01.1's rules.

# %%
def launch_pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    """Launch pair_angles (step 01.1) on these device arrays with one thread per pair:
    threads per block at most 1024, enough blocks for total_pairs threads, none wholly idle.
    """
    pass

# %%
verdict = steps.check(launch_pair_angles, "01.2")

# %% [markdown]
# ### Step 01.3: each pair's frequency
#
# The flat kernel computes its frequencies instead of reading them from a table: pair `p` of a
# row of `hidden = 2 n_pairs` floats turns at `1 / base ** (2p / hidden)` radians per token
# (notebook 00, section 1).  Write it for one row, one thread per pair, entirely in float32:
# `math.pow` for the power, `float32(...)` around the integers of the exponent (in Numba an
# integer divided by an integer is a float64) and around the `1.0`.  With fast-math, `math.pow`
# compiles to two special-function instructions, `lg2.approx` and `ex2.approx`.

# %%
import math

from numba import cuda, float32


@cuda.jit(fastmath=True)
def pair_frequencies(out, n_pairs, base):
    """Thread pair < n_pairs writes out[pair] = 1 / base ** (2 pair / hidden), hidden = 2 n_pairs,
    computed in float32; threads with pair >= n_pairs do nothing.

    out: float32[n_pairs]; n_pairs: int64; base: float32 = 10000.
    Launched with ceil(n_pairs / 64) blocks of 64 threads.  No float64.
    """
    pass

# %%
verdict = steps.check(pair_frequencies, "01.3")

# %% [markdown]
# ### Step 01.4: the flat kernel
#
# Everything together: `rope_flat`, as printed at the top of this notebook, from an empty body.
# Guard, token and pair as in step 01.1, the pair's two floats at `2i` and `2i + 1`, and its
# frequency computed as in step 01.3:
#
# $$\theta = \text{position} \cdot \text{base}^{-2\,\text{pair} / \text{hidden}},
# \qquad \text{hidden} = 2\,n\_\text{pairs},$$
#
# in float32 (`math.pow`, `math.cos`, `math.sin`).  Then rotate: `out[2i] = x0 c - x1 s`,
# `out[2i + 1] = x0 s + x1 c`.  On a pass the grader shows your census next to `rope_flat`'s,
# and on a GPU the cell after it times your kernel against a device copy of the same bytes.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    """Interleaved RoPE, one thread per pair: thread idx < total_pairs rotates pair number idx
    of the batch, the floats x[2 idx] and x[2 idx + 1], by the angle
    positions[token] * base ** (-2 pair / hidden), into the same places of out.

    x, out: float32[tokens * hidden]; positions: int32[tokens]; n_pairs: uint64 = hidden / 2;
    total_pairs: int64 = tokens * n_pairs; base: float32 = 10000.
    One unsigned division, no %, no float64.
    """
    pass

# %%
verdict = steps.check(my_rope_flat, "01.4")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing kernel is timed against a device copy of the same bytes.
verdict.time()
