# %% [markdown]
# # 07 — Measuring kernels honestly
#
# Every notebook so far ended with a table of times recorded on an H200.  This one explains
# how those times were taken, and why the obvious way of timing a kernel gives numbers that
# describe something else.  The running example is the seed's own benchmark table, measured
# on an RTX 4090:
#
# | tokens x hidden | seed `f32` kernel | seed `f32x4_pack` kernel | PyTorch complex reference |
# |---|---|---|---|
# | 4096 x 512 | {{ seed.f32_4096x512_ms }} | {{ seed.pack4_4096x512_ms }} | {{ seed.torch_4096x512_ms }} |
# | 8192 x 1024 | {{ seed.f32_8192x1024_ms }} | {{ seed.pack4_8192x1024_ms }} | {{ seed.torch_8192x1024_ms }} |
#
# From it the seed concluded that RoPE is compute-bound, that wide loads are worth about 2
# percent, and that a frequency table would be the next win.  Notebooks 03 and 04 found the
# opposite on an H200.  Here is why the table could not have told.

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

import inspect

import matplotlib.pyplot as plt
import numpy as np

from ropelab.measure import bench, census as ptx
from ropelab import lessons
from ropelab.lessons import ledger
from ropelab.measure import seed_claims

print(ropelab.format_description())

# %% [markdown]
# ## 1. The seed's numbers are faster than the memory
#
# RoPE reads every float once and writes it once.  A kernel's time therefore implies a
# bandwidth, and that bandwidth cannot exceed what the memory delivers.  An RTX 4090's [GDDR6X](00_rope_in_one_notebook.ipynb#9-glossary)
# delivers about {{ seed.dram_4090_gbps }} by its data sheet:

# %%
seed_rows = [((4096, 512), 0.00627), ((4096, 1024), 0.01009), ((8192, 512), 0.01005),
             ((8192, 1024), 0.01866)]  # (shape, ms per call), the seed's f32 kernel on a 4090
DRAM_4090_GBPS = 1008
for (tokens, hidden), ms in seed_rows:
    moved = 2 * tokens * hidden * 4  # bytes: x read once, out written once
    implied = moved / (ms * 1e-3) / 1e9
    print(f"{tokens}x{hidden}: {moved / 1e6:5.1f} MB in {ms * 1e3:5.2f} us -> {implied:,.0f} GB/s, "
          f"{implied / DRAM_4090_GBPS:.1f}x what the 4090's memory can deliver")

# %% [markdown]
# Roughly three times faster than the memory can deliver: the data never came from memory.  The seed's
# timer ran 20 calls back to back on the same input after a warm-up, and 17 to 67 MB fits in
# the 4090's 72 MB [L2](00_rope_in_one_notebook.ipynb#9-glossary) cache, so every timed call read and wrote L2.  And because it divided
# the wall-clock time of those 20 calls by 20, each number also contains whatever the host
# spends launching a call; a kernel that lasts a few microseconds cannot be told apart from
# its launch.  Two kernels with the same launch cost and L2-resident data look the same, which
# is exactly what the seed saw ({{ seed.f32_4096x512_ms }} against {{ seed.pack4_4096x512_ms }}).
#
# ## 2. What a caller pays
#
# A kernel's speed is only worth what a caller gets through the function they call.  This
# section times `ropelab.rope` and `ropelab.fused_qknorm_rope` exactly as a PyTorch user calls
# them: tensors on the device, device `positions`, `out=` given.  Two numbers per call:
#
# * **host time per call**: 300 calls back to back on a small shape, one synchronize at the
#   end.  The kernels are shorter than a call, so this is what the Python side costs.
# * **events**: [CUDA events](00_rope_in_one_notebook.ipynb#9-glossary) around one call, after a 1 GiB fill that keeps the GPU busy while
#   the host works.  If the call waits for the GPU inside (a synchronization), the GPU idles
#   until the host is done, and that idle time lands between the events.
#
# The recorded run measured the reviewed code (commit e4c1533, "before") and this one
# ("after") in the same session, each in its own process (the fused op on [bfloat16](00_rope_in_one_notebook.ipynb#9-glossary) heads,
# shortened to `bf16` in the table).

# %%
public = lessons.recorded("public_path")
if public is not None:
    print(lessons.provenance(public))
    print(lessons.public_path_table(public))

# %% [markdown]
# Before, every call copied the device `positions` to the host to check their values.  A
# device-to-host copy waits for all the work queued on the GPU, so every call was a
# synchronization: the GPU finished the fill, then idled while Python validated, converted
# each tensor with `cuda.as_cuda_array`, let numba's dispatcher type every argument, and only
# then launched.  That is why pack4 on 32768 x 4096, {{ public.pack4_events_after_us }} between the
# events today, cost {{ public.pack4_events_before_us }}, and flat on 4096 x 512,
# {{ public.flat_small_events_after_us }} today, cost {{ public.flat_small_events_before_us }}.
#
# After: a call validates its arguments once per *call shape* (types, shapes, strides, dtypes,
# options) and remembers the result; a later call of the same shape reads three pointers,
# checks that they do not overlap, and launches through `cuLaunchKernel` with parameters packed
# once (`ropelab.kernels.launch`).  Device positions are never read on the host: a kernel
# with a position limit (a cos/sin cache) writes NaN for an out-of-range token and records it
# in a device error word that `ropelab.check_errors()` reads when the caller chooses to
# synchronize.  `check_positions=True` puts the old synchronous check back, on request: the
# last rows of the table show what it costs.
#
# The host cost per call, beside other launchers measured in the same run:

# %%
overhead = lessons.recorded("launch_overhead")
if overhead is not None:
    print(lessons.provenance(overhead))
    print(bench.format_rows(overhead["rows"], "launch_overhead"))

# %%
if overhead is not None:
    lessons.plot_launch_overhead(overhead)
    plt.show()

