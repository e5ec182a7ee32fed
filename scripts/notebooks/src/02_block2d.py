# %% [markdown]
# # 02 — One block per token: indexing without division
#
# Notebook 01 paid an integer division and a remainder in every [thread](00_rope_in_one_notebook.ipynb#9-glossary) to recover
# `(token, pair)` from a flat thread number.  The launch can hand out those coordinates
# directly: make the [grid](00_rope_in_one_notebook.ipynb#9-glossary) one [block](00_rope_in_one_notebook.ipynb#9-glossary) per token and the block one thread per pair, and
# `blockIdx.x` *is* the token, `threadIdx.x` *is* the pair.  This is the seed's second kernel.
#
# It removes the division, and it brings a new limit with it: a CUDA block has at most 1024
# threads.  This notebook shows both, then asks the H200 whether the division mattered.

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

from ropelab import lessons
from ropelab.measure import census as ptx
from ropelab.problem import RopeProblem

print(ropelab.format_description())

# %% [markdown]
# ## The idea
#
# ```
# token = blockIdx.x           # one block per row
# pair  = threadIdx.x          # one thread per pair of the row
# ```
#
# The seed launches exactly `hidden / 2` threads per block.  That works up to `hidden = 2048`
# and then fails to launch, because 1025 threads per block is not a valid configuration on
# any CUDA GPU.  `ropelab`'s version keeps the seed's mapping and adds a *stride loop*: thread
# `t` rotates pairs `t, t + blockDim.x, t + 2 blockDim.x, ...` of its row, so any width works
# with at most 1024 threads.  For rows of up to 2048 floats the loop runs once, exactly as in
# the seed.

# %%
print(lessons.excerpt(ropelab.kernels.block2d, "rope_block2d"))

# %% [markdown]
# The frequency exponent step `2 / hidden` is computed once per thread, outside the loop, and
# the row offset `token * hidden` once per block: everything that depends only on the token
# moves out of the per-pair work.  The launcher picks one thread per pair, rounded up to a
# whole [warp](00_rope_in_one_notebook.ipynb#9-glossary) (32 threads) and capped at the limit of 1024 (`launch_config` below).
#
# ## The thread map
#
# Three tokens of 20 floats (10 pairs): three blocks, and thread `t` of every block owns
# pair `t`.  The block is rounded up to one warp, so 22 of its 32 threads have nothing to do.

# %%
tmap = lessons.trace_threads("block2d", tokens=3, hidden=20)
print(tmap.summary())
lessons.plot_thread_map(tmap)
plt.show()

# %% [markdown]
# The same rows with blocks of only 4 threads show the stride loop: thread 0 rotates pairs
# 0, 4 and 8 of its row, thread 1 pairs 1, 5 and 9, and so on.  Neighbouring threads still
# touch neighbouring floats on each pass, so accesses stay [coalesced](00_rope_in_one_notebook.ipynb#9-glossary).

# %%
tmap = lessons.trace_threads("block2d", tokens=3, hidden=20, threads_per_block=4)
print(tmap.summary())
lessons.plot_thread_map(tmap)
plt.show()

# %% [markdown]
# ## Where it breaks
#
# The mapping ties the block size to the row width, and that has three consequences:

