# %% [markdown]
# # 03 — Two pairs per thread, and 128-bit loads
#
# The seed's third kernel gives each [thread](00_rope_in_one_notebook.ipynb#9-glossary) four floats (two pairs) and moves them with one
# 16-byte `float4` load and one 16-byte store instead of four 4-byte ones.  Wide accesses are
# a standard first move for elementwise kernels: fewer load instructions, fewer threads, fewer
# index computations per byte.
#
# This notebook asks what that buys on RoPE, which reads and writes every float exactly once.
# `ropelab` has the variant twice, so the load width can be isolated:
#
# * `pack4`: two pairs per thread, one `ld.global.v4.f32` and one `st.global.v4.f32`;
# * `pack4_scalar`: the same two pairs per thread with four scalar loads and stores.
#
# and the recorded run times both next to CUDA C++ versions of the same algorithms compiled by
# NVIDIA's own compiler, to see what Numba costs.

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

from ropelab.measure import baselines, charts, census as ptx
from ropelab import lessons

print(ropelab.format_description())

# %% [markdown]
# ## The idea
#
# Thread `q` of a row owns pairs `2q` and `2q + 1`, that is floats `4q .. 4q + 3`.  The two
# pairs have different frequencies, so the thread still computes two angles and two
# cosine/sine pairs: packing saves index arithmetic and memory instructions, not
# transcendental functions.
#
# Numba has no `float4` type that loads 16 bytes at once (vector types, records and 2-D views
# all compile to scalar loads), so `ropelab` adds two small intrinsics that reinterpret the
# address as a pointer to four floats; the compiler then emits the same 128-bit instructions
# as the seed's `FLOAT4` macro.  A 16-byte access must be 16-byte aligned, so the vector kernel
# runs only when a row holds a whole number of quads (`hidden % 4 == 0`) and both arrays are
# aligned; otherwise the launcher picks the scalar kernel, which also has a tail path for rows
# with an odd number of pairs.
#
# In the kernel below, `load4` and `store4` are those two intrinsics (`load_f32x4`,
# `store_f32x4`) in the float32 build.  The same kernel is also built for [float16](00_rope_in_one_notebook.ipynb#9-glossary) and [bfloat16](00_rope_in_one_notebook.ipynb#9-glossary)
# storage (`pack4.quad_access`): there four elements are 8 bytes, one 64-bit access that is
# unpacked to float32 before the math and rounded back (to nearest even) on the store.

# %%
print(lessons.excerpt(ropelab.kernels.pack4, "rope_pack4"))

# %% [markdown]
# The scalar variant does the same work as `pack4` with 4-byte accesses.  Here it is as it was
# first written, the order in which the formulas read: rotate the first pair, then the second.
# `ropelab` keeps this version as a control (`pack4_scalar_unhoisted` in
# `ropelab.measure.controls`).  The shipped `pack4_scalar` does the same arithmetic in another
# order; finding that order is the exercise at the end of this notebook, and the shipped kernel
# is printed after it.

# %%
import inspect

from ropelab.measure import controls
from ropelab.measure.bench import format_rows
from ropelab.measure import profile as ncu

print(inspect.getsource(controls.rope_pack4_scalar_unhoisted))

# %% [markdown]
# The load intrinsic, from `ropelab.kernels.vec`: at compile time it turns the element address
# into a pointer to a 16-byte vector of four floats ([LLVM](00_rope_in_one_notebook.ipynb#9-glossary)'s `<4 x float>`) and loads it with
# 16-byte alignment.  The store is written the same way, and on the simulator both are
# ordinary Python functions with the same names.

# %%
print(lessons.excerpt(ropelab.kernels.vec, "vec4_load"))

# %% [markdown]
# ## The thread map
#
# Sixteen floats per token: four threads per row, four floats each.  Each colour below is
# one [block](00_rope_in_one_notebook.ipynb#9-glossary) of 8 threads, and the [grid](00_rope_in_one_notebook.ipynb#9-glossary) is all of them.

# %%
tmap = lessons.trace_threads("pack4", tokens=3, hidden=16, threads_per_block=8)
print(tmap.summary())
lessons.plot_thread_map(tmap, label="global")
plt.show()