# %% [markdown]
# The public call costs a few microseconds more than firing the bound launch alone (the cache
# lookup and the overlap check), and less than twice a CuPy `RawKernel` launch with as many
# arguments; numba's own dispatcher costs several times more, which is why ropelab does not
# call it per launch.
#
# On the GPU's timeline, the bench record times each variant twice: the public call, and the
# same compiled launch fired with fixed pointers (`:kernel`), the fused op in float32,
# [float16](00_rope_in_one_notebook.ipynb#9-glossary) and bfloat16.  With the GPU kept busy by the fill, the two agree to within
# run-to-run noise:

# %%
bench_record = lessons.recorded("bench")
if bench_record is not None:
    print(lessons.public_vs_kernel(bench_record, shapes=("4096x512", "32768x4096", "flux_1024")))

# %% [markdown]
# Because a call neither synchronizes nor allocates once its shape is known, it can be
# captured in a CUDA graph: warm it up once outside the capture (that compiles the kernel and
# uploads its tables), then capture and replay.  `tests/test_gpu_public_path.py` does this on
# the H200 for `ropelab.rope` and `ropelab.fused_qknorm_rope` and checks the replay against
# the eager result:
#
# ```python
# out = torch.empty_like(x)
# ropelab.rope(x, variant="pair_sincos", positions=pos, out=out)   # warm-up
# g = torch.cuda.CUDAGraph()
# with torch.cuda.graph(g):
#     ropelab.rope(x, variant="pair_sincos", positions=pos, out=out)
# g.replay()
# ```
#
# Calls on PyTorch tensors run on PyTorch's current [stream](00_rope_in_one_notebook.ipynb#9-glossary) (and CuPy arrays on CuPy's), so
# inside `torch.cuda.stream(s)` or a graph capture they land where the surrounding code's work
# does; `stream=` overrides it.
#
# ## 3. The method: events, a cold L2, a busy GPU
#
# `ropelab.measure.bench.Timer` measures only GPU time, and only cold:

# %%
print(inspect.getsource(bench.Timer.time))

# %% [markdown]
# Before every timed launch it enqueues a fill kernel that writes a buffer at least four times
# the L2 (the record below says how large, and how large the H200's L2 is).  That does two
# things:
#
# * it **evicts the L2**, so the timed kernel reads its input from memory, as it would inside
#   a model where other layers ran in between;
# * it **keeps the GPU busy** for longer than the host needs to enqueue the timed launch, so
#   the start event is recorded on a GPU that is still working and the kernel starts right
#   after it; the events then bracket GPU work only.
#
# The medians and 20th-80th percentiles of 50 such launches go into the record with the GPU,
# driver, versions, the number of [SMs](00_rope_in_one_notebook.ipynb#9-glossary) and the date.  The method as recorded: it names the
# record's [traffic](00_rope_in_one_notebook.ipynb#9-glossary) (the bytes a shape must move) and flags a row [host_bound](00_rope_in_one_notebook.ipynb#9-glossary) when the host's
# enqueue time nearly fills the GPU's busy time:

# %%
if bench_record is not None:
    meta = bench_record["meta"]
    print(lessons.provenance(bench_record))
    print(f"fill {meta['flush_bytes'] / 2**20:,.0f} MiB, L2 {meta['l2_bytes'] / 2**20:,.0f} MiB, "
          f"{meta['sm_count']} SMs")
    print(bench_record["method"])

# %% [markdown]
# The second point is a claim, and the record checks it.  Each row stores `host_us`, the median
# host time from just before the start event to just after the end event (enqueueing the
# timed launch), and `fill_us`, how long one fill keeps the GPU busy.  If the host took longer
# than the fill lasts, the GPU ran dry inside the events and the row timed the host; such a
# row is marked `host_bound` (enqueueing took at least 80 percent of the fill).  In this run:

# %%
if bench_record is not None:
    rows = bench_record["rows"]
    fill = max(r["fill_us"] for r in rows)
    slowest = max((r for r in rows if not r["host_bound"]), key=lambda r: r["host_us"])
    print(f"one fill keeps the GPU busy for {fill:.0f} us")
    print(f"slowest enqueue among the other rows: {slowest['host_us']:.0f} us ({slowest['variant']}, {slowest['shape']})")
    for r in rows:
        if r["host_bound"]:
            print(f"host_bound: {r['variant']:<20} {r['shape']:<12} enqueue {r['host_us']:>9,.0f} us, "
                  f"GPU time {r['median_us']:>9,.0f} us")

# %% [markdown]
# Only one baseline is host-bound: the seed's complex-number PyTorch reference, which computes
# its angle table on the CPU and copies it to the GPU on every call.  Its "GPU time" includes
# the GPU waiting for the host, which is part of what that implementation costs, but it is not
# a kernel time.  Every other row timed GPU work: its enqueue took well under one fill.
#
# ## 4. The roof: a copy of the same bytes
#
# A RoPE kernel moves the same bytes as a copy and does a little arithmetic on the way, so the
# copy's time is the floor under its time and the copy's bandwidth is its [roof](00_rope_in_one_notebook.ipynb#9-glossary).  The record
# times two copies of every shape, PyTorch's and one issued by `ropelab` through the CUDA
# driver (`cuMemcpyDtoDAsync`):

# %%
def copy_pair_table(record):
    by = {(r["variant"], r["shape"]): r for r in record["rows"] if r["dtype"] == "float32"}
    print(f"{'shape':<12} {'MB':>6} {'torch copy us':>14} {'ropelab copy us':>16} {'ratio':>6}")
    for shape in ("4096x512", "4096x1024", "8192x512", "8192x1024", "32768x4096"):
        t, n = by.get(("torch_copy", shape)), by.get(("copy_d2d", shape))
        if t and n:
            print(f"{shape:<12} {t['bytes_moved'] / 1e6:>6.0f} {t['median_us']:>14.1f} "
                  f"{n['median_us']:>16.1f} {n['median_us'] / t['median_us']:>6.2f}")


if bench_record is not None:
    copy_pair_table(bench_record)

# %% [markdown]
# The two copies agree, as two copies of the same bytes should.  They did not in this
# benchmark's first run on the H200, which is kept under `data/history/` with a note on what
# was wrong with it.  The same table from that run:

# %%
import json

from ropelab.measure import records

first_run = records.validate(json.loads(
    (records.DATA_DIR / "history" / "bench-first-run-sync-copy-20261129.json").read_text()))
