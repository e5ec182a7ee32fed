# %% [markdown]
# # 06 — Fused QK-RMSNorm + RoPE: a warp per head
#
# Several current models normalize every query and key head before rotating it ("QK-norm":
# Qwen3, and the diffusion transformers Flux, Qwen-Image and Z-Image).  Done as two kernels,
# the norm reads Q and K and writes them back, then RoPE reads and writes them again.  Fused,
# each head is read once and written once, in place.  SGLang ships such a kernel
# (`fused_qknorm_rope`); `ropelab` rebuilds it from the formulas, in Numba.
#
# New in this notebook:
#
# * a **[warp](00_rope_in_one_notebook.ipynb#9-glossary) per head**: 32 [lanes](00_rope_in_one_notebook.ipynb#9-glossary) share one head, each lane keeping `head_dim / 32`
#   consecutive elements in [registers](00_rope_in_one_notebook.ipynb#9-glossary);
# * a **[shuffle](00_rope_in_one_notebook.ipynb#9-glossary) reduction**: the [RMSNorm](00_rope_in_one_notebook.ipynb#9-glossary) needs the sum of squares of the whole head, which
#   the lanes combine by exchanging registers directly ([`shfl_xor_sync`](00_rope_in_one_notebook.ipynb#9-glossary)), with no shared
#   memory and no `syncthreads`;
# * **in place on a packed `qkv` buffer**, `[tokens, (Q heads + K heads + V heads) * head_dim]`,
#   the layout an attention layer's fused projection produces; V is never touched;
# * the **production shapes** of SGLang's benchmark, in [bfloat16](00_rope_in_one_notebook.ipynb#9-glossary) and float32;
# * a refinement the H200 asked for: **half a warp per head** with 128-bit word loads for
#   16-bit storage, what [Little's law](00_rope_in_one_notebook.ipynb#9-glossary) says about why (worked out with numbers), and what the
#   profiler says about the rest;
# * the **instruction diet** that followed, each step read off the [SASS](00_rope_in_one_notebook.ipynb#9-glossary) census and timed:
#   32-bit index arithmetic, the norm's scale folded into cos and sin, NeoX pairs held whole by
#   one lane, a select instead of a branch, and [blocks](00_rope_in_one_notebook.ipynb#9-glossary) filled with several tokens;
# * a **CUDA C++ twin** of the same algorithm, timed in the same run;
# * a **long-context path**: a float32 cos/sin cache, and its precision by position.
#
# The notebook follows the kernel in the order one would build it: the norm and its warp
# reduction, the rotation, 16-bit words, and the mapping that brings it to the copy, each step
# with its measurement from the records (census, bench runs, controlled rows, profile).  The
# runs that led there, one by one with their times of day, are kept in `data/history/README.md`.

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

from ropelab import lessons, shapes
from ropelab.ops import fused
from ropelab import check as ropelab_check
from ropelab.measure import census as ptx
from ropelab.kernels import fused_qknorm_rope as fused_kernel
from ropelab.measure import profile as ncu

print(ropelab.format_description())

# %% [markdown]
# ## What it computes
#
# For every token and every Q and K head $x \in \mathbb{R}^{d}$:
#
# $$y = \operatorname{RoPE}_{m}\!\left( \frac{x}{\sqrt{\tfrac1d \sum_i x_i^2 + \varepsilon}} \odot w \right),$$
#
# with one weight vector $w$ shared by all Q heads and another by all K heads, and $m$ the
# token's position.  The float64 reference is `ropelab.reference.fused_qknorm_rope`.
#
# ## The kernel
#
# One kernel is generated per head size, layout, storage dtype and mapping, because the number
# of elements a lane keeps in registers must be a compile-time constant.  The factory
# `make_kernel` fixes those constants (`E` elements per lane, `SLOTS`, `INTERLEAVE`, `PACKED`,
# `VEC4`, `CACHE`, ...) in Python, and the code it returns reads them as plain names: Numba
# compiles them in, and a branch on one of them disappears from the builds where it is false.
# The source file therefore holds the branches of every build, several hundred lines of them;
# `lessons.excerpt(fused_kernel, "fused_kernel")` prints it all.
#
# This notebook starts with one build: heads of 128 bfloat16 values, GPT-J pairs, every dim
# rotated, one head per warp, `qkv` read as 32-bit words of two bfloat16 each.
# `lessons.specialised` prints the kernel's body as that build compiles it, read from the same
# file: the branches the build does not take removed, and the constants it reads listed with
# their values (`tests/test_specialise.py` compiles this text and checks that it gives the
# package kernel's [PTX](00_rope_in_one_notebook.ipynb#9-glossary), instruction for instruction).  The body is what the two entry points
# (with and without a cos/sin cache) call:

# %%
one_head = fused_kernel.make_kernel(128, True, "bfloat16", heads_per_warp=1, full_rotary=True)
print(lessons.specialised(one_head, "fused_kernel"))

# %% [markdown]
# Against the full source, every build's branches in one text (`print(full)` shows it):

# %%
full = lessons.excerpt(fused_kernel, "fused_kernel")
shown = lessons.specialised(one_head, "fused_kernel")
print(f"every build's source: {len(full.splitlines())} lines; this build's: "
      f"{len(shown.splitlines())}, its header included")

