# %% [markdown]
# # 04 — Tables instead of `pow`, and the precision story
#
# Every kernel so far recomputes `base ** (-2i / d)` in every [thread](00_rope_in_one_notebook.ipynb#9-glossary), although it depends on
# the pair index alone: a model with 128-float heads has only 64 distinct frequencies.  This
# notebook moves that work to the host, in two steps:
#
# * **frequency table**: the host computes the 64 frequencies once (in float64, with any
#   context-extension scaling already applied) and uploads them as float32; a thread reads
#   `inv_freq[pair]` and the `pow` disappears;
# * **cos/sin cache**: the host also computes `cos` and `sin` of every (position, pair) in
#   float64 and uploads the table; the kernel does no transcendental math at all.  This is
#   the `cos_sin_cache` of vLLM and FlashInfer.
#
# The second step is not only about speed.  Angles reach $10^5$ radians in long contexts, and
# the GPU's fast `sin`/`cos` lose accuracy there.  The second half of the notebook measures
# how much, by position, and what each variant does about it.

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

from ropelab import lessons, reference
from ropelab.measure import census as ptx
from ropelab.kernels import freq_table
from ropelab.problem import RopeProblem

print(ropelab.format_description())

# %% [markdown]
# ## The kernels
#
# `freq_table` is also the first variant that handles every layout the course met in
# notebook 00: several heads per token, the half-split (NeoX) pairing, partial rotation, the
# inverse and scaled frequencies.  One thread owns one *slot* of a head (`head_dim / 2` slots
# per head); a slot below `rotary_dim / 2` rotates a pair, a slot above it copies two floats
# that do not rotate.  The layout is two integers, `step` and `partner`, instead of a branch.

# %%
print(lessons.excerpt(freq_table, "rope_freq_table"))

# %% [markdown]
# With the cache, the angle disappears too; the position indexes a row of the table:

# %%
print(lessons.excerpt(freq_table, "rope_cos_sin_cache"))

# %% [markdown]
# The host side builds the tables in float64 and rounds once to float32:

# %%
print(lessons.excerpt(freq_table, "cos_sin_cache"))

# %% [markdown]
# ## The thread map
#
# Two tokens, two heads of 8 floats each, half-split layout, and only the first 4 floats of
# each head rotated (`rotary_dim = 4`).  Each head has 4 slots, so 4 threads per head: threads
# 0 and 1 rotate pairs (0, 2) and (1, 3); threads 2 and 3 copy floats 4-5 and 6-7.  The map
# colours each [block](00_rope_in_one_notebook.ipynb#9-glossary) of 8 threads; the [grid](00_rope_in_one_notebook.ipynb#9-glossary) is the blocks together.

# %%
tmap = lessons.trace_threads("freq_table", tokens=2, hidden=16, heads=2, interleave=False,
                            rotary_dim=4, threads_per_block=8)
print(tmap.summary())
lessons.plot_thread_map(tmap, label="global")
plt.show()

# %% [markdown]
# ## Correctness
#
# All three modes (table, cache, and the fma angle reduction explained below), over heads,
# both layouts, partial and inverse rotation:

# %%
rng = np.random.default_rng(4)
results = []
modes = {"table": {}, "cache": {"cache": True, "max_positions": 4096}, "reduced": {"reduce_angle": True}}
layouts = [dict(), dict(interleave=False), dict(rotary_dim=32), dict(inverse=True)]
for mode, options in modes.items():
    for layout in layouts:
        x = rng.standard_normal((5, 3, 64)).astype(np.float32)  # [tokens, heads, head_dim]
        pos = rng.integers(0, 4096, 5).astype(np.int32)
        y = ropelab.rope(x, variant="freq_table", positions=pos, **options, **layout)
        label = ",".join(f"{k}={v}" for k, v in layout.items()) or "interleaved"
        results.append(lessons.check(mode, x, y, pos, **layout))
        print(f"{results[-1].line}   {label}")

# %%
# NBVAL_IGNORE_OUTPUT
for r in results:
    print(f"{r.variant:<8} max|error| {r.max_error:.2e} ({ropelab.TARGET})")