# %% [markdown]
# With 10 floats per token (5 pairs) a row does not split into quads.  The launcher uses the
# scalar kernel, and the last thread of each row rotates one pair only:

# %%
tmap = lessons.trace_threads("pack4", tokens=3, hidden=10, threads_per_block=8)
print(tmap.summary())
lessons.plot_thread_map(tmap, label="global")
plt.show()

# %% [markdown]
# ## Correctness
#
# Rows with an odd number of pairs (the tail path), rows of whole quads (the vector kernel),
# and the scalar variant forced on the same shapes:

# %%
rng = np.random.default_rng(3)
results = []
for variant in ("pack4", "pack4_scalar"):
    for tokens, hidden in [(1, 2), (7, 130), (5, 64), (3, 2048)]:
        x = rng.standard_normal((tokens, hidden)).astype(np.float32)
        pos = rng.integers(0, 4096, tokens).astype(np.int32)
        y = ropelab.rope(x, variant=variant, positions=pos)
        results.append(lessons.check(variant, x, y, pos))
        print(results[-1].line)

# %%
# NBVAL_IGNORE_OUTPUT
for r in results:
    print(f"{r.variant:<13} {'x'.join(map(str, r.shape)):<8} max|error| {r.max_error:.2e} ({ropelab.TARGET})")

# %% [markdown]
# ## Census
#
# Per thread and per pair, against the one-pair-per-thread kernel of notebook 01:

# %%
census = ptx.census()
print(f"{'variant':<13} {'pairs/thread':>12} {'instr':>6} {'instr/pair':>10} {'div/rem':>8}"
      f"  {'loads (bits: count)':<20} {'stores':<10} special functions")
for name, pairs in (("flat", 1), ("pack4_scalar", 2), ("pack4", 2)):
    r = ptx.row(census, name, fastmath=True)
    print(f"{name:<13} {pairs:>12} {r['instructions']:>6} {r['instructions'] / pairs:>10.0f}"
          f" {r['int_divrem']:>8}  {str(r['ld_global']):<20} {str(r['st_global']):<10} {r['sfu']}")

# %% [markdown]
# * `pack4` reads its four floats with one 128-bit load (the other 32-bit load is the
#   position) and writes them with one 128-bit store; `pack4_scalar` needs five loads and four
#   stores for the same bytes.
# * Per pair, the packed kernels spend fewer instructions than `flat` (the `instr/pair`
#   column): the index arithmetic and the position load are shared by two pairs, and in
#   `pack4` the vector accesses replace eight memory instructions with two.
# * The special functions are not halved: two `sin`, two `cos`, two `ex2`.  The compiler
#   shares one `lg2` (the logarithm of the base is the same for both pairs), nothing more.
#
# The census changed a lot.  The bytes did not: every variant reads and writes each float
# exactly once.
#
# ## Timing on an H200: does the load width matter?
#
# Each kernel (its [fast-math](00_rope_in_one_notebook.ipynb#9-glossary) build, as always) beside the [roof](00_rope_in_one_notebook.ipynb#9-glossary), the fastest device copy of the
# run.  Each row gives the median of many single launches, their [p20-p80](00_rope_in_one_notebook.ipynb#9-glossary) spread (from the 20th
# to the 80th percentile), the bandwidth that time implies, and its share of the roof.

# %%
bench = lessons.recorded("bench")
if bench is not None:
    print(lessons.provenance(bench))
    print(lessons.bench_table(bench, ["torch_copy", "flat", "pack4_scalar", "pack4"]))

# %%
if bench is not None:
    print(lessons.relative_times(bench, "pack4_scalar", ["pack4", "flat"]))

# %%
if bench is not None:
    lessons.plot_roof(bench, ["flat", "block2d", "pack4_scalar", "pack4"])
    plt.show()

# %% [markdown]
# Two comparisons, each changing one thing.  Their range over the five shapes, and the 1 GB
# shape as a share of the roof, from the record:

# %%
if bench is not None:
    seed_and_big = ("4096x512", "4096x1024", "8192x512", "8192x1024", "32768x4096")

    def time_ratio(a, b):
        r = [lessons.bench_row(bench, a, s)["median_us"] / lessons.bench_row(bench, b, s)["median_us"]
             for s in seed_and_big]
        return f"{min(r):.2f} to {max(r):.2f}"

    print("pack4_scalar / flat        :", time_ratio("pack4_scalar", "flat"))
    print("pack4 / pack4_scalar       :", time_ratio("pack4", "pack4_scalar"))
    for v in ("flat", "pack4_scalar", "pack4"):
        print(f"{v:<13} on 32768x4096: {100 * lessons.share_of_roof(bench, v, '32768x4096'):5.1f}% of the roof")

# %% [markdown]
# * **More work per thread alone** (`pack4_scalar` against `flat`): the same accesses, half as
#   many threads, fewer instructions per pair.  It is *slower* on every shape: sharing index
#   arithmetic between two pairs bought nothing.  The next section finds where the time goes;
#   fewer instructions per pair were not the lever.
# * **Wider accesses alone** (`pack4` against `pack4_scalar`): the same threads and the same
#   work split; only the load and store width changes.  This is the change that moved the
#   clock, on every shape, and on the 1 GB shape it takes the kernel from
#   {{ bench.pack4_scalar_roof_pct }} of the roof to {{ bench.pack4_roof_pct }}, level with the copy.
#
# The [traffic](00_rope_in_one_notebook.ipynb#9-glossary) is identical in both comparisons: a [warp](00_rope_in_one_notebook.ipynb#9-glossary)'s scalar loads of consecutive floats
# are merged into the same memory transactions as its vector loads.  What the vector access
# changes is how many bytes each instruction asks for.  To run at full bandwidth an H200 needs
# a few megabytes in flight at once ([Little's law](00_rope_in_one_notebook.ipynb#9-glossary): bandwidth times [latency](00_rope_in_one_notebook.ipynb#9-glossary)); with 16 bytes per
# load instead of 4, each thread keeps four times as many bytes in flight for the same number
# of outstanding instructions, so the scalar kernel, not the memory, was the limit.  The usual
# expectation for memory-bound kernels is that the load width barely matters; here the record
# says it was the change that mattered.
#
# ## Why `pack4_scalar` lost: the order of its loads
#
# The version printed near the top rotates its first pair, stores it, and only then loads the
# second pair.  `x` and `out` may be the same buffer (RoPE is often applied in place), so the
# compiler must assume a store to `out` can change `x`, and it may not move the second pair's
# loads above the first pair's stores.  Each thread then has one pair (8 bytes) in flight at a
# time, with half as many threads as `flat`.  The controls census ([PTX](00_rope_in_one_notebook.ipynb#9-glossary) order: `L` load, `S`
# store, `?` branch; [SASS](00_rope_in_one_notebook.ipynb#9-glossary) order: `w` is a wait for a load still in flight) shows the order of
# both versions:

# %%
ctl_census = controls.census()
pack_rows = [r for r in ctl_census["rows"] if r["name"] in ("flat", "pack4_scalar", "pack4_scalar_unhoisted")]
print(controls.format_census(dict(ctl_census, rows=pack_rows)))
print()
for r in pack_rows:
    po = r["ptx_order"]
    print(f"{r['name']:<24} global loads after the first store: {po['loads'] - po['loads_before_first_store']}, "
          f"loads issued before the first wait: {r['sass_schedule']['loads_before_first_wait']}")

# %% [markdown]
# `ropelab`'s `pack4_scalar` now loads both pairs before its first store (the second only
# when the row has it), so all five loads go out together.  The old order is kept as the
# control `pack4_scalar_unhoisted`, timed in the same run as the shipped kernel
# (`python -m ropelab.measure.bench.controls`; `ratio` is the median time over the reference's):

# %%
ctl = lessons.recorded("controls")
if ctl is not None:
    print(lessons.provenance(ctl))
    print(format_rows([r for r in ctl["rows"]
                       if r["entry"] in ("copy_d2d", "flat", "pack4", "pack4_scalar", "pack4_scalar_unhoisted")],
                      "controls"))