# %% [markdown]
# Reading it top to bottom:
#
# 1. **Which head.**  The [grid](00_rope_in_one_notebook.ipynb#9-glossary) is two-dimensional: `blockIdx.x` (with `threadIdx.y`, when a
#    block holds several tokens) is the token, and `blockIdx.y` with the warp number inside
#    the block selects the warp.  A warp owns `heads_per_warp` consecutive heads starting at
#    `head0 = warp * heads_per_warp`; with one head per warp, the mapping this notebook starts
#    with, the warp number *is* the head.  No division.  Index arithmetic is 32-bit: Numba
#    widens `uint32 + uint32` to 64 bits, so every step is cast back with `uint32(...)`.
# 2. **Load.**  Lane `l` reads elements `l*E .. l*E + E-1` of its head (`E = head_dim / 32 =
#    4`): `WORDS = 2` words of two bfloat16 each, unpacked to float32 into a small local array
#    that the compiler keeps in registers, summing their squares.  The loop over `ROUNDS`
#    (here 1) is for builds with several heads per warp: a lane issues the loads of all its
#    heads first (phase 1), then does steps 3 to 6 for each head in turn.
# 3. **Reduce.**  Five `shfl_xor_sync` steps (16, 8, 4, 2, 1): at each one, every lane adds
#    the running sum of the lane whose number differs in one bit.  After five steps every
#    lane holds the sum over all 32 lanes.
# 4. **Normalize**: one reciprocal square root; the weight multiplies each element.
# 5. **Rotate.**  Interleaved pairs `(2k, 2k+1)` never straddle two lanes (`E` is even), so a
#    lane rotates its own pairs, one sine and cosine per pair, computed once per lane (by the
#    device function `lane_cos_sin`, printed below) and shared by all its heads.  Every dim rotates in this build, so the norm's scale rides on
#    cos and sin (`c = cs[j] * rot`): two multiplies per pair instead of one per element.
# 6. **Store** back where the values came from, two floats rounded and packed into each word
#    (`pack2`).  `dest` is `qkv` itself here; the out-of-place build, which autograd's forward
#    uses (`ropelab.fused_qknorm_rope(qkv, out=out)`), passes `out` and gives the V heads warps
#    of their own that copy them, so each byte is read once and written once.
#
# Other builds take other branches of the same file: half-split (NeoX) pairs held whole by one
# lane in 16-bit storage (the lane takes `E/2` elements of each half, *split*); partial rotary
# and float32 NeoX, where one `shfl_sync` per element fetches the partner from another lane
# and every pair is tested against `n_pairs`; float32 in 128-bit `float4` accesses; the cos/sin
# cache.  Half a warp per head, the 16-bit default, is shown as built further down.
#
# Step 5's cosines and sines, as this build computes them (the serving kernel of notebook 10
# calls the same device function):

# %%
print(lessons.specialised(one_head, "fused_cos_sin"))

# %% [markdown]
# Step 3, the device function `head_scale` that the kernel calls (the serving kernel of notebook
# 10 calls the same one):

# %%
print(lessons.specialised(one_head, "fused_butterfly"))

# %% [markdown]
# The same butterfly acted out by NumPy on 32 integers (exact, so the check is exact):

# %%
partial = np.arange(32) ** 2  # each lane's own sum of squares
lanes = np.arange(32)
state = partial.copy()
for offset in (16, 8, 4, 2, 1):
    state = state + state[lanes ^ offset]  # lane l adds the value held by lane l XOR offset
    print(f"after offset {offset:>2}: lane 0 holds {state[0]:>5}, distinct values across lanes: {len(set(state))}")
print("every lane holds the total:", bool((state == partial.sum()).all()))

# %% [markdown]
# The simulator has no warp shuffles; `ropelab.sim.warp` emulates them with one [barrier](00_rope_in_one_notebook.ipynb#9-glossary) per
# warp, so the same kernel runs here.
#
# ## The thread map
#
# One token of a small `qkv`: two Q heads, two K heads and one V head of 128 floats, with one
# head per warp (`heads_per_warp=1`, passed explicitly).  Each colour is one warp (one head),
# each number a lane (one [thread](00_rope_in_one_notebook.ipynb#9-glossary) of the warp), placed over the four elements it owns:

# %%
fmap = lessons.trace_fused(tokens=2, heads=(2, 2, 1), head_dim=128, heads_per_warp=1)
print(fmap.summary())
lessons.plot_fused_map(fmap, token=0)
plt.show()

# %% [markdown]
# A warp reads 32 lanes x 4 consecutive elements = one contiguous head: the loads of a warp
# cover one 256-byte (bfloat16) or 512-byte (float32) span.  The V head is grey: no [thread](00_rope_in_one_notebook.ipynb#9-glossary)
# writes it, which the correctness check below also verifies bit for bit.
#
# ## Correctness
#
# `ropelab.check.check_case` draws random heads with very different magnitudes, runs the
# kernel in place, and compares with the float64 reference under a tolerance that adds the
# norm's rounding, the rotation's (notebook 04) and the final rounding to the storage dtype
# (float32, [float16](00_rope_in_one_notebook.ipynb#9-glossary) or bfloat16).  It also checks that the V columns are bit-identical
# afterwards.  The last case rotates by [YaRN](00_rope_in_one_notebook.ipynb#9-glossary)'s frequencies, with its attention factor.

# %%
rng = np.random.default_rng(6)
checks = []
for storage in ("float32", "float16", "bfloat16"):
    for interleave in (True, False):
        checks.append(ropelab_check.check_case(rng, tokens=3, heads=(2, 2, 1), head_dim=64, rotary_dim=None,
                                       storage=storage, interleave=interleave, name="3 tok, 2+2+1"))
checks.append(ropelab_check.check_case(rng, tokens=2, heads=(2, 1, 1), head_dim=128, rotary_dim=64,
                               storage="bfloat16", interleave=False, name="partial"))
checks.append(ropelab_check.check_case(rng, tokens=2, heads=(1, 1, 1), head_dim=64, rotary_dim=None,
                               storage="float32", yarn=dict(factor=4.0, low=4.0, high=20.0,
                                                            attention_factor=1.1), name="yarn"))
for c in checks:
    print(f"{c.label:<13} {c.storage:<9} {c.options:<18} tolerance {c.tolerance:.1e}, "
          f"V unchanged {c.v_unchanged}: {'PASS' if c.passed else 'FAIL'}")

# %%
# NBVAL_IGNORE_OUTPUT
for c in checks:
    print(f"{c.label:<13} {c.storage:<9} {c.options:<18} max|error| {c.max_error:.2e} ({ropelab.TARGET})")

# %% [markdown]
# The public function validates everything before a kernel runs.  For example, the warp
# mapping needs `head_dim` to be a multiple of 64:

# %%
qkv = np.zeros((2, 3 * 96), dtype=np.float32)
w = np.ones(96, dtype=np.float32)
try:
    ropelab.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=96,
                              q_weight=w, k_weight=w, positions=np.arange(2, dtype=np.int32))
except ropelab.RopeInputError as err:
    print("RopeInputError:", err)

# %% [markdown]
# ## The production shapes
#
# SGLang benchmarks its kernel on diffusion transformers at 1024 x 1024 pixels: 4096 image
# tokens, 24 to 32 heads of 128.  The launch configuration `ropelab` picks for each with one
# head per warp (warps per block chosen to waste the fewest warps in the last block column),
# and the bytes the kernel must move (Q and K read and written once):

# %%
print(f"{'shape':<20} {'tokens':>6} {'Q+K+V heads':>12} {'rot':>4} {'grid':>11} {'block':>8}"
      f" {'MB bf16':>8} {'MB fp32':>8}")