# %% [markdown]
# A cache has a length.  A position past it is refused before the kernel runs, instead of
# reading another row of memory:

# %%
x = np.ones((2, 8), dtype=np.float32)
try:
    ropelab.rope(x, variant="freq_table", positions=np.array([5, 9000]), cache=True, max_positions=8192)
except ropelab.RopeInputError as err:
    print("RopeInputError:", err)

# %% [markdown]
# ## Census: removing `pow`

# %%
census = ptx.census()
kernels_04 = [("flat", None), ("freq_table", "rope_freq_table"),
              ("freq_table", "rope_cos_sin_cache"), ("freq_table", "rope_reduced_angle")]
print(f"{'kernel':<22} {'instr':>6} {'div/rem':>8}  {'loads':<10} special functions")
for variant, kernel in kernels_04:
    r = ptx.row(census, variant, fastmath=True, kernel=kernel)
    print(f"{r['kernel']:<22} {r['instructions']:>6} {r['int_divrem']:>8}  "
          f"{str(r['ld_global']):<10} {r['sfu'] or '-'}")

# %% [markdown]
# * The table kernel has no `lg2`/`ex2` left: one load of `inv_freq[pair]` replaced `pow`.
# * The cache kernel has no special function at all; instead of one frequency it loads a
#   cosine and a sine per pair, from a table of `8 x positions x pairs` bytes.
# * Instruction counts went *up* against `flat`: these kernels handle heads, layouts and
#   partial rotation, which `flat` does not.  Feature-complete code costs instructions;
#   whether it costs time is again a question for the recorded run.
#
# ## The precision story
#
# Two float32 effects grow with the angle, and they have different cures.
#
# **1. The angle itself.**  `float32(position) * inv_freq` is rounded to float32, and a float32
# near $10^5$ is only resolved to $2^{-7} \approx 0.008$.  No sine, however exact, can undo an
# angle that is already wrong.  NumPy shows it on the CPU, with the arithmetic of the table
# kernel:

# %%
freqs = reference.inv_freq(128)
positions = np.array([1, 100, 1_000, 10_000, 100_000, 131_071])
angle32 = positions.astype(np.float32) * freqs.astype(np.float32)[1]  # pair 1, in float32
angle64 = positions * freqs[1]  # the exact angle
for p, a32, a64 in zip(positions, angle32, angle64):
    print(f"position {p:>7}: float32 angle step {np.spacing(a32):.1e} rad, "
          f"error of this angle {abs(float(a32) - a64):.1e} rad")

# %% [markdown]
# The error has two parts: the float32 frequency is off by up to half an [ulp](00_rope_in_one_notebook.ipynb#9-glossary) (a relative
# $3 \times 10^{-8}$, multiplied by the position), and the product is rounded to the spacing
# in the first column.  Both scale with the angle.
#
# **2. The sine.**  With [fast-math](00_rope_in_one_notebook.ipynb#9-glossary), `math.sin` becomes `sin.approx.ftz.f32`, a hardware
# approximation whose error grows with the size of its argument.  `ropelab.measure.precision` times
# nothing; it measures errors on a GPU and records them.  First, the function alone, on exact
# float32 angles:

# %%
sincos = lessons.recorded("sincos_error")
if sincos is not None:
    lessons.plot_sincos_error(sincos)
    plt.show()

# %% [markdown]
# The same record as a table, the worse of `sin` and `cos` in each decade of angle:

# %%
if sincos is not None:
    print(lessons.provenance(sincos))
    print(lessons.sincos_table(sincos))

# %% [markdown]
# The fast-math error grows about tenfold per decade of angle above 10 radians: about
# $10^{-3}$ below $10^4$ rad, about $10^{-2}$ between $10^4$ and $10^5$ rad (the positions of
# a long context), and more than $10^{-1}$ beyond.  The precise `sinf`/`cosf` stay below
# $10^{-7}$ at every angle: [libdevice](00_rope_in_one_notebook.ipynb#9-glossary) reduces the argument exactly before approximating.

# %% [markdown]
# Then every variant on real inputs (`[tokens, 128]`, standard normal), one token per sampled
# position, with the error taken over whole power-of-two buckets of positions, relative to the
# largest input value:

# %%
precision = lessons.recorded("precision")
cases_04 = [dict(variant="flat"), dict(variant="flat", fastmath=False),
            dict(variant="freq_table"), dict(variant="freq_table", options="reduce_angle=True"),
            dict(variant="freq_table", options="cache=True")]
if precision is not None:
    print(lessons.precision_table(precision, cases_04))

# %%
if precision is not None:
    lessons.plot_precision(precision, cases_04)
    plt.show()

# %% [markdown]
# What to read in the chart: the fast-math kernels' error grows with the position; turning
# fast-math off (`precise`) removes the sine's share of it but not the angle's; the cache is
# flat at the float32 rounding of its entries, because its values were computed in float64 and
# rounded once; `reduce_angle` (below) is flat too, a little higher.  These two are the
# accurate paths.  The dashed line is
# half a [bfloat16](00_rope_in_one_notebook.ipynb#9-glossary) ulp at 1.0: an error below it vanishes when activations are stored in
# bfloat16, an error above it does not.
#
# **The third path, without a table of positions.**  `reduce_angle=True` stores each frequency
# in *turns* per position (`f / 2 pi`) as a float32 head plus a float32 tail.  The kernel
# multiplies the position by the head, recovers the product's rounding error exactly with one
# fused multiply-add, drops the whole turns, and only then multiplies by `2 pi`.  The sine then
# sees an angle below `2 pi` that is right to a few $10^{-7}$ radians, where even `sin.approx`
# is accurate:

# %%
print(lessons.excerpt(freq_table, "reduced_angle"))

# %% [markdown]
# ## Timing on an H200
#
# Each variant beside the [roof](00_rope_in_one_notebook.ipynb#9-glossary), the fastest device copy of the run.  Each row gives the median
# of many single launches, their [p20-p80](00_rope_in_one_notebook.ipynb#9-glossary) spread (from the 20th to the 80th percentile), the
# bandwidth that time implies, and its share of the roof.

# %%
bench = lessons.recorded("bench")
if bench is not None:
    print(lessons.provenance(bench))
    print(lessons.bench_table(bench, ["torch_copy", "flat", "freq_table", "freq_table:cache"]))

# %%
if bench is not None:
    lessons.plot_roof(bench, ["flat", "block2d", "pack4", "freq_table", "freq_table:cache"])
    plt.show()

# %% [markdown]
# `freq_table:cache` is the same variant called with `cache=True, max_positions=tokens` (the
# cos/sin cache, the method of vLLM and FlashInfer).  Time of each relative to `flat` on each
# shape:

# %%
if bench is not None:
    print(lessons.relative_times(bench, "flat", ["freq_table", "freq_table:cache"]))

# %% [markdown]
# The table is level with `flat`, on every shape.  Removing `pow` removed two special-function calls per pair and
# saved no time, because the `pow` was not what limited `flat`.  What `freq_table` added (a
# slot per head with a pass-through branch, a second index computation to find the token of a
# head, a load from the frequency table) costs nothing measurable either.  Both kernels wait
# on the same 4-byte loads (notebook 03).  A cheaper operation is only a faster kernel when it
# was the bottleneck, which is why `freq_table` earns its place by precision and features
# (heads, layouts, partial rotation, scaled frequencies), not by speed.
#
# It was not always so: in the first recorded run (`data/history/`), before both kernels'
# index math became unsigned, `freq_table` was slower than `flat` by a sixth to a quarter.
#
# ## Why the cache is slower here: it moves more bytes
#
# The cache is the slowest of the three on every shape, and the reason is in the bytes, not the
# arithmetic.  The benchmark gives every token its own position (`positions = arange(tokens)`)
# and every row is one head, so each token reads its own row of the table: `pairs` cosines and
# `pairs` sines, 4 bytes each, which is half as many bytes again as the row of `x` it reads
# and writes.  `bytes_moved` in the table counts only the operation's minimum (x in, out,
# positions), so the cache's GB/s there understates what it really moved.  The bytes it must
# move, against the time it took:

# %%
if bench is not None:
    print(f"{'shape':<12} {'minimum MB':>10} {'table MB':>9} {'bytes / minimum':>16} {'time cache / table':>19}")
    for shape in ("4096x512", "4096x1024", "8192x512", "8192x1024", "32768x4096"):
        row = lessons.bench_row(bench, "freq_table:cache", shape)
        table_bytes = row["tokens"] * (row["hidden"] // 2) * 2 * 4  # cos and sin, float32, one row per token
        ratio = row["median_us"] / lessons.bench_row(bench, "freq_table", shape)["median_us"]
        print(f"{shape:<12} {row['bytes_moved'] / 1e6:>10.1f} {table_bytes / 1e6:>9.1f} "
              f"{(row['bytes_moved'] + table_bytes) / row['bytes_moved']:>16.2f} {ratio:>19.2f}")

# %% [markdown]
# The time grows with the bytes: the cache kernel is as memory-bound as the others, with more
# memory to move.  The Nsight Compute profile confirms it from the [DRAM](00_rope_in_one_notebook.ipynb#9-glossary) counters
# ([`traffic`](00_rope_in_one_notebook.ipynb#9-glossary) = DRAM bytes over the minimum; on the small shape the output stays in the 60 MB
# [L2](00_rope_in_one_notebook.ipynb#9-glossary) for every kernel, so all of them read less than the minimum from DRAM) and shows that the
# cache kernel uses no transcendental unit at all ([`XU%`](00_rope_in_one_notebook.ipynb#9-glossary)).  The other columns: [`occ%`](00_rope_in_one_notebook.ipynb#9-glossary),
# achieved / theoretical occupancy; [`reg`](00_rope_in_one_notebook.ipynb#9-glossary), the registers per thread, and `limit`, what caps
# the [blocks](00_rope_in_one_notebook.ipynb#9-glossary) an [SM](00_rope_in_one_notebook.ipynb#9-glossary) holds (here [warp](00_rope_in_one_notebook.ipynb#9-glossary) slots); [`sect/req`](00_rope_in_one_notebook.ipynb#9-glossary), the sectors per request; [issue%](00_rope_in_one_notebook.ipynb#9-glossary); and
# the top stall reasons in [cycles/issue](00_rope_in_one_notebook.ipynb#9-glossary) ([long_scoreboard](00_rope_in_one_notebook.ipynb#9-glossary), [`wait`](00_rope_in_one_notebook.ipynb#9-glossary), [not_selected](00_rope_in_one_notebook.ipynb#9-glossary)):

# %%
prof = lessons.recorded("profile")
if prof is not None:
    from ropelab.measure import profile as ncu

    print(ncu.profile_table(prof, r"^(flat|freq_table\S*)@"))

# %% [markdown]
# A cache pays off where its rows are shared: with many heads per token, one row of
# `rotary_dim / 2` pairs serves every head of the token, so its bytes are divided by the number
# of heads, and they usually stay in L2.  Its real advantage is precision at long positions,
# which costs no time to keep (above).  The fma angle reduction is not in the benchmark; the
# profile above times it as the `reduce_angle=True` row.

# %%
# NBVAL_IGNORE_OUTPUT
print(lessons.live_bench(["flat", "freq_table"]))

# %% [markdown]
# ## Takeaways
#
# * Anything that depends only on the pair index belongs in a table built once on the host.
#   On the H200 it saved no time (`freq_table` is level with `flat`): removing work that is not
#   the bottleneck never does.
# * A cos/sin cache removes all transcendental math and is exact at every position, for
#   `8 x positions x pairs` bytes of memory and two extra loads per pair.  On one-head rows
#   with a position per token those loads are half as many bytes again as the data, and the
#   recorded run is slower by up to that much.
# * Long contexts break fast-math RoPE twice: the float32 angle is coarse, and `sin.approx`
#   is inaccurate for large arguments.  `fastmath=False` fixes only the second; a float64-built
#   cache or an exact angle reduction fixes both.
# * Measure precision by position, on the GPU, against a float64 reference.

# %% [markdown]
# ## Build it yourself
#
# Five graded steps, each building on the last: a table read instead of `pow`, the table
# staged in [shared memory](00_rope_in_one_notebook.ipynb#9-glossary), the cos/sin cache, the whole variant with heads and layouts, and its
# launch.  Write each function in its cell and run the cell after it: the grader runs your
# kernel on the simulator on small shapes that fill no block evenly, compares every float with
# the float64 reference, and then counts your kernel's [PTX](00_rope_in_one_notebook.ipynb#9-glossary) instructions (compiled for a GPU,
# without one).  Solutions: `notebooks/solutions/04_freq_table_cache.py`.
#
# ### Step 04.1: read the frequency from a table
#
# One thread per pair, as in notebook 01, but the frequency comes from `inv_freq[pair]`, a
# float32 table the host built in float64.  The census then must show no `pow` (no `lg2`), and
# no float64: an `int32` position times a `float32` frequency is computed in float64 by Numba,
# so convert the position with `float32(...)` first.

# %%
import math

from numba import cuda, float32, uint64

from ropelab.grader import steps


@cuda.jit(fastmath=True)
def rope_table_read(x, out, positions, inv_freq, n_pairs, total_pairs):
    """Rotate pair i = token * n_pairs + pair of the interleaved rows of x into out.

    x, out: float32[tokens * hidden]; positions: int32[tokens]; inv_freq: float32[n_pairs];
    n_pairs: uint64 = hidden / 2; total_pairs: int64 = tokens * n_pairs.  Launched with
    ceil(total_pairs / 64) blocks of 64 threads.  angle = position * inv_freq[pair].
    """
    pass

# %%
verdict = steps.check(rope_table_read, "04.1")

# %% [markdown]
# `verdict.show()` draws the function you just graded, passing or not, on a small shape: which
# thread wrote each float of `out`, which thread read each float of the input, your output
# beside the reference with wrong cells outlined, and the reads and writes of every thread.
# Call it after any step.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Step 04.2: stage the table in shared memory
#
# Every thread of step 04.1 reads its frequency from global memory.  A block can instead copy
# the table once into **shared memory**, on-chip storage that all threads of a block see, and
# read it from there.  Here a block of 64 threads covers pairs of several rows, so thread `t`
# reads entries that *other* threads copied: before any thread reads, every thread must have
# finished copying.  `cuda.syncthreads()` is that wait: no thread of the block passes it until
# all have reached it.  Without it the simulator may still print the right numbers, so the
# grader watches every shared-memory access and reports a read of an element that another
# thread wrote with no [barrier](00_rope_in_one_notebook.ipynb#9-glossary) in between.
#
# Write the whole kernel: the table, the copy (the block's threads share it: thread `t` copies
# entries `t`, `t + 64`, ... while they are below `n_pairs`; a row of 130 floats has 65 pairs,
# more than the block has threads), the wait, and then step 04.1's rotation with the frequency
# read from the shared table.  Put the guard `if idx < total_pairs` after the barrier: every
# thread of the block, including those past the last pair, takes part in the copy and reaches
# `cuda.syncthreads()`.

# %%
import math

from numba import cuda, float32, uint64

TABLE_CAPACITY = 128  # pairs the shared table holds (the step's rows have at most 65)


@cuda.jit(fastmath=True)
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    """Step 04.1's rotation, its frequency read from a shared copy of inv_freq.

    x, out: float32[tokens * hidden]; positions: int32[tokens]; inv_freq: float32[n_pairs];
    n_pairs: uint64 = hidden / 2, at most TABLE_CAPACITY; total_pairs: int64 = tokens *
    n_pairs.  Launched with ceil(total_pairs / 64) blocks of 64 threads.  The block copies
    inv_freq into table = cuda.shared.array(TABLE_CAPACITY, float32), every thread helping,
    waits at cuda.syncthreads(), then reads table[pair].
    """
    pass

# %%
verdict = steps.check(rope_shared_table, "04.2")

# %% [markdown]
# The guard `if idx < total_pairs` comes after the barrier on purpose: every thread of the
# block, including those past the last pair, takes part in the copy and reaches
# `cuda.syncthreads()`.  A barrier inside the guard would be one that the last block's spare
# threads never reach: on a GPU the block can hang there.  The simulator checks it (in the
# grader and in your own launches): a barrier that not every thread of the block reaches, at
# the same line, stops the launch with the threads that never arrived.
#
# ### Step 04.3: the cos/sin cache lookup
#
# With a cache, a thread does no transcendental math at all: it reads its pair's cosine and
# sine from two float32 tables of shape `[max_positions, n_pairs]` built in float64 on the
# host (here `freq_table.cos_sin_cache`, 1024 positions).  Write step 04.1's kernel with the
# two lookups in place of the angle: row = the token's *position* (not its row number), column
# = the pair.  The census must show no `sin`, `cos` or `pow`.

# %%
from numba import cuda, uint64


@cuda.jit(fastmath=True)
def my_rope_cache(x, out, positions, cos_cache, sin_cache, n_pairs, total_pairs):
    """Rotate pair i = token * n_pairs + pair of the interleaved rows of x into out, by the
    cosine and sine read from the caches at [the token's position, pair].

    x, out: float32[tokens * hidden]; positions: int32[tokens], never negative; cos_cache,
    sin_cache: float32[1024, n_pairs], built in float64; n_pairs: uint64 = hidden / 2;
    total_pairs: int64 = tokens * n_pairs.  Launched with ceil(total_pairs / 64) blocks of 64
    threads.  No sin, cos or pow.
    """
    pass

# %%
verdict = steps.check(my_rope_cache, "04.3")

# %% [markdown]
# ### Step 04.4: the freq_table variant
#
# Now the layouts of notebook 00, as `rope_freq_table` (printed at the top) handles them:
# several heads per token, interleaved or half-split pairs, and a partial rotation.  One
# thread per *slot* of a head, `half_dim = head_dim / 2` slots per head:
#
# * `head_row = i // half_dim` is `token * heads + head`, the slot is `j = i - head_row *
#   half_dim`, the head starts at float `first = 2 * head_row * half_dim`, and the token is
#   `head_row // heads`;
# * a slot `j < n_pairs` rotates floats `a = first + j * step` and `b = a + partner`, with
#   `(step, partner) = (2, 1)` for interleaved pairs and `(1, n_pairs)` for half-split ones;
# * a slot `j >= n_pairs` copies floats `first + 2j` and `first + 2j + 1` unchanged.
#
# The grader runs four shapes: one pair; two half-split heads of 10 floats with 6 rotated;
# three interleaved heads of 20 with 12 rotated; one head of 130 floats, more slots than a
# block of 64 threads.

# %%
from numba import cuda


@cuda.jit(fastmath=True)
def rope_freq_table_heads(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots,
                          step, partner):
    """RoPE over heads, pair layouts and a partial rotation: one thread per slot of a head.

    x, out: float32[tokens * heads * head_dim]; positions: int32[tokens]; inv_freq:
    float32[n_pairs]; heads, half_dim (= head_dim / 2), n_pairs (= rotary_dim / 2), step,
    partner: uint64; total_slots: int64 = tokens * heads * half_dim.  Launched with
    ceil(total_slots / 64) blocks of 64 threads.
    """
    pass

# %%
verdict = steps.check(rope_freq_table_heads, "04.4")

# %% [markdown]
# ### Step 04.5: the launch
#
# So far the grader chose the [grid](00_rope_in_one_notebook.ipynb#9-glossary).  Now write the host function that does: from the shape
# (`tokens`, `heads`, `head_dim`, the layout, and the frequency table, whose length is
# `n_pairs`) compute the kernel's arguments and a launch that gives every slot a thread.  A
# block holds at most 1024 threads, and a block with no work is a wasted block: the grader
# checks both, and one of its shapes has 1280 slots.  The kernel's index arguments must be
# `uint64` (write `uint64(heads)`); `total_slots` stays a Python int (int64), since it is
# compared with the signed `cuda.grid(1)`.

# %%
def launch_freq_table(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
    """Launch rope_freq_table_heads (your step 04.4) over every slot of x.

    x, out, positions, inv_freq: device arrays; tokens, heads, head_dim: int; interleave: bool.
    """
    pass

# %%
verdict = steps.check(launch_freq_table, "04.5")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing function is timed against a device copy of the same bytes.
verdict.time()
