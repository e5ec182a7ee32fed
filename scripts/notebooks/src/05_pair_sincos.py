# %% [markdown]
# # 05 — One sincos per pair, and a frequency recurrence
#
# The idea of this notebook comes from a change to SGLang's fused QK-norm + RoPE kernel
# (PR 21654).  That kernel gave each [thread](00_rope_in_one_notebook.ipynb#9-glossary) a few consecutive *elements* of a head and
# computed a frequency, a `pow`, a sine and a cosine for every element, although the two
# elements of an interleaved pair rotate by the same angle.  The change computed them once per
# *pair*, halving the special-function work.
#
# `ropelab`'s kernels have shared the angle within a pair from the start (each thread owns
# whole pairs).  This notebook takes the next step the same reasoning allows: a thread owns
# several pairs of one head, and since the frequencies form a geometric sequence,
#
# $$\theta_{j+S} = \theta_j \cdot r^S, \qquad r = \text{base}^{-2/d},$$
#
# it computes one `pow` for its first pair and reaches its other pairs, `S` apart, with one
# multiply each by the constant $r^S$ (computed once on the host, in float64).  Every multiply
# rounds, so the frequencies drift away from the `pow` values; the second half of the
# notebook measures how far.

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

from ropelab import lessons, reference, scaling
from ropelab.measure import census as ptx
from ropelab.kernels import pair_sincos
from ropelab.problem import RopeProblem

print(ropelab.format_description())

# %% [markdown]
# ## The kernel
#
# With `chunk` pairs per thread (4 by default), `S = head_dim / 2 / chunk` threads share a
# head, and thread `t` owns slots `t, t + S, t + 2S, ...`.  `first_freq` is the one `pow`;
# `blended` applies the [YaRN](00_rope_in_one_notebook.ipynb#9-glossary) or [Llama 3.1](00_rope_in_one_notebook.ipynb#9-glossary) correction per pair when a scaling scheme asks for
# it (both bend the geometric sequence, so the kernel keeps the recurrence for the geometric
# part and corrects each pair afterwards); `f = f * stride_ratio` is the recurrence.
# `load2` / `store2` read and write one pair: two float32 elements in the float32 build; in the
# [float16](00_rope_in_one_notebook.ipynb#9-glossary) and [bfloat16](00_rope_in_one_notebook.ipynb#9-glossary) builds (`pair_sincos.pair_access`) the elements widen to float32 on the
# load and round to nearest even on the store, and a GPT-J pair moves as one 32-bit word.

# %%
print(lessons.excerpt(pair_sincos, "rope_pair_sincos"))

# %%
print(lessons.excerpt(pair_sincos, "first_freq"))
print()
print(lessons.excerpt(pair_sincos, "blended"))

# %% [markdown]
# ## The thread map
#
# Two tokens, 32 floats (16 pairs) per token.  With the default 4 pairs per thread, four
# threads share a row and thread `t` owns pairs `t, t+4, t+8, t+12`: at every step the threads
# of a [warp](00_rope_in_one_notebook.ipynb#9-glossary) touch neighbouring pairs, so each load and store instruction stays [coalesced](00_rope_in_one_notebook.ipynb#9-glossary).
# With `pairs_per_thread=16`, one thread rotates the whole row.  Colours are the
# [block](00_rope_in_one_notebook.ipynb#9-glossary)s of 8 threads, the [grid](00_rope_in_one_notebook.ipynb#9-glossary) all of them.