for s in shapes.PRODUCTION_SHAPES.values():
    grid, block = fused_kernel.launch_config(s, heads_per_warp=1)
    heads = f"{s.heads_q}+{s.heads_k}+{s.heads_v}"
    print(f"{s.name:<20} {s.tokens:>6} {heads:>12} {s.rotary_dim:>4} {grid[0]:>6} x {grid[1]:<2}"
          f" {block[0]:>4} x {block[1]:<1} {s.qk_bytes(2) / 1e6:>8.1f} {s.qk_bytes(4) / 1e6:>8.1f}")

# %% [markdown]
# A block is `threads x tokens`: a row of warps for each of several tokens, so that every
# block has 8 warps (`zimage_1024` needs 60 warps a token here: rows of 4 warps, 2 tokens).
# Why that matters is measured below.

# %% [markdown]
# ## Census
#
# The production kernel (head 128, so `E = 4` elements and 2 interleaved pairs per lane),
# [fast-math](00_rope_in_one_notebook.ipynb#9-glossary) builds:

# %%
census = ptx.census()
print(f"{'kernel':<40} {'instr':>6} {'div/rem':>8} {'float64':>8}  special functions")
for r in census["rows"]:
    if r["variant"] == "fused_qknorm_rope" and r["fastmath"]:
        print(f"{r['kernel']:<40} {r['instructions']:>6} {r['int_divrem']:>8} {r['f64']:>8}  {r['sfu']}")

# %% [markdown]
# * No integer division (the 2-D grid) and no float64.
# * One `sqrt` for the norm per lane, and one `sin` and one `cos` per pair the lane holds: 2
#   with one head per warp (`E = 4`), 4 with half a warp per head (`E = 8`).  The split NeoX
#   builds (`_split`) hold both halves of their pairs and compute as many as GPT-J; the
#   NeoX build with partner shuffles (`neox_split=False`, the mapping of partial rotary and of
#   float32) computes them per element, twice as many.
# * These counts are per lane, for a whole head's worth of work shared by its lanes: the
#   shuffles replace a round trip through [shared memory](00_rope_in_one_notebook.ipynb#9-glossary).
# * The census covers each storage at its default mapping (for 16-bit storage: half a warp per
#   head, two heads per warp, 128-bit accesses; see below) in both layouts, the bfloat16 NeoX
#   build with partner shuffles, the bfloat16 kernel with one head per warp (the mapping drawn
#   above), and the cos/sin cache build.  `_full` marks builds for `rotary_dim == head_dim`.
#
# ## Timing on an H200, one head per warp
#
# The fused-only runs (`data/bench_fused/`) time the kernel's settings and controlled rows;
# the newest one that times them all is the *sweep* below.  These shapes move 100 to 270 MB,
# small enough that even a copy of their bytes stays below the run's fastest (1 GB) copy, so
# each row is compared with the device copy of *its own shape's* bytes (Q and K read and
# written), timed in the same run: the record's `frac_of_copy`.  Each row gives the median of
# many single launches and their [p20-p80](00_rope_in_one_notebook.ipynb#9-glossary) spread (from the 20th to the 80th percentile).  First,
# one head per warp:

# %%
fused_runs = lessons.recorded_runs("bench_fused")


def newest_with(variant, runs=fused_runs):
    """The newest run that timed ``variant`` (a later run may time fewer rows)."""
    return next((r for r in reversed(runs) if any(row["variant"] == variant for row in r["rows"])), None)


sweep = newest_with("fused_qknorm_rope:1token_blocks")
production = list(shapes.PRODUCTION_SHAPES)
if sweep is not None:
    print(lessons.provenance(sweep))
    print(lessons.copy_table(sweep, ["fused_qknorm_rope_1head"], shapes=production))

# %% [markdown]
# A fused kernel of this kind has no arithmetic reason to be slower than the copy: per
# element it does a handful of multiplies, and per pair one sine and cosine.  With one head per
# warp the float32 builds reach {{ fused.one_head_f32_pct }} of their copy.  The 16-bit builds do
# not: they move half the bytes but stay at {{ fused.one_head_16bit_pct }} of their copy.
#
# ## Little's law, and half a warp per head
#
# A memory system delivers its bandwidth only when enough bytes are in flight to cover its
# latency: bytes in flight = bandwidth x latency.  Worked out per [SM](00_rope_in_one_notebook.ipynb#9-glossary) for the recorded run:
#
# * **bandwidth per SM**: the device copy of the same bytes, timed in the same run, divided by
#   the GPU's SMs (from the record's metadata);
# * **latency**: an assumption, not a measurement.  [DRAM](00_rope_in_one_notebook.ipynb#9-glossary) latency under load on H100/H200-class
#   HBM is commonly quoted at roughly 600 to 800 ns; the cell takes both ends.

# %%
sms = sweep["meta"]["sm_count"] if sweep is not None else None
LATENCY_NS = (600, 800)  # assumed loaded DRAM latency, H100/H200 class (not measured here)
if sweep is not None:
    copy_gbps = lessons.bench_row(sweep, "copy_d2d", "flux_1024", "bfloat16")["gbps"]
    per_sm = copy_gbps / sms  # GB/s = bytes per ns
    need = [per_sm * t for t in LATENCY_NS]
    print(f"copy of flux_1024's bfloat16 bytes: {copy_gbps:.0f} GB/s over {sms} SMs = {per_sm:.1f} bytes per ns per SM")
    print(f"bytes in flight needed per SM at {LATENCY_NS[0]}-{LATENCY_NS[1]} ns: "
          f"{need[0] / 1024:.1f} to {need[1] / 1024:.1f} KiB")

# %% [markdown]
# What the kernel keeps in flight: each lane issues the loads of all its heads before any
# arithmetic, so a warp has `bytes per lane x 32` in flight, and an SM that many times its
# resident warps.  Bytes per lane follow from the kernel's mapping (`head_dim / lanes per
# head` elements of each head the lane's group handles); resident warps come from the
# profile's achieved [occupancy](00_rope_in_one_notebook.ipynb#9-glossary) (a share of the H200's 64 warp slots per SM).  The first line is
# the old 16-bit mapping, one head per warp on 32 lanes, for comparison:

# %%
prof = lessons.recorded("profile")
ITEM = {"float32": 4, "float16": 2, "bfloat16": 2}