print(lessons.provenance(first_run))
copy_pair_table(first_run)
flat_first = lessons.bench_row(first_run, "flat", "4096x512")
print(f"flat on 4096x512 in that run: {flat_first['median_us']:.1f} us, "
      f"{100 * flat_first['frac_of_copy']:,.0f}% of 'the copy'")

# %% [markdown]
# A kernel that reads and writes every byte and computes a sine on the way cannot be ten times
# faster than copying the same bytes; that row is a question about the measurement, not a
# claim about the kernel.  The first version issued its copy with Numba's `copy_to_device`
# without a stream, which is the *synchronous* `cuMemcpyDtoD`: the host waited for it between
# the two events, so the events bracketed a host round trip as well as the copy.  On the 1 GB
# shape the copy itself is long enough to hide that wait, and the two copies agreed there;
# on the small shapes the "copy" was several times slower than PyTorch's.  The fix calls
# `cuMemcpyDtoDAsync` on the driver directly, with the device pointers looked up once, and
# the host enqueue time is now recorded for every row (section 3).
#
# The rule the course follows: compare every kernel with a copy of the same bytes timed the
# same way, check the copies against each other, and treat any measurement that beats the
# roof, or loses to it absurdly, as a question about the measurement before it is a claim
# about a kernel.  Notebooks 01 to 05 divide by the **fastest copy of the whole run** (the
# 1 GB copy; the `of roof` column); notebook 06, whose shapes are small, divides by the copy
# of **each shape's own bytes** (the record's `frac_of_copy`, valid again since the fix).
#
# Small shapes stay below the roof even for the best copy: at 17 MB the GPU spends a large
# part of a {{ bench.small_copy_us }} copy filling its SMs and draining them.  That is why every comparison in
# this course is read on the 1 GB shape first.
#
# **How much does a recorded time move from one run to the next?**  The bench has been run
# more than once, and the CUDA C++ kernels and PyTorch baselines did not change between the
# last two runs, so any difference in their medians is run-to-run noise.  The largest such
# difference per shape:

# %%
unchanged = ["cuda_flat", "cuda_flat_i32", "cuda_float4", "torch_copy", "torch_cached",
             "torch_compile"]
runs = lessons.recorded_runs("bench")
if len(runs) > 1:
    print("between", lessons.provenance(runs[-2]))
    print("    and", lessons.provenance(runs[-1]))
    noise = lessons.run_to_run(runs[-1], runs[-2], unchanged)
    for shape in ("4096x512", "4096x1024", "8192x512", "8192x1024", "32768x4096"):
        print(f"{shape:<12} same code, two runs: medians differ by up to {100 * noise[shape]:4.1f}%")

# %% [markdown]
# The small shapes, which last {{ bench.seed_shapes_us }}, move by several percent between runs; the 1 GB shape
# moves much less.  A difference of a few percent between two kernels on a small shape is
# therefore not a result until it repeats across runs, and the course reads its comparisons
# on the 1 GB shape.  Notebook 06 uses a second estimate of the same kind, two timings of one
# kernel within one run.
#
# ## 5. Every variant and baseline, on one chart
#
# The 1 GB shape first as a table: each row gives the median of the single launches, their
# [p20-p80](00_rope_in_one_notebook.ipynb#9-glossary) spread (from the 20th to the 80th percentile), the bandwidth and its share of the
# roof.

# %%
if bench_record is not None:
    everything = ["torch_copy", "flat", "block2d", "pack4_scalar", "pack4", "freq_table",
                  "pair_sincos", "cuda_flat", "cuda_flat_i32", "cuda_float4", "torch_compile",
                  "torch_cached", "torch_complex_seed"]
    print(lessons.bench_table(bench_record, everything, shapes=["32768x4096"]))

# %%
if bench_record is not None:
    lessons.plot_all_variants(bench_record, "32768x4096")
    plt.show()

# %%
if bench_record is not None:
    lessons.plot_roof(bench_record, ["flat", "block2d", "pack4", "freq_table", "pair_sincos",
                                    "cuda_float4", "torch_compile"])
    plt.show()

# %% [markdown]
# Reading the charts from the fastest.  The first has a linear time axis that ends at twice
# the roof's time, so the few percent between the fast rows stay visible; the two rows past
# its end are hatched, with their times written on them.  The Numba `pack4` kernel, its CUDA
# C++ twin and the copies are together at the roof; `pair_sincos` comes next; `flat`,
# `freq_table` and their CUDA C++ counterparts are level a little further down; `block2d`,
# `pack4_scalar` and `torch.compile` of the cached-table formula below them.  The eager
# PyTorch versions pay for several passes over memory (and the seed's complex reference for
# host work on every call) and are one to more than two orders of magnitude away.  In the
# second chart, the black line over each shape is where that shape's own copy reached.
#
# On a GPU the next cell re-measures the launch overhead live; its output is not checked.

# %%
# NBVAL_IGNORE_OUTPUT
if ropelab.TARGET == "gpu":
    print(bench.format_rows(bench.launch_overhead(launches=500, warmup=50, progress=False),
                            "launch_overhead"))
else:
    print("no GPU in this process: the launch-overhead table above is the recorded run")

# %% [markdown]
# ## 6. The seed claims, one by one
#
# The course started from two notes: a study of the three CUDA RoPE kernels this course
# ported (timed on an RTX 4090), and a note on SGLang PR 21654, which made its fused
# QK-norm + RoPE kernel compute sine and cosine once per pair instead of once per element.
# Every claim they make gets a verdict here: *confirmed*, *refuted*, *nuanced* (true in part,
# or true for another reason), or *not recorded yet* (it needs a GPU measurement that `data/`
# does not hold yet).  Four claims needed work that the earlier notebooks did not contain;
# they come first, then the whole ledger.
#
# ### "`__sincosf` computes sine and cosine at once: half the SFU instructions"
#
# CUDA C++ has `__sincosf(a, &s, &c)`, which returns both.  Whether it saves anything is a
# question for the compiler, and one can ask it without a GPU: [NVRTC](00_rope_in_one_notebook.ipynb#9-glossary), NVIDIA's runtime
# compiler for CUDA C++, turns two small kernels into [PTX](00_rope_in_one_notebook.ipynb#9-glossary) with the seed's `--use_fast_math`
# (the source is `ropelab.measure.seed_claims.CUDA_SOURCE`):