# %%
if ctl is not None:
    unhoisted = [r["vs_reference"] for r in ctl["rows"] if r["entry"] == "pack4_scalar_unhoisted"]
    hoisted = [r["vs_reference"] for r in ctl["rows"] if r["entry"] == "pack4_scalar"]
    print(f"pack4_scalar_unhoisted / pack4_scalar: {min(unhoisted):.2f} to {max(unhoisted):.2f}")
    print(f"pack4_scalar / flat (loads hoisted):   {min(hoisted):.2f} to {max(hoisted):.2f}")

# %% [markdown]
# Hoisting the loads is worth a few percent, most on the 1 GB shape, and it does not close the
# whole gap: the hoisted kernel is still slower than `flat`.  The Nsight Compute profile
# (`python -m ropelab profile`, under `data/profile/`) shows what remains.  [`sect/req`](00_rope_in_one_notebook.ipynb#9-glossary) is the
# number of 32-byte sectors a warp's load (or store) request touches.  The other columns:
# [`DRAM%`](00_rope_in_one_notebook.ipynb#9-glossary), the HBM throughput; traffic, the DRAM bytes over the minimum; [`occ%`](00_rope_in_one_notebook.ipynb#9-glossary), achieved /
# theoretical occupancy; [`reg`](00_rope_in_one_notebook.ipynb#9-glossary), the registers per thread, and `limit`, what caps the [blocks](00_rope_in_one_notebook.ipynb#9-glossary)
# an [SM](00_rope_in_one_notebook.ipynb#9-glossary) holds; [issue%](00_rope_in_one_notebook.ipynb#9-glossary), the share of cycles a scheduler issued in; [`XU%`](00_rope_in_one_notebook.ipynb#9-glossary), the [SFUs](00_rope_in_one_notebook.ipynb#9-glossary)' pipe; and
# the top stall reasons in [cycles/issue](00_rope_in_one_notebook.ipynb#9-glossary) (here [long_scoreboard](00_rope_in_one_notebook.ipynb#9-glossary), [`wait`](00_rope_in_one_notebook.ipynb#9-glossary), [drain](00_rope_in_one_notebook.ipynb#9-glossary), [mio_throttle](00_rope_in_one_notebook.ipynb#9-glossary) and
# [imc_miss](00_rope_in_one_notebook.ipynb#9-glossary)):

# %%
prof = lessons.recorded("profile")
if prof is not None:
    print(ncu.profile_table(prof, r"^(flat|pack4|pack4_scalar|pack4_scalar_unhoisted|copy_f32x4)@"))

# %%
if prof is not None:
    for name in ("flat", "pack4_scalar", "pack4_scalar_unhoisted", "pack4"):
        r = next(r for r in prof["rows"] if r["case"] == f"{name}@large_32768x4096")
        print(f"{name:<24} sectors per load request {r['ld_sectors_per_request']:5.1f}, "
              f"DRAM bytes / minimum {r['traffic_over_min']:.2f}, waiting for memory "
              f"{r['stall_1_cycles']:.1f} cycles per instruction")

# %% [markdown]
# * The unhoisted kernel waits longer on memory per instruction than the hoisted one: the
#   serialized second pair, seen by the hardware.
# * Both scalar kernels move the same DRAM bytes as `flat`.  But in a 4-float-per-thread
#   layout, neighbouring [lanes](00_rope_in_one_notebook.ipynb#9-glossary) are 16 bytes apart, so each of a warp's 4-byte accesses spans
#   {{ profile.scalar_over_flat_sectors }} as many sectors as `flat`'s: {{ profile.scalar_and_flat_store_sectors }}
#   sectors per store request in the table (the load column is lower for both because it
#   averages in the one-sector loads of `positions`).  And every sector is asked for by four
#   separate instructions, one per float of a lane, so the [L1](00_rope_in_one_notebook.ipynb#9-glossary) handles four requests for bytes
#   that one request could carry.  `pack4` asks for each sector once, with one 128-bit load
#   per lane, and reaches the copy.
#
# So the lesson of the two comparisons stands, with its cause now measured: in this layout the
# width of the access, not the work per thread, decides.
#
# ## Numba against CUDA C++
#
# `ropelab.measure.baselines` holds CUDA C++ twins of `flat` and `pack4`: the same index types, the
# same float32 formulas and guard, compiled by [NVRTC](00_rope_in_one_notebook.ipynb#9-glossary) with `--use_fast_math` as the seed does.
# Here is the `float4` twin, printed from `ropelab.measure.baselines.CUDA_SOURCE`:

# %%
src = baselines.CUDA_SOURCE
start = src.index('extern "C" __global__ void rope_float4_i64')
print(src[start:src.index("\n}\n", start) + 2])

# %%
if bench is not None:
    ratios = charts.twin_ratios(bench)
    for r in ratios:
        print(f"{r['numba']:<6} / {r['cuda_cpp']:<12} {r['shape']:<12} time ratio {r['ratio']:.2f}")
    if not ratios:
        print("no CUDA C++ twin rows in this record (CuPy was not installed on the GPU host)")

# %%
if bench is not None:
    charts.twin_chart(bench)
    plt.show()

# %% [markdown]
# A ratio near 1.0 means Numba produced code as fast as nvcc's for the same algorithm, and
# both twins are there on every shape: `pack4` with its `float4` twin, and the scalar `flat`
# with `cuda_flat`.  The scalar pair was not always level.  Before `flat` switched to unsigned
# index math (`git show 2bd0a54`), Numba's signed division carried Python's floor semantics
# and every array access a negative-index check, and the first recorded run had `flat` well
# behind `cuda_flat` on the 1 GB shape (the run is kept under `data/history/`; notebook 07
# explains what else was wrong with it).  With C's semantics, Numba's PTX and nvcc's run
# equally fast.

# %%
# NBVAL_IGNORE_OUTPUT
print(lessons.live_bench(["pack4_scalar", "pack4"]))

# %% [markdown]
# ## Takeaways
#
# * More work per thread shares index arithmetic and per-token loads between pairs, cutting
#   instructions per pair (by half, with vector accesses); it does not share the per-pair
#   transcendental functions.
# * 128-bit accesses need alignment and whole vectors: keep a scalar path for the rest.
# * On an operator that touches each byte once, the load width changes instructions and the
#   bytes each one keeps in flight, not the bytes moved; on the H200 that was the step from the
#   scalar kernels to the copy.  Judge it against the copy roof, with recorded times.
# * Numba can emit the same vector instructions as CUDA C++ (with a small intrinsic), and the
#   recorded twins show how close the two compilers come on one algorithm.