# %%
print(f"{'hidden':>6} {'pairs':>6} {'threads':>8} {'passes':>7} {'idle threads':>13}")
for hidden in (64, 130, 1024, 2048, 4096, 6144):
    problem = RopeProblem(1, 1, hidden, hidden)
    blocks, threads = ropelab.kernels.block2d.launch_config(problem)
    pairs = hidden // 2
    passes = -(-pairs // threads)
    idle = passes * threads - pairs
    print(f"{hidden:>6} {pairs:>6} {threads:>8} {passes:>7} {idle:>13}")

# %% [markdown]
# * **Wide rows** (`hidden > 2048`) exceed 1024 threads: the seed's launch fails, ours loops.
# * **Ragged rows** waste the rest of the last warp: 65 pairs need 96 threads, a third idle.
# * **Narrow rows** make tiny blocks.  An H200 [SM](00_rope_in_one_notebook.ipynb#9-glossary) holds at most 32 blocks and 2048 threads
#   at a time, so blocks of 32 threads can fill only half of its thread slots, and there is
#   less work in flight to hide memory [latency](00_rope_in_one_notebook.ipynb#9-glossary).  One head of 64 floats per block is exactly
#   that case.
#
# `ropelab` checks the block size before anything runs; asking for more than CUDA allows is
# an error with a message, not a failed launch:

# %%
x = np.ones((2, 8), dtype=np.float32)
try:
    ropelab.rope(x, variant="block2d", threads_per_block=2048)
except ropelab.RopeInputError as err:
    print("RopeInputError:", err)

# %% [markdown]
# ## Correctness
#
# Ragged rows, rows wider than one pass (`hidden = 4100`, 2050 pairs, three passes of 1024
# threads) and a block narrower than the row:

# %%
rng = np.random.default_rng(2)
results = []
cases = [((1, 2), None), ((7, 130), None), ((3, 2048), None), ((2, 4100), None), ((5, 130), 32)]
for (tokens, hidden), tpb in cases:
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    pos = rng.integers(0, 4096, tokens).astype(np.int32)
    y = ropelab.rope(x, variant="block2d", positions=pos, threads_per_block=tpb)
    name = "block2d" if tpb is None else f"block2d/{tpb}"
    results.append(lessons.check(name, x, y, pos))
    print(results[-1].line)

# %%
# NBVAL_IGNORE_OUTPUT
for r in results:
    print(f"{r.variant:<11} {'x'.join(map(str, r.shape)):<8} max|error| {r.max_error:.2e} ({ropelab.TARGET})")

# %% [markdown]
# ## Census against 01

# %%
census = ptx.census()
print(f"{'variant':<9} {'instructions':>12} {'div/rem':>8} {'float64':>8}  special functions")
for name in ("flat", "block2d"):
    r = ptx.row(census, name, fastmath=True)
    print(f"{name:<9} {r['instructions']:>12} {r['int_divrem']:>8} {r['f64']:>8}  {r['sfu']}")

# %% [markdown]
# The integer division is gone, yet the [PTX](00_rope_in_one_notebook.ipynb#9-glossary) is only a few instructions shorter: a PTX `div`
# is one line that the assembler expands into a long sequence (and the 64-bit one into a
# subroutine).  The machine code shows the real difference.  The [SASS](00_rope_in_one_notebook.ipynb#9-glossary) census recorded under
# `data/census/` (the same PTX, assembled for the H200 and disassembled with [`nvdisasm`](00_rope_in_one_notebook.ipynb#9-glossary);
# static counts, not executed ones):

# %%
sass_census = ptx.census(sass=True)  # the recorded SASS counts, read without nvdisasm
for name in ("flat", "block2d"):
    r = ptx.row(sass_census, name, fastmath=True)
    print(f"{name:<9} PTX {r['instructions']:>4}  SASS {r['sass_instructions']:>4}")

# %% [markdown]
# The special functions (`lg2`, `ex2`, `sin`, `cos`) are untouched, and so are the memory
# accesses: the same floats are read and written, in the same coalesced pattern.  (Static
# counts overstate what runs: a thread executes only one of the division's two paths.)
#
# ## Timing on an H200
#
# Recorded with `python -m ropelab bench` (cold [L2](00_rope_in_one_notebook.ipynb#9-glossary), [CUDA events](00_rope_in_one_notebook.ipynb#9-glossary); see notebook 07).  The chart
# divides each bandwidth by the [roof](00_rope_in_one_notebook.ipynb#9-glossary), the fastest copy of the whole run; the black line over
# each shape marks where the copy of that shape's own bytes reached, which is below the roof
# on the small shapes (a kernel level with it is as fast as a copy there).
# Each row gives the median of many single launches, their [p20-p80](00_rope_in_one_notebook.ipynb#9-glossary) spread (from the 20th
# to the 80th percentile), the bandwidth that time implies, and its share of the roof:

# %%
bench = lessons.recorded("bench")
if bench is not None:
    print(lessons.provenance(bench))
    print(lessons.bench_table(bench, ["torch_copy", "flat", "block2d"]))

# %%
if bench is not None:
    lessons.plot_roof(bench, ["flat", "block2d"])
    plt.show()

# %% [markdown]
# Time of `block2d` relative to `flat` on each shape (below 1.0: `block2d` is faster):

# %%
if bench is not None:
    print(lessons.relative_times(bench, "flat", ["block2d"]))

# %% [markdown]
# Set the two reductions side by side: the machine code lost more than half its instructions,
# and the table above says `block2d` is *slower* than `flat` on every shape, not faster.  The
# range, from the record:

# %%
if bench is not None:
    ratios = [lessons.bench_row(bench, "block2d", s)["median_us"] / lessons.bench_row(bench, "flat", s)["median_us"]
              for s in ("4096x512", "4096x1024", "8192x512", "8192x1024", "32768x4096")]
    print(f"block2d takes {100 * (min(ratios) - 1):.0f} to {100 * (max(ratios) - 1):.0f} percent longer than flat")

# %% [markdown]
# So the division was not what limited `flat`.  Since its index math became unsigned
# (notebook 01) it divides once per thread, and removing even that bought nothing.  Float32
# RoPE moves 16 bytes per pair and spends a few dozen instructions on them; where a kernel
# waits on memory, fewer instructions change nothing.  What `block2d` lost is found by
# changing one thing at a time.
#
# ## Why `block2d` loses: controlled variants
#
# `ropelab.measure.controls` holds kernels that each differ from `block2d` (or `flat`) in one
# respect.  Timed in one run with the references (`python -m ropelab.measure.bench.controls`, [cold L2](00_rope_in_one_notebook.ipynb#9-glossary),
# the entries interleaved round by round), the time ratio of each pair says what that one
# respect costs.  What each control changes, and which result would confirm which suspect:

# %%
import inspect

from ropelab.measure import controls
from ropelab.measure.bench import format_rows
from ropelab.measure import profile as ncu

block2d_entries = [n for n, e in controls.KERNELS.items() if e.question == "block2d"]
for name in block2d_entries:
    e = controls.KERNELS[name]
    if e.role == "control":
        print(f"{name} (vs {e.reference}): {e.isolates}.\n    reading: {e.confirms}.")

# %% [markdown]
# The recorded times (`ratio`: median time over the reference's median, same shape and run;
# `round lo-hi`: the range of that ratio over the run's rounds; `of copy`: the device copy of
# the same bytes, same run):

# %%
ctl = lessons.recorded("controls")
if ctl is not None:
    print(lessons.provenance(ctl))
    print(format_rows([r for r in ctl["rows"] if r["entry"] in block2d_entries + ["copy_d2d"]],
                      "controls"))

# %% [markdown]
# The readings, collected from the rows above:

# %%
if ctl is not None:
    ctl_row = {(r["entry"], r["shape"]): r for r in ctl["rows"]}

    def ratio_range(entry, shape_list):
        ratios = [ctl_row[(entry, s)]["vs_reference"] for s in shape_list]
        return f"{min(ratios):.2f} to {max(ratios):.2f}"

    small = ("4096x512", "8192x1024")
    every = small + ("32768x4096",)
    print("block2d / flat                 on", ", ".join(every), ":", ratio_range("block2d", every))
    print("block2d_loads_first / block2d  on", ", ".join(every), ":", ratio_range("block2d_loads_first", every))
    print("block2d_pos_in_loop / block2d  on", ", ".join(small), ":", ratio_range("block2d_pos_in_loop", small))
    print("block2d_no_loop / block2d      on", ", ".join(small), ":", ratio_range("block2d_no_loop", small))
    print("flat_serial_pos / flat         on", ", ".join(every), ":", ratio_range("flat_serial_pos", every))
    print("flat_block2d_exponent / flat   on", ", ".join(every), ":", ratio_range("flat_block2d_exponent", every))
    print("block2d_256 / block2d          on 32768x4096 :", ratio_range("block2d_256", ("32768x4096",)))

# %% [markdown]
# * Writing the loads first in the source (`block2d_loads_first`) changes nothing: the
#   compiler already schedules them as early as it can.
# * Reading the position next to the pair's loads (`block2d_pos_in_loop`), or dropping the
#   loop so that the position read and the pair's loads share one block of code
#   (`block2d_no_loop`), brings `block2d` level with `flat` on the two smaller shapes.
# * The converse holds too: `flat` made to wait for the position before it may load its pair
#   (`flat_serial_pos`) becomes as slow as `block2d`, or slower.
# * The exponent formula (`flat_block2d_exponent`) costs nothing.
#
# The machine code says why.  The census of the controls reads each kernel's SASS (of its
# [fast-math](00_rope_in_one_notebook.ipynb#9-glossary) build) in order:
# `L` a global load, `S` a store, `w` an instruction that needs a load still in flight (the warp
# stalls there).  `in flight` is the largest number of loads issued and not yet waited for:

# %%
ctl_census = controls.census()
rows = [r for r in ctl_census["rows"] if r["name"] in block2d_entries]
print(controls.format_census(dict(ctl_census, rows=rows)))
print()
for r in rows:
    print(f"{r['name']:<22} loads issued before the first wait: {r['sass_schedule']['loads_before_first_wait']}")

# %% [markdown]
# `flat` issues its three loads (the position and the pair's two floats) back to back and
# then waits once: one trip to memory.  `block2d` issues the position load and waits for it
# before it issues the pair's loads: two trips to memory in a row, per thread.  Its position
# is read and converted to float32 before the stride loop, and the pair's loads sit inside the
# loop, in another block of code, so the compiler does not issue them ahead of that
# conversion.  With one pair per thread, as on these shapes, every thread pays two memory
# latencies where `flat` pays one, and the SM has fewer bytes in flight to cover them.
#
# Nsight Compute (`python -m ropelab profile`, recorded under `data/profile/`) sees the same
# thing from the hardware counters.  [`long_scoreboard`](00_rope_in_one_notebook.ipynb#9-glossary) is the state of a warp waiting for
# global memory, counted in [cycles per issue](00_rope_in_one_notebook.ipynb#9-glossary)d instruction; [`issue%`](00_rope_in_one_notebook.ipynb#9-glossary) is the share of cycles in
# which a scheduler issued anything; [`occ%`](00_rope_in_one_notebook.ipynb#9-glossary) is achieved / theoretical occupancy.  The other
# columns: [`DRAM%`](00_rope_in_one_notebook.ipynb#9-glossary), the HBM throughput; [traffic](00_rope_in_one_notebook.ipynb#9-glossary), the DRAM bytes over the minimum; [`reg`](00_rope_in_one_notebook.ipynb#9-glossary), the
# registers per thread, and `limit`, what caps the blocks an SM holds (warp slots or
# registers); [`sect/req`](00_rope_in_one_notebook.ipynb#9-glossary), the sectors per request; [`XU%`](00_rope_in_one_notebook.ipynb#9-glossary), how busy the [SFUs](00_rope_in_one_notebook.ipynb#9-glossary)' pipe was; and
# beside long_scoreboard the stall reasons [not_selected](00_rope_in_one_notebook.ipynb#9-glossary), [`wait`](00_rope_in_one_notebook.ipynb#9-glossary) and [mio_throttle](00_rope_in_one_notebook.ipynb#9-glossary):

# %%
prof = lessons.recorded("profile")
if prof is not None:
    print(ncu.profile_table(prof, r"^(flat|block2d\w*|flat_\w+)@"))

# %%
if prof is not None:
    def prof_row(case):
        return next(r for r in prof["rows"] if r["case"] == case)

    for shape in ("seed_4096x512", "large_32768x4096"):
        for name in ("flat", "block2d", "block2d_pos_in_loop", "flat_serial_pos"):
            r = prof_row(f"{name}@{shape}")
            assert r["stall_1"] == "long_scoreboard"
            print(f"{name:<20} {shape:<17} waiting for memory {r['stall_1_cycles']:5.1f} cycles per "
                  f"instruction, issuing in {r['issue_active_pct']:.0f}% of cycles")

# %% [markdown]
# `block2d` waits on memory about twice as long per instruction as `flat`; moving its
# position read into the loop cuts that wait, and making `flat` wait for the position raises
# it.  The cause is the serialized position read, not the division, the loop's arithmetic or
# the exponent.
#
# **The fix** is to let the pair's loads go out together with the position: read the position
# inside the loop, next to the pair's loads.  That is the whole of `block2d_pos_in_loop`
# (the stores to `out` might alias `positions` as far as the compiler knows, so it cannot
# move the read back out of the loop):

# %%
print(inspect.getsource(controls.rope_block2d_pos_in_loop))

# %% [markdown]
# `ropelab`'s `block2d` keeps the seed's order on purpose: it is the lesson's kernel, and
# the controls above are its measured correction.  The fix's effect, from the same run:

# %%
if ctl is not None:
    for shape in every:
        fixed = ctl_row[("block2d_pos_in_loop", shape)]["median_us"]
        print(f"{shape:<11} block2d_pos_in_loop / block2d {fixed / ctl_row[('block2d', shape)]['median_us']:.3f}, "
              f"/ flat {fixed / ctl_row[('flat', shape)]['median_us']:.3f}")

# %% [markdown]
# The fixed kernel takes `flat`'s time on all three shapes.  Dropping the loop instead
# (`block2d_no_loop`) works only while a row fits one block of 256 or 512 threads: on the 1 GB
# shape it launches 1024-thread blocks with one pair per thread, and has the lowest achieved
# occupancy in the profile above, for the reason the next paragraph gives.
#
# **Large blocks cost too, on wide rows.**  At 32768 x 4096 a row has 2048 pairs, so `block2d`
# launches 1024-thread blocks and each thread loops over two pairs; `block2d_256` runs the
# same kernel with 256-thread blocks (eight pairs per thread).  A block leaves the SM only
# when its last warp finishes, and an SM holds at most two blocks of 1024 threads, so its
# warp slots sit partly empty while each block drains.  The profile's achieved occupancy,
# and the time ratio from the controls:

# %%
if prof is not None and ctl is not None:
    for name in ("block2d", "block2d_256", "flat"):
        r = prof_row(f"{name}@large_32768x4096")
        print(f"{name:<12} {r['block']:>5} threads per block: achieved occupancy "
              f"{r['achieved_occupancy_pct']:.0f}% of {r['theoretical_occupancy_pct']:.0f}%")
    print(f"block2d_256 / block2d on 32768x4096: {ctl_row[('block2d_256', '32768x4096')]['vs_reference']:.3f}, "
          f"of copy {100 * ctl_row[('block2d_256', '32768x4096')]['frac_of_copy']:.1f}% "
          f"(flat {100 * ctl_row[('flat', '32768x4096')]['frac_of_copy']:.1f}%)")

# %% [markdown]
# With eight pairs per thread, `block2d_256` also pays its one position wait once for eight
# pairs instead of once for two, which is why it passes `flat` on this shape.  On 4096 x 512
# `block2d_256` is the same launch as `block2d` (256 pairs per row) and its ratio is 1 within
# the run's noise, as it should be.

# %%
# NBVAL_IGNORE_OUTPUT
print(lessons.live_bench(["flat", "block2d"]))

# %% [markdown]
# ## Takeaways
#
# * Shaping the grid after the data (block = token, thread = pair) removes index arithmetic.
# * It also couples the block size to the row: cap it at 1024 and loop, round it to warps, and
#   watch narrow rows, which make blocks too small to fill an SM.
# * On a memory-bound kernel, fewer instructions do not buy time by themselves: here half the
#   machine code went away and the kernel got slower.  Compare the census with the recorded
#   times rather than assuming either way.
# * The order of the loads matters as much as their count: a load that must wait for another
#   (here the token's position) makes every thread pay two memory latencies instead of one.
#   Controlled variants, each changing one thing, and the profiler's stall counts found it.


# %% [markdown]
# ## Build it yourself
#
# Three graded steps rebuild block2d: first one thread per pair with the block as the row, then
# the stride loop that lets any block size cover any row, then the launch, for rows of any
# width.  Each cell holds a signature, a docstring with the contract, and `pass`; the cell after
# it grades your function and never stops the notebook.  The rule of this notebook: **no
# integer division** (the census checks): the grid's shape does the index math.  The census
# reads the compiled code, so a division you did not write counts too: in `for pair in
# range(t, n_pairs, cuda.blockDim.x)` the step is known only at run time, and Numba divides by
# it to count the loop's trips.  Write a stride loop as a `while` loop.  Solutions and the
# mistakes the grader recognizes: `notebooks/solutions/02_block2d.py`.
#
# ### Step 02.1: one block per token
#
# Block `b` is token `b`, thread `t` of it is pair `t` of the token's row: the row starts at
# float `2 * token * n_pairs`.  The block is the row's pair count rounded up to whole warps (32
# threads for rows of 1 or 5 pairs, 96 for 65), so its last threads have no pair.  The
# frequencies are given (`inv_freq[pair]`): the angle is `float32(positions[token]) *
# inv_freq[pair]`.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def rope_rows(x, out, positions, inv_freq, n_pairs):
    """Block `token`, thread `pair` < n_pairs: rotate floats 2 (token n_pairs + pair) and the
    one after it by positions[token] * inv_freq[pair]; threads with pair >= n_pairs do nothing.

    x, out: float32[tokens * 2 n_pairs]; positions: int32[tokens]; inv_freq: float32[n_pairs];
    n_pairs: int64.  Launched with one block per token of n_pairs threads rounded up to warps.
    No integer division.
    """
    pass

# %%
from ropelab.grader import steps

verdict = steps.check(rope_rows, "02.1")

# %% [markdown]
# `verdict.show()` draws the kernel you just graded on the step's small case: which thread
# wrote each element of `out` (colour = block, number = global thread), which read `x` (where
# the step has one), your output beside the reference with wrong cells outlined, and each
# thread's reads and writes.  With the empty starter nothing is written yet: run it again once
# `rope_rows` has a body, and after every failing verdict.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Step 02.2: the stride loop
#
# One thread per pair cannot launch a row of more than 1024 pairs (2048 floats): a block holds
# at most 1024 threads.  `rope_block2d` loops instead: thread `t` rotates pairs `t`,
# `t + blockDim.x`, `t + 2 blockDim.x`, ... of its token's row, while the pair is inside the
# row.  This step also computes each pair's frequency, as the notebook's kernel does:
# `inv_freq = 1 / base ** (2 pair / hidden)` in float32.  The grader runs the situation of a
# 2048-pair row on a small scale: blocks of only 32 threads for rows of 1, 5 and 65 pairs, so
# the widest row needs three trips round the loop.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def my_rope_block2d(x, out, positions, n_pairs, base):
    """Block `token` rotates every pair of its row: thread t takes pairs t, t + blockDim.x,
    t + 2 blockDim.x, ... below n_pairs, each by positions[token] * base ** (-2 pair / hidden).

    x, out: float32[tokens * hidden]; positions: int32[tokens]; n_pairs: uint64 = hidden / 2;
    base: float32 = 10000.  Launched with one block per token, any number of threads.
    No integer division, no float64.
    """
    pass

# %%
verdict = steps.check(my_rope_block2d, "02.2")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing kernel is timed against a device copy of the same bytes.
verdict.time()

# %% [markdown]
# ### Step 02.3: the launch, for any row
#
# Now the host side, as `ropelab` does it: one block per token (`positions.size` of them), and
# one thread per pair rounded up to whole warps, **capped at 1024**.  Past the cap, your stride
# loop covers the rest of the row.  The grader's last case has rows of 1,300 pairs: a block of
# 1,312 threads is a launch a GPU refuses, and the grader says so before any thread runs.  It
# checks the grid and the block against those two rules, and the types of what you pass:
# `n_pairs` and `base` arrive as Python numbers, and step 02.2's contract wants
# `uint64(n_pairs)` and `float32(base)`.

# %%
def launch_block2d(x, out, positions, n_pairs, base):
    """Launch my_rope_block2d (step 02.2) on these device arrays: one block per token, threads
    = n_pairs rounded up to a multiple of 32, at most 1024.  Every pair covered, no idle block.
    """
    pass

# %%
verdict = steps.check(launch_block2d, "02.3")