# %%
print(ledger.census_table([("nvrtc", "sincosf_intrinsic"), ("nvrtc", "sinf_and_cosf")]))
print("Numba's flat kernel, math.sin and math.cos of one angle:", ptx.row(ptx.census(), "flat")["sfu"])

# %% [markdown]
# The same two [SFU](00_rope_in_one_notebook.ipynb#9-glossary) instructions either way: the special function unit has a sine and a cosine
# operation, not a combined one, and `__sincosf` is a convenience of the source language.
# Numba has no `sincos`; `math.sin` and `math.cos` of one angle compile to one `sin.approx` and
# one `cos.approx`, which is already the minimum.  Refuted.
#
# ### SGLang's "before": sine and cosine for every element
#
# Before PR 21654, each element of an interleaved pair computed its own frequency (`powf`) and
# its own `__sincosf`, although both elements of a pair share them.  To see what that cost,
# `ropelab.measure.seed_claims` has a controlled pair of kernels: a [warp](00_rope_in_one_notebook.ipynb#9-glossary) per (token, head), four
# elements per [lane](00_rope_in_one_notebook.ipynb#9-glossary), the frequency from `pow` as SGLang computes it, and one switch, `PER_PAIR`,
# between the two forms (no [RMSNorm](00_rope_in_one_notebook.ipynb#9-glossary): only the step the PR changed):

# %%
print(lessons.excerpt(seed_claims, "sglang_style_rope"))

# %% [markdown]
# The census of both forms, from Numba and from NVRTC compiling the same two forms written in
# CUDA C++ (counts per lane, which holds two pairs):

# %%
print(ledger.census_table([("numba", "per_element"), ("numba", "per_pair"),
                           ("nvrtc", "sglang_per_element"), ("nvrtc", "sglang_per_pair")]))

# %% [markdown]
# The source halves the calls, but the compilers had already done part of it.  [NVVM](00_rope_in_one_notebook.ipynb#9-glossary), the
# compiler behind Numba, sees that both elements of a pair compute the same `pow`, `sin` and
# `cos` and keeps one of each: Numba's per-element kernel is instruction for instruction the
# per-pair kernel.  NVIDIA's C++ compiler proves it for one of the lane's two pairs only, so
# there the per-pair form saves a third of the special functions, not a half.  The claim that
# this makes the kernel faster needs a GPU; `python -m ropelab.measure.seed_claims --record`
# times the CUDA C++ pair and the Numba pair on the production shapes:

# %%
print(ledger.per_pair_table())

# %% [markdown]
# ### "{{ seed.complex_factor }} slower": the PyTorch complex reference
#
# The seed timed its handwritten kernel against a PyTorch implementation built from complex
# numbers (`view_as_complex`, `polar`, a complex multiply) and found it {{ seed.complex_factor }} slower.  The
# bench ran that same PyTorch code on the H200 beside `flat`:

# %%
if bench_record is not None:
    print(ledger.complex_factor_table(bench_record))

# %% [markdown]
# The factor is not a constant: it grows with the shape, from tens to more than a hundred.  The
# PyTorch code builds its angle table on the CPU (`torch.outer` of two CPU tensors, then
# `.cuda()`) and copies it to the GPU on every call, so its rows are host-bound (section 3) and
# the factor measures the host as much as the GPU.  On the seed's four shapes the H200 factor is
# well below 135; only the 1 GB shape exceeds it.  Nuanced: the reference is slow, by a factor
# that depends on the shape and on where it computes.
#
# ### `if constexpr (yarn)`: compile-time specialization in Numba
#
# The PR also replaced a runtime test `if (factor != 1.0f)` around the [YaRN](00_rope_in_one_notebook.ipynb#9-glossary) blend with a
# template parameter, `if constexpr (yarn)`, so kernels built without YaRN contain no trace of
# it.  Numba has no templates, but it has the same thing: a Python value that the kernel
# function closes over (or reads as a global) is frozen into the compiled kernel as a
# constant, and a branch on it is folded away.  `make_kernel(per_pair, yarn)` above is such a
# factory: `YARN_ALWAYS` and `YARN_AT_RUNTIME` are plain Python booleans, and each combination
# becomes its own kernel with its own dispatcher (`ropelab.kernels.plan.jitted` caches one
# per function).  The blend it calls:

# %%
print(lessons.excerpt(seed_claims, "yarn_blend"))

# %% [markdown]
# The census of the three builds, beside the C++ template versions:

# %%
print(ledger.census_table([("numba", "per_pair"), ("numba", "per_pair_yarn_on"),
                           ("numba", "per_pair_yarn_runtime"), ("nvrtc", "sglang_per_pair"),
                           ("nvrtc", "sglang_per_pair_yarn_on"),
                           ("nvrtc", "sglang_per_pair_yarn_runtime")]))

# %% [markdown]
# Both compilers agree.  The build without YaRN has no blend and no extra branch; the build
# with it pays the blend's arithmetic and nothing else; the runtime test is the largest of
# the three: the compiler hoisted the test out of the loop and kept two copies of the loop,
# one for each outcome, which is why its sines and cosines appear twice (a [thread](00_rope_in_one_notebook.ipynb#9-glossary) runs only
# one copy).  The closure constant is Numba's `if constexpr`.  Confirmed.
#
# ### The whole ledger
#
# Every claim of the two notes, with the finding and the notebook section or record that shows
# it.  Numbers in it are computed from the records and the census, so a new GPU run updates
# them; the README carries the same verdicts in a table, and `tests/test_ledger.py` checks that
# the two agree.  The claims are about [fast-math](00_rope_in_one_notebook.ipynb#9-glossary), the [HBM](00_rope_in_one_notebook.ipynb#9-glossary) bandwidth a kernel reaches, and
# [coalescing](00_rope_in_one_notebook.ipynb#9-glossary): how many [sectors](00_rope_in_one_notebook.ipynb#9-glossary) a warp's loads touch.
# Some are about the shape of a launch: how many threads a [block](00_rope_in_one_notebook.ipynb#9-glossary) holds.