def warp_bytes(storage, lanes_per_head, heads_per_warp, head_dim=128):
    per_lane = (head_dim // lanes_per_head) * ITEM[storage] * (heads_per_warp * lanes_per_head // 32)
    return per_lane, per_lane * 32


if prof is not None and sweep is not None:
    print(f"{'mapping':<34} {'B/lane':>6} {'B/warp':>6} {'warps/SM':>8} {'KiB in flight/SM':>16} {'of need':>11}")
    settings = [("bfloat16", 32, 1, "bfloat16 old: 1 head, 32 lanes")]
    settings += [(st, fused_kernel.LANES_PER_HEAD[st], fused_kernel.HEADS_PER_WARP[st],
                  f"{st} now: {fused_kernel.HEADS_PER_WARP[st]} head(s), {fused_kernel.LANES_PER_HEAD[st]} lanes")
                 for st in ("bfloat16", "float16", "float32")]
    for storage, lanes, hpw, label in settings:
        occ = next(r for r in prof["rows"]
                   if r["case"] == f"fused_qknorm_rope[{storage},gptj]@flux_1024")["achieved_occupancy_pct"]
        warps = 64 * occ / 100
        lane_b, warp_b = warp_bytes(storage, lanes, hpw)
        in_flight = warps * warp_b
        print(f"{label:<34} {lane_b:>6} {warp_b:>6} {warps:>8.0f} {in_flight / 1024:>16.1f} "
              f"{in_flight / need[1]:>5.1f}-{in_flight / need[0]:.1f}x")
    print("(warps/SM: achieved occupancy of today's kernel at flux_1024, also used for the old mapping)")

# %% [markdown]
# With one head per warp on 32 lanes, a 16-bit warp had only 256 bytes in flight (8 bytes per
# lane), and even a nearly full SM fell short of the bytes Little's law asks for: that is the
# ceiling the earlier bfloat16 runs sat under.  Half a warp per head, with each lane moving its
# 8 elements as one 128-bit word (`ld.global.v4.u32`), doubles the bytes per lane and per warp,
# and now every storage keeps more bytes in flight than the assumed latency needs, at either
# end of the range.  So latency hiding is no longer what limits the kernel; for bfloat16 the
# profile below shows what does.  (The old mapping's row uses today's occupancy, so it shows the
# direction, not an exact figure.)
#
# The same token as in the first thread map, traced with the 16-bit mapping (a float16 `qkv`;
# bfloat16 maps the same way): each colour is still one warp, and a warp now covers two
# neighbouring heads, sixteen lanes each, every lane 8 consecutive elements of each (one
# 128-bit word).  Two warps cover the four Q and K heads that took four warps above.

# %%
fmap2 = lessons.trace_fused(tokens=1, heads=(2, 2, 1), head_dim=128, heads_per_warp=2, storage="float16")
print(fmap2.summary())
lessons.plot_fused_map(fmap2, token=0)
plt.show()

# %% [markdown]
# The same kernel, as the 16-bit default builds it (bfloat16, GPT-J, every dim rotated, two
# heads per warp on 16-lane groups, 128-bit accesses): its load phase and its butterfly.  Each
# lane now moves its 8 elements with one `load_u32x4` (four 32-bit words, `ld.global.v4.u32`),
# and the butterfly stops one step early: an xor below 16 never leaves the half warp, so four
# steps (8, 4, 2, 1) sum a head's 16 lanes.

# %%
half_warp = fused_kernel.make_kernel(128, True, "bfloat16", vector_bytes=16, heads_per_warp=2,
                                     lanes_per_head=16, full_rotary=True)
print(lessons.specialised(half_warp, "fused_loads"))
print()
print(lessons.specialised(half_warp, "fused_butterfly"))

# %% [markdown]
# The sweep times every setting:

# %%
hpw_rows = ["fused_qknorm_rope_1head", "fused_qknorm_rope_2heads", "fused_qknorm_rope_4heads"]
if sweep is not None:
    print(lessons.copy_table(sweep, hpw_rows, shapes=production, dtypes=("bfloat16", "float16", "float32")))

# %%
if sweep is not None:
    for storage in ("bfloat16", "float16", "float32"):
        shares = [bench_row["frac_of_copy"] for bench_row in
                  (lessons.bench_row(sweep, v, "flux_1024", storage) for v in hpw_rows)]
        print(f"flux_1024 {storage:<9} of copy with 1 / 2 / 4 heads per warp: "
              + " / ".join(f"{100 * f:.1f}%" for f in shares))
print("default heads per warp by storage:", fused_kernel.HEADS_PER_WARP)

# %% [markdown]
# Are these differences real?  Within the run, the default row `fused_qknorm_rope` launches
# exactly the same float32 kernel as the explicit one-head row, timed separately: the largest
# gap between these twins is the smallest difference the run can resolve, its [noise floor](00_rope_in_one_notebook.ipynb#9-glossary).
# (The run before the sweep, below, timed the default and the twin again on the same kernel.)

# %%
twins = ("fused_qknorm_rope", "fused_qknorm_rope_1head")  # float32 default: one head per warp
if sweep is not None:
    print("the run", lessons.provenance(sweep))
    for storage in ("float32", "bfloat16"):
        print(lessons.noise_table(sweep, hpw_rows, twins, shapes=production, dtype=storage,
                                 same_dtype="float32"))

# %% [markdown]
# Which setting is fastest, per shape and storage, in the newest run:

# %%
if sweep is not None:
    for storage in ("bfloat16", "float16", "float32"):
        for shape in production:
            times = {v: lessons.bench_row(sweep, v, shape, storage)["median_us"] for v in hpw_rows}
            best = min(times, key=times.get)
            print(f"{storage:<9} {shape:<19} fastest {best:<25} (1 / 2 / 4 heads: "
                  + " / ".join(f"{times[v]:.1f}" for v in hpw_rows) + " us)")

# %% [markdown]
# For 16-bit storage, two heads per warp means half a warp per head with 128-bit words (one
# head per warp keeps the whole warp on one head, 8 bytes per lane), {{ fused.two_heads_gain_points }} of
# the copy better, and it is the default; four heads per warp (two per half warp, one after the
# other) keeps more bytes in flight but gives a few points back.  For float32, where one head
# per warp already moves 16 bytes per lane, one head per warp is fastest on {{ fused.f32_one_head_wins }}
# shapes, by {{ fused.f32_one_head_lead_pct }} (above this run's noise floor), and it stays the default.
#
# ## Against the copy and against CUDA C++
#
# The default, timed through the public `ropelab.fused_qknorm_rope` call the way a user calls
# it, in both layouts, against the copy of the same bytes and against the CUDA C++ twin of the
# fused kernel in `ropelab.measure.baselines`: the same algorithm and mapping written in C++
# (16-bit packing with the one-instruction `cvt.rn.*x2.f32` conversions, `__sincosf`), compiled
# by [NVRTC](00_rope_in_one_notebook.ipynb#9-glossary) with `--use_fast_math`, all in the same run.

# %%
latest = newest_with("cuda_fused")
LAYOUTS = (("gptj", "fused_qknorm_rope", "cuda_fused"), ("neox", "fused_qknorm_rope:neox", "cuda_fused_neox"))


def row_or_none(run, variant, shape, storage):
    try:
        return lessons.bench_row(run, variant, shape, storage)
    except KeyError:  # a row the run's time budget skipped
        return None


targets = [s for s in production if shapes.PRODUCTION_SHAPES[s].rotary_dim == shapes.PRODUCTION_SHAPES[s].head_dim]
if latest is not None:
    print(lessons.provenance(latest), "at", latest["meta"]["date"][11:16], "UTC")
    print(f"{'shape':<19} {'storage':<9} {'layout':<6} {'ropelab':>8} {'twin':>7} {'ropelab / twin':>15}")
    worst_share, worst_ratio = {}, 0.0
    for shape in production:
        for storage in ("bfloat16", "float16", "float32"):
            for layout, ours_name, twin_name in LAYOUTS:
                ours = row_or_none(latest, ours_name, shape, storage)
                twin = row_or_none(latest, twin_name, shape, storage)
                if ours is None:
                    continue
                twin_pct = f"{100 * twin['frac_of_copy']:>6.1f}%" if twin else f"{'-':>7}"
                ratio = ours["median_us"] / twin["median_us"] if twin else None
                print(f"{shape:<19} {storage:<9} {layout:<6} {100 * ours['frac_of_copy']:>7.1f}% {twin_pct} "
                      f"{f'{ratio:.3f}' if ratio else '-':>15}")
                if shape in targets:
                    key = "16-bit" if storage != "float32" else "float32"
                    worst_share[key] = min(worst_share.get(key, 1.0), ours["frac_of_copy"])
                    worst_ratio = max(worst_ratio, ratio or 0.0)
    print("(ropelab and twin: share of the same-run copy; ratio of times, above 1 = ropelab slower)")
    print(f"on {', '.join(targets)}: lowest share of the copy "
          + ", ".join(f"{k} {100 * v:.1f}%" for k, v in worst_share.items())
          + f"; ropelab at most {100 * (worst_ratio - 1):.1f}% slower than its twin")

# %% [markdown]
# On the three shapes whose heads rotate in full, every 16-bit row is well above nine tenths
# of its copy in both layouts, and ropelab is at most {{ fused.vs_twin_pct }} slower than its C++ twin: Numba's
# code generation, once told what to do, is not what limits this kernel.  `qwen_image_partial`
# rotates half of each head: GPT-J tests a pair before rotating it and keeps its speed, but its
# NeoX layout falls back to the partner shuffles (see the controlled rows below) and, in this
# run, trailed its twin by far more than the other rows.  The last step of the next section
# is the fix.
#
# ## What it took: issuing fewer instructions
#
# Half a warp per head gave the 16-bit builds enough bytes in flight.  What stood between them
# and the copy after that was instruction issue: the Nsight Compute profile of those builds
# (the older record below) shows their warps mostly [`not_selected`](00_rope_in_one_notebook.ipynb#9-glossary), ready to issue but waiting
# for the scheduler.  An [issue-bound](00_rope_in_one_notebook.ipynb#9-glossary) kernel gets faster by issuing less, and the SASS census,
# read beside the C++ twin's without a GPU, shows which instructions need not be there.  Four
# changes, each confirmed by a GPU run (the runs one by one, with their intermediate numbers,
# are kept in `data/history/README.md`):
#
# 1. **One instruction to pack two bfloat16.**  Rounding float32 to bfloat16 by integer
#    arithmetic (round to nearest even, by hand) costs several instructions per element.
#    Hopper has `cvt.rn.bf16x2.f32`, which rounds and packs two at once; `ropelab.bf16.pack2`
#    uses it.
# 2. **32-bit index arithmetic, and fewer multiplies.**  Numba widens `uint32 + uint32` to 64
#    bits, so every index step was a 64-bit pair of instructions (the [`.EX`](00_rope_in_one_notebook.ipynb#9-glossary) compares and
#    [`IADD3.X`](00_rope_in_one_notebook.ipynb#9-glossary) adds of the glossary); each step is now cast back to `uint32`.  The norm's scale
#    rides on `cos` and `sin` instead of multiplying every element; a lane loads its
#    frequencies with one 128-bit load; NeoX pairs are held whole by one lane; and a block
#    holds several tokens.
# 3. **A select instead of a branch.**  A head past the end (an odd head count) was skipped by
#    a branch, which the compiler wraps in a [divergence](00_rope_in_one_notebook.ipynb#9-glossary) barrier ([`BSSY`](00_rope_in_one_notebook.ipynb#9-glossary)/`BSYNC`), and each
#    head's address was computed twice, for the load and for the store.  Reading the last head
#    instead, and not storing it, removes both.
# 4. **Offsets in the address.**  For partial rotary, the index `uint32(pair0 + i)` of each
#    frequency load may wrap in 32 bits, so the compiler cannot fold `i` into the load's
#    constant offset and adds it with a 64-bit [`IADD3`](00_rope_in_one_notebook.ipynb#9-glossary)/`IADD3.X` pair per load.  Leaving that
#    sum as Numba widens it (it cannot wrap) lets the offset ride in the load.  Partial-rotary
#    NeoX before (the run beside the twin) and after (the newest run):

# %%
folded = newest_with("fused_qknorm_rope:neox")
for run in (latest, folded):
    if run is not None:
        cells = [row_or_none(run, "fused_qknorm_rope:neox", "qwen_image_partial", st) for st in ("bfloat16", "float16")]
        print(f"{run['meta']['date'][:16]}  qwen_image_partial NeoX, share of the copy: "
              + ", ".join(f"{st} {100 * c['frac_of_copy']:.1f}%" for st, c in zip(("bfloat16", "float16"), cells) if c))

# %% [markdown]
#
# The SASS instructions now, ropelab's builds next to the twin's, both compiled here without a
# GPU (`ropelab census --sass`; the twin through NVRTC, [nvJitLink](00_rope_in_one_notebook.ipynb#9-glossary) and [`nvdisasm`](00_rope_in_one_notebook.ipynb#9-glossary), the `sass`
# extra):

# %%
from ropelab.measure import baselines

PAIRS_OF_BUILDS = [  # (ropelab's build, the twin's instantiation)
    ("fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full", baselines.fused_twin_name("bfloat16", 128, True)),
    ("fused_qknorm_rope_d128_neox_bfloat16_v64_h2_g16_split_full", baselines.fused_twin_name("bfloat16", 128, False)),
    ("fused_qknorm_rope_d128_gptj_float16_v128_h2_g16_full", baselines.fused_twin_name("float16", 128, True)),
    ("fused_qknorm_rope_d128_gptj_float32_v128_full", baselines.fused_twin_name("float32", 128, True)),
]
sass = None
missing = ptx.sass_tools_missing()  # asked first: without nvdisasm nothing is compiled
if missing:
    print(f"The twin's SASS counts need {missing}")
else:
    try:
        twin_counts = baselines.twin_sass_counts([t for _, t in PAIRS_OF_BUILDS])
        sass = ptx.census(sass=True)
    except ptx.CensusError as exc:
        print(f"no SASS counts: {exc}")
if sass is not None:
    ours = {r["kernel"]: r for r in sass["rows"] if r["variant"] == "fused_qknorm_rope" and r["fastmath"]}
    print(f"{'ropelab build':<58} {'ropelab':>8} {'twin':>5}")
    for kernel, twin in PAIRS_OF_BUILDS:
        t = twin_counts.get(twin, {}).get("sass_instructions", "-")
        print(f"{kernel:<58} {ours[kernel].get('sass_instructions', '-'):>8} {t:>5}")

# %% [markdown]
# The profile before and after, Nsight Compute on the H200 (`data/profile/`, the oldest and the
# newest record; duration under the profiler's replay, not the bench's timing).  A stall is
# counted in [cycles/issue](00_rope_in_one_notebook.ipynb#9-glossary): [long_scoreboard](00_rope_in_one_notebook.ipynb#9-glossary) waits for a global load, [short_scoreboard](00_rope_in_one_notebook.ipynb#9-glossary) for an
# on-chip result, not_selected was ready but not picked.  The table after the summary adds
# `DRAM%` and [traffic](00_rope_in_one_notebook.ipynb#9-glossary) (the DRAM bytes over the minimum), [`sect/req`](00_rope_in_one_notebook.ipynb#9-glossary) (sectors per request) and
# [`XU%`](00_rope_in_one_notebook.ipynb#9-glossary) (the [SFUs](00_rope_in_one_notebook.ipynb#9-glossary)' pipe):

# %%
profiles = lessons.recorded_runs("profile")
for run in (profiles[0], profiles[-1]) if len(profiles) > 1 else profiles:
    print("the profile of", run["meta"]["date"][:16])
    for storage in ("bfloat16", "float16", "float32"):
        r = next(r for r in run["rows"] if r["case"] == f"fused_qknorm_rope[{storage},gptj]@flux_1024")
        print(f"  {storage:<9} flux_1024: issuing in {r['issue_active_pct']:.0f}% of cycles, top stalls "
              f"{r['stall_1']} {r['stall_1_cycles']:.1f} / {r['stall_2']} {r['stall_2_cycles']:.1f} cycles per "
              f"instruction, {r['registers']} registers, achieved occupancy {r['achieved_occupancy_pct']:.0f}%")

# %%
if prof is not None:
    print(ncu.profile_table(prof, r"^fused_qknorm_rope\[\w+,(gptj|neox)\]@(flux|qwen_image_1024|zimage)"))

# %% [markdown]
# * **Before**, bfloat16 warps were mostly `not_selected`: ready, but the scheduler issued
#   another warp's instruction in that cycle.  Issue-bound.
# * **Now** every storage waits first on memory (`long_scoreboard`: a load's data has not
#   arrived), the state a memory-bound kernel should be in, and the issue slots have room left.
#
# ## Two controlled rows: leave one thing out
#
# Each change above that is not a pure instruction count has a row in the sweep that undoes it
# alone, in the same run.  NeoX with the partner shuffles and per-element sin/cos
# (`neox_split=False`) against split pairs; and blocks of one token (`tokens_per_block=1`)
# against token rows, which matters where a token needs few warps: `zimage_1024`'s 60 heads
# are 30 warps at two heads a warp, so one token a block means blocks of 2 warps.

# %%
controls = [("NeoX pairs: shuffled vs split", "fused_qknorm_rope:neox_shuffle", "fused_qknorm_rope:neox"),
            ("blocks: 1 token vs token rows", "fused_qknorm_rope:1token_blocks", "fused_qknorm_rope")]
if sweep is not None:
    print(f"{'control':<31} {'shape':<16} {'storage':<9} {'without':>8} {'with':>7}")
    for label, without, with_ in controls:
        for shape in targets:
            for storage in ("bfloat16", "float16", "float32"):
                off = lessons.bench_row(sweep, without, shape, storage)
                on = lessons.bench_row(sweep, with_, shape, storage)
                print(f"{label:<31} {shape:<16} {storage:<9} {100 * off['frac_of_copy']:>7.1f}% "
                      f"{100 * on['frac_of_copy']:>6.1f}%")

# %% [markdown]
# * Split pairs are worth {{ fused.split_gain_points }} of the copy in 16-bit NeoX in this run; float32 NeoX,
#   which keeps the shuffles, does not need them (it is memory-bound either way).  The sweep
#   ran before step 4 above, which took the shuffle build itself to
#   {{ fused.partial_neox_folded_pct }} on the partial shape.
# * Token rows change nothing where a token fills 8 warps (flux and Qwen) and take
#   `zimage_1024` from {{ fused.zimage_one_token_pct }} to {{ fused.zimage_token_rows_pct }} of the copy in 16-bit storage: blocks of 2 warps cap an SM at its 32-block limit and spend their short
#   lives being launched and retired.
#
# %% [markdown]
# With split pairs, NeoX in 16-bit storage reaches {{ fused.neox_16bit_pct }} of the copy on the
# fully rotated shapes, level with GPT-J's {{ fused.gptj_16bit_pct }} in the same run: a lane
# holding both halves of its pairs computes as many sines and cosines as GPT-J and needs no
# partner shuffle.  With the shuffles, the 16-bit NeoX builds stayed at
# {{ fused.shuffle_16bit_pct }}: twice the sin/cos and one shuffle per element, issued on top of
# the same bytes by kernels with little issue headroom left.  float32 is memory-bound and
# reaches {{ fused.f32_pct }} in both layouts.
#
# ## The long-context path: a cos/sin cache
#
# With the default sin/cos path, every lane computes `sin` and `cos` of `position x frequency`
# in float32 with the fast-math intrinsics, whose error grows with the angle (notebook 04).
# `fused_qknorm_rope(..., cache=True, max_positions=N)` instead reads cosines and sines from a
# `[N, rotary_dim / 2]` float32 table built on the host in float64 (the YaRN-blended
# frequencies go into it too), the method of vLLM, FlashInfer and SGLang.  Its precision by
# position, measured on the H200 (`python -m ropelab.measure.fused_precision`, `data/precision/`):
# the worst relative error over Q and K in each bucket of positions, float32 storage, GPT-J:

# %%
from ropelab.measure import fused_precision, records

fprec = records.load("precision_fused", records.DATA_DIR / "precision")
print(lessons.provenance(fprec))
by_path = {}
for r in fprec["rows"]:
    if r["storage"] == "float32" and r["layout"] == "gptj" and r["yarn"] == "-" and r["fastmath"]:
        by_path.setdefault(r["path"], {})[(r["pos_lo"], r["pos_hi"])] = r["max_rel_err"]
print(f"{'positions':>17} {'cache':>10} {'sin/cos':>10}")
for lo, hi in sorted(by_path["cache"]):
    print(f"{lo:>8}-{hi:<8} {by_path['cache'][(lo, hi)]:>10.1e} {by_path['sincos'].get((lo, hi), float('nan')):>10.1e}")

# %% [markdown]
# The worst case of every recorded configuration (storages, layouts, YaRN, fast-math on and
# off):

# %%
for w in sorted(fused_precision.worst_by_case(fprec["rows"]),
                key=lambda w: (w["storage"], w["path"], w["layout"], w["yarn"], w["fastmath"])):
    print(f"{w['storage']:<9} {w['path']:<7} {w['layout']:<5} yarn {w['yarn']:<3} fastmath {str(w['fastmath']):<5} "
          f"worst relative error {w['max_rel_err']:.1e} at positions up to {w['at_pos_hi']}")

# %% [markdown]
# The cache's error stays flat at the float32 rounding level at every position, to the end
# of the range; the sin/cos path's error grows with the position by orders of magnitude.
# Turning fast-math off does not rescue the sin/cos path: the float32 product `position x
# frequency` is already coarse at long positions.  In bfloat16 storage the final rounding
# sets a floor for both paths; the cache stays at that floor, while the sin/cos path grows
# past it at long positions.
#
# Its speed: the cache path reads `rotary_dim / 2` cosines and sines per token, shared by all
# the token's heads, so the extra bytes are small next to Q and K.  The newest run that timed
# it, beside the sin/cos path of the same run:

# %%
cache_run = newest_with("fused_qknorm_rope:cache")
if cache_run is not None:
    print(lessons.provenance(cache_run), "at", cache_run["meta"]["date"][11:16], "UTC")
    print(f"{'shape':<19} {'storage':<9} {'sin/cos':>8} {'cache':>7} {'cache / sin/cos':>16}")
    for shape in production:
        for storage in ("bfloat16", "float16", "float32"):
            plain = row_or_none(cache_run, "fused_qknorm_rope", shape, storage)
            cached = row_or_none(cache_run, "fused_qknorm_rope:cache", shape, storage)
            if plain is None or cached is None:  # the run's time budget skipped it
                continue
            print(f"{shape:<19} {storage:<9} {100 * plain['frac_of_copy']:>7.1f}% {100 * cached['frac_of_copy']:>6.1f}% "
                  f"{cached['median_us'] / plain['median_us']:>16.3f}")

# %%
# NBVAL_IGNORE_OUTPUT
if ropelab.TARGET == "gpu":
    from ropelab.measure import bench as bench_module

    timer = bench_module.Timer(repeats=20)
    entries = bench_module.plan(["fused_qknorm_rope"], baselines=False)
    sized = [s for s in bench_module.shapes_for(["production"]) if s.label == "flux_1024"]
    print(bench_module.format_rows(bench_module.sweep(sized, entries, timer=timer, progress=False).rows))
else:
    print(lessons.live_bench(["fused_qknorm_rope"]))

# %% [markdown]
# ## Takeaways
#
# * Fusing two memory-bound passes halves the traffic; the kernel's job is then to stay near
#   the copy [roof](00_rope_in_one_notebook.ipynb#9-glossary) for the bytes that remain.
# * A warp per head keeps the head in registers; a five-step shuffle butterfly gives every
#   lane the head's sum of squares without shared memory or a block-wide barrier.
# * Count the bytes a warp keeps in flight (Little's law): a 16-bit head is only 256 bytes, so
#   16-bit storage runs half a warp per head with 128-bit words, two heads per warp.  Once the
#   bytes in flight suffice, the profiler names the next limit: here, instruction issue.
# * An issue-bound kernel gets faster by issuing less.  The SASS census, next to a C++ twin's,
#   shows the instructions that need not be there (64-bit index math, per-element multiplies
#   that can ride on cos and sin, a branch that can be a select), without a GPU; the GPU run
#   then confirms each step.
# * Keep blocks large enough: when one token needs few warps, give a block several tokens.
# * For long contexts, a float32 cos/sin cache keeps the error at the rounding level at every
#   position, where the sin/cos path's error grows with the position.
# * Before calling one setting faster, compare the difference with the noise: two timings of
#   the same kernel in one run.  For float32 heads per warp the differences are a few times
#   that noise, and small.
# * Shape each lane's share of data so that pairs never straddle lanes: interleaved pairs
#   are adjacent; half-split pairs are kept whole by giving a lane a run from each half.
#   When they must straddle (partial rotary here), fetch the partner with a shuffle.
# * In place on `qkv`: touch only Q and K, and test that V is bit-identical.

# %% [markdown]
# ## Build it yourself
#
# Five graded steps towards the fused kernel: the warp's sum of squares, a head too wide for
# one warp, norm then rotate, the fused head over packed `qkv` rows, and its launch.  Write
# each function in its cell and run the cell after it: the grader runs it on the simulator
# (ropelab emulates the warp shuffles there; every lane of a warp must reach each shuffle),
# compares every float with the float64 reference, and counts the PTX instructions of your
# kernel.  Solutions: `notebooks/solutions/06_fused_qknorm_rope.py`.
#
# ### Step 06.1: the shuffle butterfly
#
# Write a kernel that RMS-normalizes rows of 64 floats with one warp per row: lane `l` (the
# thread's number modulo 32) of warp `w` (the warp's number in the grid) holds floats `2l` and
# `2l + 1` of row `w` and adds their squares into `ss`.  Before the scale
# `1 / sqrt(ss / 64 + eps)` can be computed, **every** lane needs the sum of the whole row:
# that is the butterfly.  `cuda.shfl_xor_sync(FULL_MASK, value, m)` returns `value` as held by
# lane `lane ^ m`, so five steps with `m = 16, 8, 4, 2, 1`, each adding the partner's partial
# sum, leave the total in all 32 lanes.  Then each lane writes its two floats times the scale
# times their weights.  The grader runs 1 and 6 rows with 4 warps per block (so some warps
# have no row and must not touch memory: skip them with an `if` that is the same for all 32
# lanes of a warp, so that every lane still reaches every shuffle).

# %%
import math

from numba import cuda, float32

from ropelab.grader import steps

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part


@cuda.jit(fastmath=True)
def my_rms_norm_warp(x, out, weight, rows, eps):
    """RMSNorm of rows of 64 floats, one warp per row: lane l of warp w holds floats 2l and
    2l + 1 of row w, and out = x / sqrt(mean(x**2) + eps) * weight.

    x, out: float32[rows * 64]; weight: float32[64]; rows: int64; eps: float32 = 1e-6.
    Launched with ceil(rows / 4) blocks of 4 warps (128 threads).  The row's sum of squares
    reaches every lane through the shuffle butterfly.
    """
    pass

# %%
verdict = steps.check(my_rms_norm_warp, "06.1")

# %% [markdown]
# ### Step 06.2: a head of 256 floats, four warps
#
# A warp's shuffles reach its own 32 lanes only.  With two floats per thread, a row of 256
# floats needs 128 threads, four warps: each warp's butterfly ends with the sum of *its* 64
# floats, and the row's sum is the four together.  Warps meet in **shared memory**: lane 0 of
# warp `w` stores its warp's sum in `partial[w]` (a `cuda.shared.array(4, float32)`), the block
# waits at `cuda.syncthreads()` until all four are stored, and then every thread adds them.
# One block per row.  The grader watches the shared array: a sum read before the barrier is
# a [race](00_rope_in_one_notebook.ipynb#9-glossary), whatever numbers it happens to give on the simulator.

# %%
import math

from numba import cuda, float32

FULL_MASK = 0xFFFFFFFF


@cuda.jit(fastmath=True)
def rms_norm_256(x, out, weight, rows, eps):
    """RMSNorm of rows of 256 floats: one block of 128 threads per row, two floats a thread.

    x, out: float32[rows * 256]; weight: float32[256]; rows: int64; eps: float32 = 1e-6.
    Thread t of block r holds floats 2t and 2t + 1 of row r.  Launched with rows blocks of
    128 threads.
    """
    pass

# %%
verdict = steps.check(rms_norm_256, "06.2")

# %% [markdown]
# `verdict.show()` draws the function you just graded, passing or not, on a small shape: which
# thread wrote each float of `out`, which thread read each float of the input, your output
# beside the reference with wrong cells outlined, and the reads and writes of every thread.
# Call it after any step.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Step 06.3: norm, then rotate
#
# Back to one warp per head of 64 floats, lane `l` holding pair `l` (floats `2l`, `2l + 1`,
# interleaved).  Normalize as in step 06.1 (weights included), then rotate the lane's pair by
# `positions[row] * inv_freq[l]`: the fused kernel's order, RMSNorm first, RoPE second.  The
# order matters: the rotation keeps a pair's sum of squares, but the weights differ from float
# to float, so weighting rotated floats gives other numbers.

# %%
import math

from numba import cuda, float32

FULL_MASK = 0xFFFFFFFF


@cuda.jit(fastmath=True)
def rms_rope_head(x, out, weight, positions, inv_freq, rows, eps):
    """RMSNorm then RoPE of one 64-float head per warp (one head per token here).

    x, out: float32[rows * 64]; weight: float32[64]; positions: int32[rows]; inv_freq:
    float32[32]; rows: int64; eps: float32 = 1e-6.  Launched with ceil(rows / 4) blocks of 4
    warps (128 threads).
    """
    pass

# %%
verdict = steps.check(rms_rope_head, "06.3")

# %% [markdown]
# ### Step 06.4: the fused head
#
# The real input is a packed row per token, `[Q heads | K heads | V heads]`, 64 floats a head.
# Warp `w` takes head `w` of the whole buffer: its token is `w // heads_per_token` and its
# head within the token `head = w - token * heads_per_token`.  A Q head (`head < heads_q`) is
# normalized with `q_weight`, a K head (`head < heads_q + heads_k`) with `k_weight`, and both
# are rotated by the token's position; a V head is copied to `out` unchanged.  Every lane of a
# warp takes the same branch, so the shuffles stay [warp-uniform](00_rope_in_one_notebook.ipynb#9-glossary).

# %%
import math

from numba import cuda, float32, uint64

FULL_MASK = 0xFFFFFFFF


@cuda.jit(fastmath=True)
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    """QK-RMSNorm + RoPE over packed qkv rows, one warp per head, V copied.

    qkv, out: float32[tokens * heads_per_token * 64]; q_weight, k_weight: float32[64];
    positions: int32[tokens]; inv_freq: float32[32]; heads_q, heads_k, heads_per_token:
    uint64; total_warps: int64 = tokens * heads_per_token; eps: float32.  Launched with
    ceil(total_warps / 4) blocks of 4 warps (128 threads).
    """
    pass

# %%
verdict = steps.check(rope_fused_head, "06.4")

# %% [markdown]
# ### Step 06.5: the launch
#
# Write the host function that launches `rope_fused_head` (your step 06.4) with one warp per
# head of every token: `total_warps = tokens * (heads_q + heads_k + heads_v)`, a block of a
# few warps (32 threads each, at most 1024 threads), and enough blocks for every warp, none
# wholly idle.  The kernel wants `uint64` head counts, an int `total_warps` and a `float32`
# eps.  The grader's last case is one token of 40 heads of 64 floats (32 + 4 + 4), so one
# block for a token's heads, 1,280 threads, would be illegal.

# %%
from numba import float32, uint64


def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q, heads_k,
                 heads_v, eps):
    """Launch rope_fused_head over every head of every token.

    qkv, out, q_weight, k_weight, positions, inv_freq: device arrays; tokens, heads_q,
    heads_k, heads_v: int; eps: float.
    """
    pass

# %%
verdict = steps.check(launch_fused, "06.5")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing function is timed against a device copy of the same bytes.
verdict.time()