# %%
fig, axes = plt.subplots(2, 1, figsize=(12, 3.2))
for ax, chunk in zip(axes, (4, 16)):
    tmap = lessons.trace_threads("pair_sincos", tokens=2, hidden=32, threads_per_block=8,
                                pairs_per_thread=chunk)
    print(tmap.summary())
    lessons.plot_thread_map(tmap, ax=ax, label="global")
    ax.set_title(f"pairs_per_thread={chunk}: colour = block, number = global thread", fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Correctness
#
# Chunks of 1 (a `pow` for every pair), 4 and 64 pairs, over several heads, the half-split
# layout, partial rotation, and a Llama 3.1 scaled model (whose frequencies are not geometric):

# %%
rng = np.random.default_rng(5)
llama31 = scaling.Llama3(8.0, 1.0, 4.0, 8192)  # factor, low/high frequency factors, original length
freqs_l3, _ = scaling.resolve(llama31, rotary_dim=128, base=10000.0)
results = []
for chunk in (1, 4, 64):
    for label, layout, ref_options in [
        ("interleaved", {}, {}),
        ("half-split", {"interleave": False}, {"interleave": False}),
        ("rotary_dim=64", {"rotary_dim": 64}, {"rotary_dim": 64}),
        ("llama3.1", {"scaling": llama31}, {"freqs": freqs_l3}),
    ]:
        x = rng.standard_normal((3, 2, 128)).astype(np.float32)
        pos = rng.integers(0, 4096, 3).astype(np.int32)
        y = ropelab.rope(x, variant="pair_sincos", positions=pos, pairs_per_thread=chunk, **layout)
        results.append(lessons.check(f"chunk {chunk}", x, y, pos, **ref_options))
        print(f"{results[-1].line}   {label}")

# %%
# NBVAL_IGNORE_OUTPUT
for r in results:
    print(f"{r.variant:<9} max|error| {r.max_error:.2e} ({ropelab.TARGET})")

# %% [markdown]
# ## Census
#
# The census counts instructions in the compiled code, not instructions executed: a loop body
# is counted once however often it runs (and the compiler may unroll it).  So compare the
# structure: `flat` has `lg2` + `ex2` (the `pow`) next to every `sin`/`cos`; `pair_sincos` has
# a single `pow` before its loop and only `sin`/`cos` inside it.

# %%
census = ptx.census()
print(f"{'kernel':<20} {'instr':>6} {'div/rem':>8}  special functions (static count)")
for variant, kernel in (("flat", None), ("freq_table", "rope_freq_table"),
                        ("pair_sincos", "rope_pair_sincos")):
    r = ptx.row(census, variant, fastmath=True, kernel=kernel)
    print(f"{r['kernel']:<20} {r['instructions']:>6} {r['int_divrem']:>8}  {r['sfu']}")

# %% [markdown]
# Executed per pair, with [fast-math](00_rope_in_one_notebook.ipynb#9-glossary) and no scaling:
#
# | kernel | `pow` (`lg2` + `ex2`) | `sin` + `cos` | memory reads for frequencies |
# |---|---|---|---|
# | `flat` | 1 per pair | 1 + 1 | none |
# | `freq_table` | none | 1 + 1 | one float per pair |
# | `pair_sincos`, chunk `c` | `1/c` per pair | 1 + 1 | none |
#
# ## The drift of the recurrence
#
# After `k` multiplications the frequency carries up to about `k` float32 roundings, a
# relative error of order `k x 2^-24`.  The angle is `position x frequency`, so at position
# 131072 even a relative error of $10^{-7}$ becomes about 0.01 radian for the fastest pairs.
# The CPU shows the effect with NumPy's float32 arithmetic (IEEE rounding, the same as a GPU
# multiply), starting from an exact first frequency:

# %%
d, base = 128, 10000.0
exact = reference.inv_freq(d)
ratio = np.float32(base ** (-2.0 / d))
f = np.float32(exact[0])
walk = [f]
for _ in range(d // 2 - 1):
    f = np.float32(f * ratio)  # one rounding per step
    walk.append(f)
rel = np.abs(np.array(walk, dtype=np.float64) - exact) / exact
for steps in (0, 3, 15, 63):
    print(f"after {steps:>2} multiplications: relative frequency error {rel[steps]:.1e}")

# %% [markdown]
# The error grows about linearly with the number of steps, not like the square root that
# independent random roundings would give.  Most of it is systematic: `ratio` itself was
# rounded to float32 once, and that same error is multiplied in at every step.  (This walk is
# one thread owning all 64 pairs of a head; the kernel's threads take `chunk - 1` steps of
# $r^S$ each.)  Short chunks bound the drift, because every thread starts from a fresh `pow`.  The GPU record
# below runs the kernel's own arithmetic (`pair_sincos.DRIFT_KERNEL`, including its `pow`)
# for chunk lengths 1 to 64 and converts each frequency error into an angle error at
# position 131072:

# %%
drift = lessons.recorded("freq_drift")
if drift is not None:
    print(lessons.provenance(drift))
    print(lessons.drift_table(drift))

# %%
if drift is not None:
    lessons.plot_freq_drift(drift)
    plt.show()

# %% [markdown]
# Two things to read in the record.  Chunk 1 (a `pow` for every pair) is not error-free: with
# fast-math, `pow` is `lg2.approx` followed by `ex2.approx`, and its relative error is the
# floor the recurrence starts from.  Longer chunks add the recurrence's rounding on top, and
# in the record that only shows at 64 pairs per thread (one thread per 128-float head, where
# the walk is the CPU's above); up to 32 the worst angle error is no larger than with a `pow`
# for every pair.  The kernel's default of 4 is well inside.  Set the angle errors beside
# notebook 04: the float32 angle product alone is off by several $10^{-3}$ rad near position
# $10^5$, so a recurrence whose extra error stays below that adds little.  The recorded
# precision run on real inputs:

# %%
precision = lessons.recorded("precision")
cases_05 = [dict(variant="flat"), dict(variant="freq_table"), dict(variant="pair_sincos"),
            dict(variant="freq_table", options="cache=True")]
if precision is not None:
    print(lessons.precision_table(precision, cases_05))

# %%
if precision is not None:
    lessons.plot_precision(precision, cases_05)
    plt.show()

# %% [markdown]
# On real inputs `pair_sincos` has the same worst error as `flat` in every range of positions
# of the table: the fast-math `sin`/`cos` of a large angle (notebook 04) dominate, not the
# frequency.  The cos/sin cache is the accurate path.

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
    print(lessons.bench_table(bench, ["torch_copy", "flat", "freq_table", "pair_sincos"]))

# %%
if bench is not None:
    lessons.plot_roof(bench, ["flat", "pack4", "freq_table", "pair_sincos"])
    plt.show()

# %% [markdown]
# Time of `pair_sincos` relative to `flat`, and the 1 GB shape as a share of the roof:

# %%
if bench is not None:
    print(lessons.relative_times(bench, "flat", ["pair_sincos"]))
    for v in ("flat", "pair_sincos", "pack4"):
        print(f"{v:<12} on 32768x4096: {100 * lessons.share_of_roof(bench, v, '32768x4096'):5.1f}% of the roof")

# %% [markdown]
# On the 1 GB shape `pair_sincos` is clearly faster than `flat`, the fastest kernel of the
# course after `pack4`; on the seed's small shapes the two are level within a few percent,
# either way.  It got there in two steps, both recorded.  The first version gave each thread
# *consecutive* pairs, and the first recorded run (`data/history/`) found it two to four times
# slower than `flat`, despite fewer special-function calls: neighbouring threads started
# 8 floats (32 bytes) apart, so each load or store instruction of a warp touched 32 different
# 32-byte [sectors](00_rope_in_one_notebook.ipynb#9-glossary) and used 4 bytes of each.  The kernel above hands out strided slots
# instead, so every instruction of a warp covers neighbouring pairs (the pattern of notebooks
# 01 to 03), and it loads the next slot's pair before rotating the current one, so each
# thread keeps two pairs in flight.  The lesson is notebook 03's: on this operator, how memory
# is accessed decides before arithmetic does.

# %%
# NBVAL_IGNORE_OUTPUT
print(lessons.live_bench(["flat", "pair_sincos"]))

# %% [markdown]
# ## Takeaways
#
# * The two elements of a pair share an angle: compute sine and cosine once per pair (the
#   SGLang fix), and structure threads around pairs, not elements.
# * A geometric sequence can replace a `pow` per pair with a multiply per pair, at the price
#   of a rounding error that grows with the chunk length; measure it as an angle error at the
#   longest position you serve.
# * Scaling schemes that bend the sequence (YaRN, Llama 3.1) still fit: recur on the
#   geometric part, correct per pair.
# * Several pairs per thread only pay when a warp's accesses stay coalesced: strided slots,
#   not consecutive ones, made `pair_sincos` the second fastest kernel of the course.

# %% [markdown]
# ## Build it yourself
#
# Four graded steps: one angle per pair, strided slots with one `pow` per thread, the launch
# that computes the stride and its ratio on the host, and the variant over heads and both
# layouts.  Write each function in its cell and run the cell after it: the grader runs it on
# the simulator on small shapes, compares every float with the float64 reference, and then
# counts the [PTX](00_rope_in_one_notebook.ipynb#9-glossary) instructions of your kernel (compiled for a GPU, without one).  Solutions:
# `notebooks/solutions/05_pair_sincos.py`.
#
# ### Step 05.1: one angle per pair
#
# The SGLang change this notebook opened with, in its smallest form: give every *pair* a
# thread, which computes its frequency `base ** (exponent_step * pair)` (one `pow`), its
# angle, one `cos` and one `sin`, and rotates both floats of the pair with them.  The census
# must show at most one `sin` and one `cos`, one `pow`, and no float64.  The grader counts them
# per pass through your kernel: a loop body once, and the copies of it that the compiler makes
# for cases that exclude each other once (it duplicates a [grid](00_rope_in_one_notebook.ipynb#9-glossary)-stride loop, with and without
# the division, for `n_pairs == 0`), so a grid-stride loop with one `sin` and one `cos` a pair
# passes too.

# %%
import math

from numba import cuda, float32, uint64

from ropelab.grader import steps


@cuda.jit(fastmath=True)
def rope_one_angle(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    """Rotate pair i = token * n_pairs + pair of the interleaved rows of x into out.

    x, out: float32[tokens * hidden]; positions: int32[tokens]; n_pairs: uint64 = hidden / 2;
    total_pairs: int64 = tokens * n_pairs; base: float32 = 10000; exponent_step: float32 =
    -2 / hidden.  Launched with ceil(total_pairs / 64) blocks of 64 threads.
    """
    pass

# %%
verdict = steps.check(rope_one_angle, "05.1")

# %% [markdown]
# `verdict.show()` draws the function you just graded, passing or not, on a small shape: which
# thread wrote each float of `out`, which thread read each float of the input, your output
# beside the reference with wrong cells outlined, and the reads and writes of every thread.
# Call it after any step.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Step 05.2: strided slots, one pow per thread
#
# Write the heart of `pair_sincos` for one head per row: `stride` threads share a row of
# `n_pairs` pairs, and thread `j` owns slots `j, j + stride, j + 2 stride, ...` (at most four:
# `stride = ceil(n_pairs / 4)`).  The thread computes its first frequency with the one `pow`
# it is allowed; each later slot's frequency is the previous one times `stride_ratio`
# ($r^S$, computed on the host in float64).  Thread `idx` is thread `j = idx - token * stride`
# of row `token = idx // stride` (one unsigned division), and slot `j` rotates floats
# `2 token n_pairs + 2j` and the one after.  The census must show one `pow` per thread, and
# none inside the loop that rotates the slots.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def my_rope_strided(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                    stride_ratio):
    """Thread j of row token (idx = token * stride + j) rotates the row's interleaved slots j,
    j + stride, j + 2 stride, ... below n_pairs; slot j's frequency is
    base ** (exponent_step * j), the next slot's that times stride_ratio.

    x, out: float32[tokens * 2 n_pairs]; positions: int32[tokens]; n_pairs, stride
    (= ceil(n_pairs / 4)): uint64; total_threads: int64 = tokens * stride; base: float32 =
    10000; exponent_step: float32 = -2 / hidden; stride_ratio: float32 = base **
    (exponent_step * stride).  Launched with ceil(total_threads / 64) blocks of 64 threads.
    One pow per thread, none in the loop.
    """
    pass

# %%
verdict = steps.check(my_rope_strided, "05.2")

# %% [markdown]
# ### Step 05.3: the launch
#
# Step 05.2's kernel needs five numbers that depend only on the shape: `n_pairs`, `stride`,
# `total_threads`, `exponent_step` and `stride_ratio`.  Write the host function that computes
# them from `tokens`, `hidden` and `base`, and launches `my_rope_strided` (your kernel above)
# with enough [blocks](00_rope_in_one_notebook.ipynb#9-glossary) for `total_threads` threads.  Compute `stride_ratio` in Python's float64
# and round it once, to `float32`, when you pass it: the kernel's recurrence then adds one
# rounding per step, no more.  Pass the index arguments as `uint64(...)` and `total_threads`
# as a plain int (int64).  The grader checks the output, that no block of your grid is wholly
# idle, and that the block size is legal.

# %%
from numba import float32, uint64


def launch_strided(x, out, positions, tokens, hidden, base):
    """Launch my_rope_strided (step 05.2) over tokens rows of hidden floats.

    x, out: device float32[tokens * hidden]; positions: device int32[tokens]; tokens, hidden:
    int; base: float.  Four slots per thread at most: stride = ceil(n_pairs / 4).
    """
    pass

# %%
verdict = steps.check(launch_strided, "05.3")

# %% [markdown]
# ### Step 05.4: the pair_sincos variant
#
# The same recurrence over several heads per token and both pair layouts (every float
# rotates in this step):
#
# * `stride` threads share a head: `head_row = i // stride` is `token * heads + head`, the
#   thread's first slot is `j = i - head_row * stride`, the head starts at float
#   `first = 2 * head_row * half_dim`, and the token is `head_row // heads`;
# * slot `j` rotates floats `a = first + j * step` and `b = a + partner`, with
#   `(step, partner) = (2, 1)` for interleaved pairs and `(1, half_dim)` for half-split ones;
# * one `pow` for the first slot, then `f = f * stride_ratio` for each later one.

# %%
from numba import cuda


@cuda.jit(fastmath=True)
def rope_pair_sincos_heads(x, out, positions, heads, half_dim, stride, total_threads, step,
                           partner, base, exponent_step, stride_ratio):
    """RoPE over heads and both pair layouts: stride threads a head, one pow per thread.

    x, out: float32[tokens * heads * head_dim]; positions: int32[tokens]; heads, half_dim
    (= head_dim / 2), stride (= ceil(half_dim / 4)), step, partner: uint64; total_threads:
    int64 = tokens * heads * stride; base, exponent_step (= -2 / head_dim), stride_ratio
    (= base ** (exponent_step * stride)): float32.  Launched with ceil(total_threads / 64)
    blocks of 64 threads.
    """
    pass

# %%
verdict = steps.check(rope_pair_sincos_heads, "05.4")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing kernel is timed against a device copy of the same bytes.
verdict.time()