# %%
print(ledger.format_ledger())

# %% [markdown]
# ## 7. Inside a PyTorch model: one graph, a backward pass, the same speed
#
# A model author does not call a kernel; they write a PyTorch function and hand it to
# `torch.compile`, and they train it.  Called like that, the public `ropelab.rope` fails twice.
# TorchDynamo, the part of `torch.compile` that reads Python bytecode, traces *into* ropelab's
# Python and hands the Numba kernel 0-d arrays where it expects scalars (a Numba `TypingError`);
# and a tensor that requires grad comes back without a `grad_fn`, so training would lose its
# gradient without an error.
#
# The cure is the one PyTorch gives for foreign kernels: a **custom operator**
# (`torch.library.custom_op`).  `ropelab.torch_ops` [registers](00_rope_in_one_notebook.ipynb#9-glossary) `ropelab::rope` and
# `ropelab::fused_qknorm_rope`; it imports torch, `import ropelab` does not.  An op is opaque to
# Dynamo, which records it as one node of the graph; a *fake* implementation tells the compiler
# the shape and dtype of the result without running anything; the schema declares which
# arguments the op writes (`qkv`, `out`), so the compiler neither reorders nor drops those
# writes.  Options that are not tensors (variant, base, scaling...) travel as one JSON string,
# a constant of the graph.  On CUDA tensors the op runs ropelab's device path on PyTorch's
# current stream; on CPU tensors, as here, the host path, on the simulator.  Importing
# `ropelab.torch_ops` also tells Dynamo to trace a call to `ropelab.rope` as the op, so code
# written against the public function compiles as well (its eager calls stay as they were).
#
# Below, a toy attention step: a projection to q and k, RoPE on both, one logit per head.
# The compiler is given a `backend` that keeps the graph it receives, so we can count graphs
# (a graph break would make two) and look for the ops inside.

# %%
try:
    import torch
    import ropelab.torch_ops as rt
except ModuleNotFoundError:  # the course extra does not install PyTorch
    torch = None
    print("PyTorch is not installed (pip install torch): this section's cells do nothing")

if torch is not None:
    torch.manual_seed(0)
    tokens, heads, head_dim = 6, 2, 16
    proj = torch.nn.Linear(heads * head_dim, 2 * heads * head_dim, bias=False)
    positions = torch.arange(tokens, dtype=torch.int32)

    def qk_logits(h, positions):
        q, k = proj(h).view(tokens, 2 * heads, head_dim).chunk(2, dim=1)
        q = rt.rope(q.contiguous(), variant="pair_sincos", interleave=False, positions=positions)
        k = rt.rope(k.contiguous(), variant="pair_sincos", interleave=False, positions=positions)
        return (q * k).sum(-1)  # [tokens, heads]

    graphs = []

    def keep_graph(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(qk_logits, fullgraph=True, backend=keep_graph)
    h = torch.randn(tokens, heads * head_dim)
    with torch.no_grad():
        same = torch.equal(compiled(h, positions), qk_logits(h, positions))
    ops = [str(n.target) for n in graphs[0].graph.nodes if "ropelab" in str(n.target)]
    print(f"graphs: {len(graphs)} (fullgraph=True would have raised on a break)")
    print(f"ropelab ops in the graph: {ops}")
    print(f"compiled == eager, bit for bit: {same}")

# %% [markdown]
# ### The backward pass is the inverse rotation
#
# RoPE multiplies each pair by a rotation matrix $R(\theta)$ (times YaRN's attention factor $m$,
# when there is one): $y = m R x$.  A rotation is orthogonal, $R^{-1} = R^T = R(-\theta)$, so the
# gradient the backward pass must return is
#
# $$\frac{\partial L}{\partial x} = m R^T \frac{\partial L}{\partial y} = \text{rope}\left(\frac{\partial L}{\partial y},\ \text{inverse=True}\right),$$
#
# the same kernel run with the angle negated: as cheap as the forward, and no torch arithmetic.
# The seed's variants (`flat`, `block2d`, `pack4`) have no inverse rotation, so their backward
# runs `freq_table` with the same frequencies.  The autograd wiring, from `ropelab/torch_ops/rope_op.py`:

# %%
if torch is not None:
    print(lessons.excerpt(rt.rope_op, "torch_rope_backward"))

# %% [markdown]
# Check it against the float64 reference: for an upstream gradient $g$, $\partial L / \partial x$
# of $L = \sum g \cdot \text{rope}(x)$ is the float64 inverse rotation of $g$.  Then the same
# backward through the compiled function (this time with the default backend, Inductor, which
# compiles the forward and the backward graphs).

# %%
if torch is not None:
    x = torch.randn(tokens, heads, head_dim, requires_grad=True)
    g = torch.randn(tokens, heads, head_dim)

    def loss(x):
        return (rt.rope(x, variant="pair_sincos", interleave=False, positions=positions) * g).sum()

    loss(x).backward()
    print(lessons.check("dL/dx from ropelab's backward", g.numpy(), x.grad.numpy(), positions.numpy(),
                       interleave=False, inverse=True).line)

    x_compiled = x.detach().clone().requires_grad_()
    torch.compile(loss, fullgraph=True)(x_compiled).backward()
    print(f"compiled backward == eager backward, bit for bit: {torch.equal(x_compiled.grad, x.grad)}")

# %% [markdown]
# The fused kernel's backward is the next lesson's subject (notebook 08).  When autograd needs a
# gradient, `rt.fused_qknorm_rope` goes out of place: it returns a new tensor, leaves `qkv` as
# it was (the backward reads it), and its backward runs ropelab's backward kernel.  The in-place
# op itself still refuses a tensor that requires grad, loudly: silently detaching it would train
# a model whose norm weights never move.

# %%
if torch is not None:
    qkv, w = torch.randn(2, 3 * 64), torch.ones(64, requires_grad=True)
    before = qkv.clone()
    y = rt.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
                             q_weight=w, k_weight=w, positions=torch.zeros(2, dtype=torch.int32))
    (y * y).sum().backward()
    print(f"a new tensor: {y is not qkv}, qkv unchanged: {torch.equal(qkv, before)}, "
          f"q/k weight gradient: {w.grad is not None and bool(w.grad.abs().max() > 0)}")
    try:
        torch.ops.ropelab.fused_qknorm_rope(qkv, w, w, torch.zeros(2, dtype=torch.int32),
                                            rt.encode(num_heads_q=1, num_heads_k=1,
                                                      num_heads_v=1, head_dim=64))
    except RuntimeError as exc:
        print(f"RuntimeError: {exc}")

