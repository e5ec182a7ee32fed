# %% [markdown]
# # 01 — The flat kernel: one thread per pair, div/mod indexing
#
# The first kernel is the most direct translation of the formula: launch one CUDA thread for
# every pair of every token, in one long 1-D grid, and let each thread work out *which* token
# and pair it owns with an integer division and a remainder.  It is the seed's first CUDA
# kernel, ported to Numba, with two changes: a bounds guard, and positions read from an array.
#
# In this notebook: the idea, the kernel source, the thread map, correctness against the
# float64 reference, an instruction census that shows what the division costs, and the time
# it takes on an H200.

# %%
# NBVAL_IGNORE_OUTPUT
import os

os.environ["ROPELAB_QUIET"] = "1"  # no target notice on stderr; it is printed below instead

import matplotlib.pyplot as plt
import numpy as np

import ropelab
from ropelab.measure import charts, census as ptx
from ropelab import course, reference
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
# 256 threads, and there are as many blocks as it takes to cover every pair.
#
# ## The kernel
#
# This is the code that runs, printed from `ropelab` (the course never pastes a kernel).
# `course.excerpt` prints one region of a kernel file, marked there with `# ex: begin` and
# `# ex: end` comment lines:

# %%
print(course.excerpt(ropelab.kernels.flat, "rope_flat"))

# %% [markdown]
# Two details carry the whole course:
#
# * **`float32(...)` around every operand.**  In Numba, a bare literal such as `2.0`, or an
#   integer divided by an integer, is a float64.  One float64 operand turns the whole
#   expression into float64 arithmetic, which an H200 runs at a fraction of its float32 rate.
#   The census below checks that the fast-math build contains no float64 instruction at all.
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
# Which thread writes which float?  `course.trace_threads` runs the real kernel on the
# simulator with arrays that record the `(blockIdx, threadIdx)` of every write.  With 3 tokens
# of 20 floats and, for the picture, blocks of 8 threads:

# %%
tmap = course.trace_threads("flat", tokens=3, hidden=20, threads_per_block=8)
print(tmap.summary())
course.plot_thread_map(tmap, label="global")
plt.show()

# %% [markdown]
# Each colour is a block, each number the global thread index.  Pairs are handed out in
# memory order, so consecutive threads touch consecutive floats: loads and stores of a warp
# coalesce into a few wide memory transactions.  Blocks ignore row boundaries (block 1 holds
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
        results.append(course.check(name, x, y, pos, fastmath=fastmath))
        print(results[-1].line)

# %%
# NBVAL_IGNORE_OUTPUT
for r in results:
    print(f"{r.variant:<10} {'x'.join(map(str, r.shape)):<8} max|error| {r.max_error:.2e} ({ropelab.TARGET})")

# %% [markdown]
# ## Census: what the division costs
#
# `ropelab.measure.census.census()` compiles every kernel to PTX for the H200 (compute capability 9.0),
# in a child process that needs no GPU, and counts instructions by kind.  PTX is the compiler's
# virtual instruction set, one step above the GPU's machine code (SASS), and its counts are
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
#   semantics, which costs a second division and sign fix-ups: the comment in the kernel says
#   why it is unsigned.)  None of these is a hardware instruction: a GPU has no integer
#   divider, and each expands into a sequence of about twenty instructions, the 64-bit one
#   into a longer subroutine.  Notebook 02 removes the division.
# * **Special functions.**  With fast-math, `math.pow` becomes `lg2` and `ex2`, and `math.sin`
#   and `math.cos` become `sin.approx` and `cos.approx`: four calls to the special function
#   unit per pair.  Notebooks 04 and 05 remove most of them.
# * **No float64** in the fast-math build: the `float32(...)` wrapping worked.
# * The precise build is several times longer: libdevice's accurate `sinf`/`cosf` with their
#   slow path for large angles (the float64 there is its range reduction, not our arithmetic).
#
# Loads: three 32-bit loads (the two floats and the position) and two 32-bit stores per
# thread.  The arithmetic is a few dozen instructions for 16 bytes of traffic, and an H200
# executes instructions much faster than its memory delivers bytes.  Whether the division
# matters is therefore a question for the clock, not for the census.
#
# ## Timing on an H200
#
# Every time in this course comes from `python -m ropelab bench` on a GPU, recorded under
# `data/bench/` with the GPU, driver and versions.  Each call is timed with CUDA events
# after a fill kernel has evicted the 60 MB L2 cache, so the kernel reads from memory as it
# would inside a model (notebook 07 explains why that matters).  The device-to-device copy of
# the same bytes, timed the same way, is the roof: RoPE reads and writes every float once, so
# it cannot be faster than a copy.

# %%
bench = course.recorded("bench")
if bench is not None:
    print(course.provenance(bench))
    print(course.bench_table(bench, ["torch_copy", "flat", "cuda_flat"]))

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
        r = course.bench_row(bench, v, big)
        print(f"{v:<11} {r['median_us']:>7.1f} us  {100 * course.share_of_roof(bench, v, big):5.1f}% of the roof")
    twin = course.bench_row(bench, "flat", big)["median_us"] / course.bench_row(bench, "cuda_flat", big)["median_us"]
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
print(course.live_bench(["flat"]))

# %% [markdown]
# ## Takeaways
#
# * One thread per pair in memory order gives coalesced loads and stores with almost no
#   thought, at the price of an integer division and a remainder per thread.
# * Guard the tail: a grid is a whole number of blocks, the data rarely is.
# * Keep float32 math float32 in Numba: wrap literals and integer operands in `float32()`,
#   and let the census confirm there is no float64 left.
# * The census counts what the compiler emitted; only a recorded GPU run says what it costs.
#
# ## Exercise: the flat kernel's index math
#
# Below is `rope_flat` with its index math cut out.  Write the three marked lines (each `...`):
#
# 1. the guard: only a thread whose `idx` is below `total_pairs` has a pair;
# 2. `token`: which row holds pair number `i` (`n_pairs` pairs per row);
# 3. `pair`: which pair of that row, **without a second division** (`i - token * n_pairs`).
#
# Keep the index math unsigned (`i` is a `uint64`, as are `n_pairs` and the values derived
# from them): a signed `//` or `%` in Numba is a floor division with sign fix-ups, and mixing
# `int64` with `uint64` silently computes in float64.  The grader launches your kernel with
# `ceil(total_pairs / 64)` blocks of 64 threads on 1x2, 3x10 and 5x130 floats with random
# positions, then compares its census with `rope_flat`'s: float64 instructions and integer
# divisions must not exceed ropelab's.  Solution: `notebooks/solutions/01_flat_divmod.py`.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if ...:  # write the guard
        i = uint64(idx)
        token = ...  # write: the row of pair number i
        pair = ...  # write: the pair within that row, with no second division
        e = i + i  # first float of the pair
        x0 = x[e]
        x1 = x[e + uint64(1)]
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c

# %%
from ropelab.course import exercises

verdict = exercises.check(my_rope_flat, "01-flat-index")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing kernel is timed against a device copy of the same bytes.
verdict.time()