# %% [markdown]
# ## Build it yourself
#
# Four graded steps rebuild pack4_scalar: two pairs per thread where every row splits evenly,
# then the lone last pair of an odd row, then the launch with its quad counts, and finally the
# order of the loads.  Each of the first three cells holds a signature, a docstring with the
# contract, and `pass`; the cell after it grades your function and never stops the notebook.
# Solutions and the mistakes the grader recognizes: `notebooks/solutions/03_pack4.py`.
#
# ### Step 03.1: two pairs per thread
#
# Notebook 02's mapping, with twice the work per thread: block `token`, thread `t` rotates pairs
# `2t` and `2t + 1` of the row, the four floats from `2 * token * n_pairs + 4t` on, each pair
# by its own angle `positions[token] * inv_freq[pair]`.  Every row here has an even number of
# pairs (2, 6 and 68), so a thread with a first pair always has a second.  No integer division.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    """Block `token`, thread t with 2t < n_pairs: rotate pairs 2t and 2t + 1 of the token's row
    (floats 2 token n_pairs + 4t .. + 3), pair p by positions[token] * inv_freq[p].

    x, out: float32[tokens * 2 n_pairs]; positions: int32[tokens]; inv_freq: float32[n_pairs];
    n_pairs: int64, even.  Launched with one block per token of n_pairs / 2 threads rounded up
    to whole warps.  No integer division, no float64.
    """
    pass

# %%
from ropelab.grader import steps

verdict = steps.check(rope_two_pairs, "03.1")

# %% [markdown]
# `verdict.show()` draws the kernel you just graded on the step's small case: which thread
# wrote each element of `out` (colour = block, number = global thread), which read `x` (where
# the step has one), your output beside the reference with wrong cells outlined, and each
# thread's reads and writes.  With the empty starter nothing is written yet: run it again once
# `rope_two_pairs` has a body, and after every failing verdict.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Step 03.2: the odd tail, on a flat grid
#
# Now notebook 01's flat [grid](00_rope_in_one_notebook.ipynb#9-glossary), one thread per *quad* (two neighbouring pairs), over rows of 1, 5
# and 65 pairs.  Quads do not run across rows: a row of `n_pairs` pairs has
# `quads_per_row = ceil(n_pairs / 2)` quads, and when `n_pairs` is odd its last quad holds one
# pair only.  Quad `q` finds its token with one unsigned division, `token = q // quads_per_row`,
# its first pair as `2 (q - token * quads_per_row)`, and touches the second pair only when
# `pair + 1 < n_pairs`.  The rules of notebook 01 hold: unsigned index math, no `%`.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def rope_quads(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    """Thread q < total_quads rotates quad q: pairs `pair` and `pair + 1` of row `token`, where
    token = q // quads_per_row and pair = 2 (q - token quads_per_row); the second pair only when
    pair + 1 < n_pairs.  Pair p turns by positions[token] * inv_freq[p].

    x, out: float32[tokens * 2 n_pairs]; positions: int32[tokens]; inv_freq: float32[n_pairs];
    n_pairs, quads_per_row: uint64; total_quads: int64 = tokens * quads_per_row.
    Launched with ceil(total_quads / 64) blocks of 64 threads.  One unsigned division, no %.
    """
    pass

# %%
verdict = steps.check(rope_quads, "03.2")

# %% [markdown]
# ### Step 03.3: the launch
#
# The host side of step 03.2: compute `quads_per_row` (as a `uint64`, rounded **up**) and
# `total_quads` (an `int64`) from the shape, then launch `rope_quads` with one thread per quad,
# at most 1024 threads per block.  `n_pairs` arrives as a Python int: pass it as `uint64(n_pairs)`,
# step 03.2's type.  The grader checks coverage, idle blocks, the configuration's legality and
# the types of the kernel's arguments.

# %%
import numpy as np


def launch_quads(x, out, positions, inv_freq, n_pairs):
    """Launch rope_quads (step 03.2) on these device arrays, one thread per quad: compute
    quads_per_row = ceil(n_pairs / 2) (uint64) and total_quads = tokens * quads_per_row (int64),
    tokens = positions.size; at most 1024 threads per block, no block wholly idle.
    """
    pass

# %%
verdict = steps.check(launch_quads, "03.3")

# %% [markdown]
# ### Step 03.4: loads before stores
#
# The kernel below is correct, and it is `pack4_scalar`'s work split: one thread, two adjacent
# pairs, the frequencies computed.  But look at the order: it stores the first pair before it
# loads the second.  `x` and `out` may be the same buffer (RoPE is often applied in place), so
# the compiler must assume a store to `out` can change `x`: the second pair's loads cannot move
# above the first pair's stores, and each thread has only one pair (8 bytes) in flight at a
# time.
#
# Reorder the body so that **all four floats are loaded before the first store** (the second
# pair only when `pair + 1 < n_pairs`, as in step 03.2).  *Why a skeleton:* this step teaches
# the order of the loads, not the arithmetic, so the starter is the whole kernel with its loads
# in the wrong place; nothing is blank, it runs, and the grader's census shows the problem as
# "global loads after the first store".  Your version must bring that count to 0 and keep
# every value right on rows with odd and even pair counts.

# %%
import math

from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def my_rope_pack4_scalar(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)  # the first of this thread's two pairs
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        # Reorder from here on: every load of x before the first store to out.
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:  # false only for the lone last pair of an odd row
            j = i + uint64(2)
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            x2 = x[j]
            x3 = x[j + uint64(1)]
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c

# %%
verdict = steps.check(my_rope_pack4_scalar, "03.4")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing kernel is timed against a device copy of the same bytes.
verdict.time()

# %% [markdown]
# ### After step 03.4: `ropelab`'s `pack4_scalar`
#
# The shipped kernel, with both pairs loaded before the first store (compare with your
# version and with `notebooks/solutions/03_pack4.py`):

# %%
print(lessons.excerpt(ropelab.kernels.pack4, "rope_pack4_scalar"))