# %% [markdown]
# ### What the op costs
#
# The op adds Python on the host (PyTorch's dispatcher, the compiled function's guards) and
# nothing on the GPU: the same kernel runs.  The recorded run below times, on CUDA tensors
# with this notebook's method, the public call, the op called eagerly, the op inside a function
# compiled with `fullgraph=True`, and a copy of the same bytes.  The target, set by the issue
# that asked for the op: the compiled op's `vs public` (its median over the public call's) at
# most `1.03`.

# %%
torch_record = lessons.recorded("torch_ops")
if torch_record is not None:
    print(lessons.provenance(torch_record))
    print(bench.format_rows(torch_record["rows"], "torch_ops"))

# %% [markdown]
# ## 8. A time without a GPU: a prediction, and its stated error
#
# Without a GPU nothing can be timed: a simulated launch times Python threads.  What a
# machine without a GPU *can* know is the code and the launch.  `verdict.time()` on the
# simulator finds the launches the GPU timing would make (a launch step's function is run with
# every [`kernel[grid, block]`](00_rope_in_one_notebook.ipynb#9-glossary) recorded, not executed), compiles each kernel's PTX for the H200
# (no GPU needed; [nvJitLink](00_rope_in_one_notebook.ipynb#9-glossary) reports its registers) and reads from it what sets a time:
#
# * how many memory latencies a thread waits for in series (a load whose address needs an
#   earlier load's value, a load the compiler cannot move above a store, a loop's passes), and
#   how many loads it has in flight before the first wait;
# * the lanes' strides, hence the 32-byte sectors and 128-byte lines each access touches (a
#   float per lane moves one sector run and one line; a row per thread, a line per lane), and
#   how much of a loop's reading comes back from lines an earlier pass fetched;
# * the instructions by kind: special functions (sin, cos, pow), integer division, [shuffles](00_rope_in_one_notebook.ipynb#9-glossary),
#   [shared memory](00_rope_in_one_notebook.ipynb#9-glossary), [barriers](00_rope_in_one_notebook.ipynb#9-glossary), atomics;
# * the launch: blocks, threads per block, how many fit on an SM (threads, registers, shared
#   memory), and so how many waves fill the 132 SMs.
#
# It also runs the launch's first block on the simulator and counts the source lines each
# thread runs: that sees a loop whose trip count depends on the data (a carry loop, a search),
# which the PTX holds once whatever it costs.
#
# `ropelab.grader.predict` turns those into seven ceilings, each a physical limit (the DRAM's
# bandwidth, the L2's for the sectors asked for, the [L1](00_rope_in_one_notebook.ipynb#9-glossary)'s one line a cycle, waves times a
# warp's lifetime of latencies, a cost per block started, the schedulers' issue rate for the
# PTX's instructions and for the simulated lines), and predicts a launch fixed time plus a
# smooth maximum of the seven.  A handful of constants are fitted on {{ predict.rows }}
# H200 timings: {{ predict.sources }}.  The figure that matters is how the model does on
# kernels it never saw, so each of the {{ predict.families }} families (a step's kernels, or one
# recorded kernel at every size) is predicted by a fit made without it.

# %%
from ropelab.lessons import prediction
from ropelab.grader import predict

predict_record = predict.recorded_fit()
print(prediction.validation_table(predict_record))

# %%
prediction.plot_prediction_errors(predict_record)
plt.show()

# %% [markdown]
# On families left out of the fit the model's mean error is {{ predict.model_mean_pct }} and
# its worst {{ predict.model_max_pct }}; the trivial model, "a fixed fraction of the copy of the
# same bytes", does {{ predict.trivial_mean_pct }} and {{ predict.trivial_max_pct }}.  The
# family it misses most is {{ predict.worst_family }}; the trivial model does better on
# {{ predict.worse_count }} ({{ predict.worse_than_trivial }}).  Every prediction is
# printed with the range that held the middle four fifths of these held-out rows: the measured time
# lay within {{ predict.interval }} of the prediction.  That range is the model's honest
# error, and it is wider than the spread of repeated timings: a prediction says where a kernel
# stands against the copy, not what it measures.
#
# Families left out one at a time are still ropelab's own kernels.  The test that counts is
# kernels written by people who never saw the solutions, timed on the H200 and never fitted
# on.  Since set D, every prediction of a set is written down (`predicted-*.tsv`) before the
# set's first GPU run, so that nothing seen in its timings can steer it.  On set A
# (`data/heldout/set_a`, timed before that rule, never fitted on) the model's error is
# {{ predict.heldout_a }}.
#
# The model got here by failing such checks.  Set D, checked blind, gave
# {{ predict.blind_d }}; its worst misses were a thread walking its own row (each lane on a
# line of its own, which the L1 serves one a cycle) and a serial loop over a few cached
# values (each pass an L1 hit, not a DRAM round).  Both became features, set D joined the fit,
# and sets E and F, checked blind against that model, gave {{ predict.blind_e }} and
# {{ predict.blind_f }}.  Their worst misses were grid-stride loops on a handful of blocks
# whose pass takes one arm of an `if` (the counts held both arms, halving the passes) and
# blocks of 1024 threads (an SM holding two idles a block's place while its last warps
# finish).  Those became the model above, with set E in the fit; on set F it now does
# {{ predict.heldout_f_now }}, but set F shaped it, so that is no held-out figure.  Sets G
# and H (`data/heldout/set_g`, `data/heldout/heldout_h`) were written blind for the next
# check.  The only GPU lent when they ran was an H100, so the model they were written down
# for had its constants fitted on that run's own training kernels; it gave
# {{ predict.h100_g_v3 }} on G and {{ predict.h100_h_v3 }} on H.  Their worst misses were
# loops whose trip count depends on the data: a carry loop that runs thousands of times per
# thread, a binary search.  Counting the simulated lines became the seventh ceiling, and the
# same fits then give {{ predict.h100_g_v4 }} and {{ predict.h100_h_v4 }}; but G and H shaped
# it.  Set I (`data/heldout/set_i`) was written blind for the next check, with every
# prediction written down first.  Its first run was on an H100 again, and by that run's fit it
# gave {{ predict.h100_i_v4 }}: the mean meets the course's target for the model, the worst
# does not.  Its worst misses are kernels that run near the copy's speed, predicted far too
# slow where the `issue` ceiling binds, which no training kernel's time ever does: grid-stride
# loops and precise `sin`, `cos` and `pow` (a kernel compiled without `fastmath`).  Each
# inlines [libdevice](00_rope_in_one_notebook.ipynb#9-glossary)'s routine with its rarely taken branch (huge arguments, special values),
# and [LLVM](00_rope_in_one_notebook.ipynb#9-glossary) lays that branch out after the kernel's exit, with a jump back to where it
# rejoins.  The analysis took every branch to an earlier label for a loop, so the cold code
# was counted as the kernel's loop, once per pass.  Now a loop must close a cycle; by that
# model, fitted the same way, set I gives {{ predict.h100_i_v5 }}, but set I shaped it.
# Set J (`data/heldout/set_j`), a sixth learner's, registered and then timed the same way,
# gave {{ predict.h100_j_v4 }}; its worst is a ragged-batch launch (10.4) whose host
# copies the model charges in full.
#
# One family was worse than the trivial model in six sets: the pair swap of the on-ramp
# (ramp.8), whose `if` sends the even lane of a pair one way and the odd lane the other,
# predicted about a fifth too fast every time.  A warp whose lanes disagree on a branch runs
# both arms, one after the other: the odd lanes' load waits for the even lanes' arm, two memory
# latencies where the count had one.  The analysis now runs one warp's integer arithmetic lane
# by lane to see which branches split a warp (`ropelab/grader/predict/diverge.py`), chains
# those arms, and counts a warp's traffic and instructions along the arms it runs (both where
# its lanes split, one where it goes one way together); and it leaves out libdevice's
# huge-argument path of `sin` and `cos`, which no angle of a timing case takes.  And where one
# thread loops while its warp-mates wait, the warp's chain of dependent instructions and that
# thread's extra lines are one loop, paid once (the longer of the two), not twice.  By that
# model the same H100 fits give {{ predict.h100_g_v7 }} on G, {{ predict.h100_h_v7 }} on H,
# {{ predict.h100_i_v7 }} on I and {{ predict.h100_j_v7 }} on J; all four shaped it, so none is
# a held-out figure.
#
# Set K (`data/heldout/set_k`), a seventh learner's, was written after set I's misses were
# traced, and its predictions were written down by v4, v5, v6 and v7, each before its one GPU
# run (an H100 again; the constants fitted on that run's training kernels).  It gives
# {{ predict.h100_k_v7 }} by v7, {{ predict.h100_k_v6 }} by v6, {{ predict.h100_k_v5 }} by v5
# and {{ predict.h100_k_v4 }} by v4.  The fixes of v5 and v6 carried over to kernels they never
# saw; v7's did not move set K.  The mean meets the course's target for the model; the worst
# does not.  Its worst is a
# grid-stride loop on eight blocks of 64 threads, thousands of passes each, whose body reads
# `x` again after writing `out` (the compiler must assume they overlap).  The model counts two
# memory latencies a pass, the loads and then that re-read; the run's time over its passes is
# about one [latency](00_rope_in_one_notebook.ipynb#9-glossary) of that run's fit, so the
# re-read must be finding its line in a cache.
#
# One thread looping while the rest of its block waits was the next miss, in every set: the
# model paid each extra line the same wait, fitted between loops that could not agree.  A
# loop over shared memory waits a few tens of cycles a line; one over global memory waits
# for its loads, longer where the launch fills the machine and they queue behind everyone
# else's; and where 32 blocks an SM each have a thread looping, those threads take turns at
# the SM's four schedulers.  v8 prices a line each of those ways (`model.serial_line_us`);
# the same H100 fits give {{ predict.h100_g_v8 }} on G, {{ predict.h100_h_v8 }} on H,
# {{ predict.h100_i_v8 }} on I, {{ predict.h100_j_v8 }} on J and {{ predict.h100_k_v8 }} on
# K.  Set K's misses were in view when v8 was written, so after its v4 to v7 figures none of
# these is a held-out figure any more.  What the model still misses: the re-read above, and
# the host copies of a ragged-batch launch (10.4).  Those are noise more than model: two
# learners' launch functions of the same shape, one copy each, took times nearly a factor of
# two apart in two runs of the same day on the same kind of GPU
# (`data/predict/h100/timings-set_j-*.csv`, `timings-set_k-*.csv`), and a Python loop of some
# three thousand lines building the positions is no slower than NumPy's one call in the same
# run: its time hides behind the GPU's own work before the timer starts.
#
# v9 counts those lines in more than the first block.  Set M's learner found each thread's
# token by subtracting whole rows until the rest was smaller than a row: a loop that runs once
# per earlier token, nothing in the first block and thousands of times in the last.  The
# prediction had run the first block only, and put those kernels at a few hundredths of their
# time; it now runs the first, the middle and the last block (`learner.sample_blocks`) and
# comes within a sixth of it.
# Two more learners then wrote sets N and O, after v9 and without seeing any set, each of
# whose predictions was registered before its one GPU run: {{ predict.h100_n_v9 }} on N and,
# on O, kept outside the project, {{ predict.h100_o_v9 }}.  The host copies of 10.4 were
# timed apart on that run (`scripts/gpu_host_copy_probe.py`): {{ predict.host_copy_10_4 }}.
# Nearly all of a 10.4 launch function's time is that one synchronous copy, and what it
# costs depends on what the GPU is doing when it is asked.
#
# `python -m ropelab.grader.predict --record` refits the model and rewrites the record from the
# timings it names; `scripts/gpu_predict_timings.sh` is the H200 run behind them.

# %% [markdown]
# ## Takeaways
#
# * Convert every time into a bandwidth and compare it with the memory's: a kernel faster
#   than DRAM is reading a cache.
# * Evict the L2 before each timed launch, and time with events on a GPU kept busy, or the
#   numbers describe the cache and the host.
# * Know your launcher: tens of microseconds per Numba launch, a few for CuPy and PyTorch.
#   Amortize it (CUDA graphs, fewer launches) in production; exclude it when you compare
#   kernels, and record the host's enqueue time to prove you did.
# * Time two copies of the same bytes and check that they agree: this course's own first run
#   had a "copy" ten times slower than a kernel, and the copy was what was wrong.
# * Judge a kernel against the fastest copy of the same bytes, on a shape large enough for the
#   copy to reach the roof, and distrust any measurement that beats that roof.
# * Know the noise before you rank: the same code moves by several percent between runs on
#   small shapes and by a fraction of a percent on the 1 GB shape.
# * Check a claim about instructions in the compiler's output, not in the source: `__sincosf`
#   is two SFU instructions, and a compiler may already share what a rewrite shares by hand.
# * Inside PyTorch, wrap a kernel in a custom op: `torch.compile` keeps it as one node of one
#   graph, and its backward is whatever kernel you register (for RoPE, the inverse rotation).
# * Without a GPU, a time can be predicted from the census, but only with its error beside
#   it, judged on kernels the model never saw, and against the trivial model it must beat.
#
# ## Exercises
#
# **1.** The seed's 8192 x 1024 row took {{ seed.f32_8192x1024_ms }}.  What bandwidth does that imply, in GB/s?

# %%
answer_1 = 2 * 8192 * 1024 * 4 / 0.01866e-3 / 1e9  # your answer here

# %%
assert abs(answer_1 - bench.gbps(2 * 8192 * 1024 * 4, 18.66)) < 1
print(f"exercise 1: correct, {answer_1:,.0f} GB/s, {answer_1 / DRAM_4090_GBPS:.1f}x the 4090's DRAM")

# %% [markdown]
# **2.** From the recorded launch overhead, about how many empty Numba kernels can one Python
# thread launch per second?  (Within 5 percent.)

# %%
empty_us = next(r["us_per_launch"] for r in overhead["rows"] if r["launcher"] == "numba empty kernel")
answer_2 = 1e6 / empty_us  # your answer here

# %%
assert abs(answer_2 * empty_us / 1e6 - 1) < 0.05
print(f"exercise 2: correct, about {answer_2:,.0f} launches per second")

# %% [markdown]
# **3.** At the roof of this run, how long must a RoPE kernel take on the 1 GB shape
# (32768 x 4096 float32: x read, out written, positions read)?

# %%
roof = lessons.roof_gbps(bench_record)
answer_3 = bench.rope_bytes(32768, 4096) / (roof * 1e3)  # your answer here, in us

# %%
best = min(r["median_us"] for r in bench_record["rows"] if r["shape"] == "32768x4096")
assert answer_3 <= best * 1.001
print(f"exercise 3: correct, at least {answer_3:.0f} us; the fastest row took {best:.0f} us")

# %% [markdown]
# **4.** Compute the gradient of section 7's `loss` with respect to `x` yourself, with one call
# of `rt.rope` and no autograd.  It must equal `x.grad` bit for bit.

# %%
answer_4 = (rt.rope(g, variant="pair_sincos", interleave=False, positions=positions, inverse=True)
            if torch is not None else None)  # your answer here

# %%
assert torch is None or torch.equal(answer_4, x.grad)
print("exercise 4: correct, the backward pass is one inverse-rotation launch")

# %% [markdown]
# **5. Your own kernel, timed or predicted.**  Paste your `my_rope_pack4_scalar` from notebook
# 03 into the next cell (it loads the solution until you do).  On a GPU, `verdict.time()`
# times it against a copy of the same bytes; without one it prints the predicted H200 time
# with its error bar.  The cell after it takes the prediction apart: each ceiling of your
# launch in microseconds (memory, L2, [latency](00_rope_in_one_notebook.ipynb#9-glossary), blocks, issue).  Which one sets your kernel's
# time?  Set `answer_5` to its name.

# %%
from ropelab.grader import steps, verify

exercise_03 = steps.get("03.4")
# Your kernel from notebook 03: paste its definition, decorator and all, in place of the
# next line, which loads the solution (notebooks/solutions/03_pack4.py).
solution_03 = verify.load_solution(verify.solution_path(exercise_03))
my_rope_pack4_scalar = solution_03.my_rope_pack4_scalar
verdict = steps.check(my_rope_pack4_scalar, exercise_03.id)

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU: your kernel and a device copy of the same bytes, cold, median of 20.  Without one:
# the predicted H200 time and its error bar.
verdict.time()

# %%
why = predict.explain_step(exercise_03, my_rope_pack4_scalar)
(launch,) = why["launches"]
f = launch["features"]
print(f"{why['case']}, {why['bytes_moved'] / 1e6:.0f} MB moved: predicted H200 time "
      f"{predict.figure(why)}; a copy of the same bytes {why['copy_us']:.1f} us")
print(f"{int(f['blocks'])} blocks of {int(f['threads_per_block'])} threads, "
      f"{f['resident_warps']:.0f} warps resident per SM, {f['waves']:.1f} waves; "
      f"{f['rounds']:.0f} memory latencies in series per thread")
for name, us in launch["roofs"].items():
    print(f"  {name:<8} {us:7.1f} us")

# %%
answer_5 = max(launch["roofs"], key=launch["roofs"].get)  # your answer: the ceiling's name

# %%
assert answer_5 == launch["binding"], f"look again: {answer_5!r} is not the largest ceiling"
print(f"exercise 5: correct, {answer_5!r} sets the time of your launch")
