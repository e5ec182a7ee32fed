# %% [markdown]
# # 10 — Serving: the paged KV-cache write, FP8, ragged batches
#
# Notebook 06 normalized and rotated Q and K in place.  A serving engine does one more thing
# with every token before attention: it stores the token's K and V in the *KV cache*, where
# every later decoding step reads them again.  `ropelab.fused_qknorm_rope_kv` does it all in one
# launch: the [RMSNorm](00_rope_in_one_notebook.ipynb#9-glossary) and the rotation, then K and V written at each token's place in a paged
# cache, optionally rounded to FP8.  This notebook teaches what that write is:
#
# * why the cache is paged, and what `slot_mapping` says;
# * a scatter write, and why it still moves whole [sectors](00_rope_in_one_notebook.ipynb#9-glossary) when neighbouring tokens land far
#   apart;
# * FP8 e4m3: its bits, how a float32 is rounded to it, and what the per-tensor scale does to
#   the error;
# * ragged batches: positions from each request's lengths, the prefix sum of the on-ramp.
#
# It ends with four graded steps that build the write piece by piece.

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

from ropelab import fp8, lessons, reference_kv
from ropelab.kernels import fused_qknorm_rope_kv as kv_kernel
from ropelab.lessons.primer import sectors_touched

print(ropelab.format_description())

# %% [markdown]
# ## Why the cache is paged
#
# A request's cache grows by one token per decoding step, and nobody knows in advance how long
# it will get.  Reserving one contiguous region per request for its longest possible length
# wastes most of it; reserving exactly what it holds means moving it every time it grows.  vLLM's
# answer (PagedAttention) is the operating system's: cut the cache into *blocks* of
# `block_size` tokens, hand a request a block whenever its last one is full, and keep, per
# request, a *block table*: its blocks, in order, wherever they sit in memory.  The waste is at
# most one partly filled block per request.  Three requests, counted in token rows:

# %%
block_size = 4
lengths = np.array([13, 3, 7])  # tokens each request holds now
longest = 32  # what a contiguous reservation must allow per request
paged_rows = int((-(-lengths // block_size)).sum() * block_size)
print(f"contiguous reservation: {len(lengths) * longest} rows for {lengths.sum()} tokens")
print(f"paged, blocks of {block_size}: {paged_rows} rows for {lengths.sum()} tokens")

# %% [markdown]
# The blocks a request gets need not be neighbours, nor in order.  Drawn below: the block table
# of each request (left) and where its tokens land in the cache's blocks (right).

# %%
tables = [[5, 1, 8, 3], [0], [6, 2]]
fig, (ax_t, ax_c) = plt.subplots(1, 2, figsize=(11, 2.8), gridspec_kw={"width_ratios": [1, 2.2]})
colours = ["#4a6fa5", "#c0504d", "#9bbb59"]
for r, table in enumerate(tables):
    for j, blk in enumerate(table):
        ax_t.add_patch(plt.Rectangle((j, -r), 0.9, 0.9, color=colours[r], alpha=0.8))
        ax_t.text(j + 0.45, -r + 0.45, str(blk), ha="center", va="center", color="white")
    ax_t.text(-0.2, -r + 0.45, f"request {r}", ha="right", va="center", fontsize=9)
ax_t.set_xlim(-1.6, 4.2)
ax_t.set_ylim(-2.2, 1.1)
ax_t.set_title("block tables", fontsize=10)
ax_t.axis("off")
cache_owner = np.full((9, block_size), -1)
for r, (table, n) in enumerate(zip(tables, lengths)):
    for p in range(n):
        cache_owner[table[p // block_size], p % block_size] = r
for blk in range(9):
    for off in range(block_size):
        r = cache_owner[blk, off]
        ax_c.add_patch(plt.Rectangle((blk * (block_size + 0.5) + off, 0), 0.9, 0.9,
                                     color=colours[r] if r >= 0 else "#dddddd"))
    ax_c.text(blk * (block_size + 0.5) + block_size / 2, -0.4, f"block {blk}", ha="center",
              fontsize=8)
ax_c.set_xlim(-0.5, 9 * (block_size + 0.5))
ax_c.set_ylim(-0.8, 1.2)
ax_c.set_title("the cache: a slot per token row (grey: free)", fontsize=10)
ax_c.axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## `slot_mapping`: where each token goes
#
# The kernel that writes K and V does not read block tables.  The engine flattens them into one
# number per token of the batch, its *slot*: token `p` of a request sits in block
# `table[p // block_size]` at offset `p % block_size`, so
#
# $$\text{slot} = \text{block} \times \text{block\_size} + \text{offset}.$$
#
# vLLM's cache layout (the flash layout) is `[num_blocks, block_size, num_kv_heads, head_dim]`.
# Seen as `[num_blocks * block_size, num_kv_heads * head_dim]` it is one row per slot, so the
# slot *is* the row: the block size never enters the kernel's address arithmetic.  A negative
# slot means "write nothing": engines pad a batch to a fixed size (a CUDA graph is replayed for
# a fixed shape), and the padding tokens get slot -1.  `ropelab.reference_kv.slots_for` computes
# the slots of a prefill (positions `0 .. n - 1`); one padding token added at the end:

# %%
positions, slots = reference_kv.slots_for([3, 5], block_size, [[2, 7], [4, 0]])
slots = np.append(slots, -1)
print("positions:   ", positions.tolist())
print("slot_mapping:", slots.tolist())

# %% [markdown]
# Writing K into the cache is then a *scatter*: row `t` of K goes to row `slot_mapping[t]` of
# the cache, rows whose slot is negative go nowhere, and every other row of the cache keeps what
# it held (other requests' tokens).  In NumPy:

# %%
heads, head_dim = 2, 4
k = np.arange(len(slots) * heads * head_dim, dtype=np.float32).reshape(len(slots), -1)
k_cache = np.zeros((8, block_size, heads, head_dim), np.float32)
rows = k_cache.reshape(-1, heads * head_dim)  # a view: a row per slot
keep = slots >= 0
rows[slots[keep]] = k[keep]
print("cache rows written:", sorted(slots[keep].tolist()))
print("slot 0 holds token 7's row (request 1, position 4):", np.array_equal(rows[0], k[7]))

# %% [markdown]
# ## Coalescing when neighbouring tokens land in different blocks
#
# Consecutive tokens of a request are consecutive slots only inside a block: token 3 of the
# second request above sits in block 4 and token 4 in block 0.  Does a scatter lose the
# [coalescing](00_rope_in_one_notebook.ipynb#9-glossary) of notebook 01?  It depends on which way the [threads](00_rope_in_one_notebook.ipynb#9-glossary) are laid over the data.  A
# [warp](00_rope_in_one_notebook.ipynb#9-glossary)'s store is served in 32-byte *sectors*.  Two mappings, counted for one store
# instruction of one warp, float32, a cache row of 8 heads of 128 (4 KiB):
#
# * **[lanes](00_rope_in_one_notebook.ipynb#9-glossary) along a row**: lane `l` writes float `l` of one token's row.  The 32 lanes cover
#   128 contiguous bytes of that row, wherever the row is: 4 sectors, the least possible.
# * **lanes along tokens**: lane `l` writes float `c` of token `l`'s row.  The 32 addresses are a
#   row apart, in blocks anywhere: 32 sectors for 128 useful bytes.

# %%
row_floats = 8 * 128
print("lanes along a row: ", sectors_touched(1), "sectors")
print("lanes along tokens:", sectors_touched(row_floats), "sectors (rows in order)")
scattered_rows = np.random.default_rng(10).permutation(256)[:32] * row_floats
print("lanes along tokens, slots scattered:",
      len(np.unique(scattered_rows * 4 // 32)), "sectors")

# %% [markdown]
# So the serving kernel lays its lanes along each head (a group of lanes per head, as in
# notebook 06), and a token's K and V are written as whole runs of its row.  Where the slot
# points matters only between tokens, and every token's write is as coalesced as a copy's.

# %% [markdown]
# ## The kernel
#
# `ropelab.fused_qknorm_rope_kv` runs the fused kernel of notebook 06 and changes where the
# results go.  Printed for the build the course shows ([bfloat16](00_rope_in_one_notebook.ipynb#9-glossary) storage, heads of 128,
# interleaved pairs, half a warp per head, an FP8 cache): first how a warp reads its token's
# slot (`lessons.excerpt(kv_kernel.kernel, "kv_kernel")` prints every build's whole kernel):

# %%
kv_build = kv_kernel.KERNEL
print(lessons.specialised(kv_build, "kv_slot"))

# %% [markdown]
# The V warps (a token's warps are its Q and K warps, then its V warps, so the branch is the
# same for every [lane](00_rope_in_one_notebook.ipynb#9-glossary) of a warp) do no arithmetic at all: V is copied, or scaled and rounded:

# %%
print(lessons.specialised(kv_build, "kv_values"))

# %% [markdown]
# And the end of a Q or K warp: Q goes back where it came from, K to its slot's row of the
# cache, never back into `qkv`.  That is the whole saving over the two-launch chain: the chain
# writes K into `qkv`, reads it again to scatter it, and reads V once more; here every element
# of `qkv` is read once and every output written once.

# %%
print(lessons.specialised(kv_build, "kv_store"))

# %% [markdown]
# On the simulator, a small ragged batch (two requests and a padding token, 2 Q heads, 1 K and
# 1 V head of 64, float32) against the float64 reference `ropelab.reference_kv.fused_qknorm_rope_kv`,
# including that every slot no token maps to is untouched:

# %%
rng = np.random.default_rng(0)
tokens = len(slots)
qkv = rng.standard_normal((tokens, 4 * 64)).astype(np.float32)
w = rng.uniform(0.5, 1.5, 64).astype(np.float32)
pos = np.append(positions, 0).astype(np.int32)
caches = [np.full((8, block_size, 1, 64), 7.0, np.float32) for _ in range(2)]
want = reference_kv.fused_qknorm_rope_kv(qkv, num_heads_q=2, num_heads_k=1, num_heads_v=1,
                                         head_dim=64, q_weight=w, k_weight=w, positions=pos,
                                         slot_mapping=slots, k_cache=caches[0],
                                         v_cache=caches[1])
ropelab.fused_qknorm_rope_kv(qkv, num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=64,
                             q_weight=w, k_weight=w, positions=pos, slot_mapping=slots,
                             k_cache=caches[0], v_cache=caches[1])
for name, got, ref in zip(("K cache", "V cache"), caches, want[1:]):
    print(f"{name}: largest difference from the reference {np.abs(got - ref).max():.1e}; "
          f"slots left as they were: {int((got.reshape(32, -1) == 7.0).all(axis=1).sum())} "
          f"of {32 - int(keep.sum())} unmapped")

# %% [markdown]
# ## FP8 e4m3
#
# An FP8 cache halves the bytes of a bfloat16 one: a decoding step reads the whole cache, so
# that is half the [traffic](00_rope_in_one_notebook.ipynb#9-glossary) of attention.  The format vLLM and FlashInfer use is e4m3fn
# (`torch.float8_e4m3fn`): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits.  The "fn"
# variant has no infinity and one NaN per sign (`S.1111.111`), so the largest value is
# `S.1111.110` = 448.  Below the smallest normal, 2**-6, come the subnormals: multiples of
# 2**-9.  Every code, decoded by `ropelab.fp8.to_float32`:

# %%
codes = np.arange(256, dtype=np.uint8)
values = fp8.to_float32(codes)
finite = values[np.isfinite(values)]
print(f"{np.isfinite(values).sum()} finite codes, {np.isnan(values).sum()} NaN codes")
print(f"largest {finite.max()}, smallest normal {values[0x08]}, smallest subnormal {values[1]}")
print("the codes from 1.0 up:", [float(v) for v in values[0x38:0x41]])

# %% [markdown]
# A cache entry is `e4m3(x * (1 / scale))` with one float32 `scale` per tensor (`k_scale`,
# `v_scale`): the float32 product, rounded to the nearest code, ties to the even code,
# saturating at 448 (a cache cannot store an infinity).  That is what torch's conversion to
# `float8_e4m3fn` does, and ropelab's rounding is checked against it bit for bit.  The kernel's
# form is integer work on the float32 bits (on an H200 the hardware's conversion instruction
# replaces it; the simulator runs this one):

# %%
print(lessons.excerpt(fp8, "e4m3_bits"))

# %% [markdown]
# ### The error against the scale
#
# Three bits of mantissa give a relative error of at most 2**-4 in the normal range, whatever
# the scale.  The scale decides which values fall outside it: too small a scale pushes the
# largest values past 448, where they saturate; too large a scale pushes small values into the
# subnormals, where the step is a fixed 2**-9 and the relative error grows.  The usual choice is
# `scale = amax / 448`: the largest value lands on the largest code.  The error of a K-like
# distribution (normal values, a few large ones) quantized and decoded again, for scales around
# that choice:

# %%
rng = np.random.default_rng(1)
x = (rng.standard_normal(20000) * np.where(rng.random(20000) < 0.01, 8.0, 1.0)).astype(np.float32)
amax = float(np.abs(x).max())
scales = amax / 448 * 2.0 ** np.arange(-6, 9, 0.5)
rms = [float(np.sqrt(np.mean((fp8.dequantize(fp8.quantize(x, s), s) - x) ** 2))) for s in scales]
saturated = [float(np.mean(np.abs(x / s) >= 448)) for s in scales]
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.loglog(scales, rms, marker=".", label="RMS error after a round trip")
ax.axvline(amax / 448, color="#c0504d", ls="--", label="scale = amax / 448")
ax.set_xlabel("scale")
ax.set_ylabel("RMS error")
ax.legend(fontsize=8)
ax.grid(alpha=0.3)
plt.tight_layout()
plt.show()
best = int(np.argmin(rms))
print(f"smallest error at scale = amax / 448 x {scales[best] / (amax / 448):g}; "
      f"values saturated at the smallest scale shown: {saturated[0]:.1%}")

# %% [markdown]
# Near the dashed line the curve is flat: in the normal range the relative step is the same
# at any scale, so only the tails decide.  Left of it the error climbs steeply (saturated
# values lose everything above 448); far to its right it climbs again, slowly, as more values
# sink among the subnormals, whose step is fixed.

# %% [markdown]
# ## Ragged batches
#
# A batch mixes requests at different stages: one in prefill (all its prompt tokens at once),
# others decoding (one new token after a long context), one in chunked prefill (a few new
# tokens after some context).  The kernel sees their new tokens flattened, request after
# request, and needs one position per token: request `r`'s new tokens sit at positions
# `context_lens[r], context_lens[r] + 1, ...`.  The prefix sum of the on-ramp (ramp.14) gives
# the row where each request starts; a token's place in its request is its row minus that:

# %%
query_lens = np.array([4, 1, 1, 3])  # new tokens per request
context_lens = np.array([0, 17, 40, 6])  # tokens already cached per request
starts = np.concatenate([[0], np.cumsum(query_lens)[:-1]])  # the prefix sum
rows_of_batch = np.arange(query_lens.sum())
within = rows_of_batch - np.repeat(starts, query_lens)
batch_positions = np.repeat(context_lens, query_lens) + within
print("starts (cu_seqlens without its total):", starts.tolist())
print("positions:", batch_positions.tolist())

# %% [markdown]
# The launch needs no per-request work: one warp per token of the whole batch, the [grid](00_rope_in_one_notebook.ipynb#9-glossary) from
# the total number of tokens.  The engine builds the positions and slots on the host, where the
# scheduler's lengths are, and copies them over once per step.
#
# ## In a model, and how fast
#
# `ropelab.models.paged` is a small decode loop over a paged cache for the patched tiny Qwen3 of
# notebook 09: the op writes K and V into pages, the loop gathers them back and calls
# `scaled_dot_product_attention`.  Its greedy tokens, for a batch of prompts of different
# lengths, are the unpatched model's own `generate` tokens (`tests/test_paged_model.py`).  It is
# a **test harness, not a serving engine**: no scheduler, no continuous batching, no memory
# manager, no attention kernel of its own; it exists to show that the op's cache is right inside
# a real model.
#
# The GPU run (`data/serving/`, an H200, the public call on torch tensors) measured the op on a
# prefill of 4 requests of 1024 tokens and on decode steps of 64 requests and of 1 request
# captured in a CUDA graph, against a copy of the bytes it must move (the *copy [roof](00_rope_in_one_notebook.ipynb#9-glossary)*), the
# fused op followed by torch's scatter (two launches), and `torch.compile` of the whole chain:
#
# * prefill reaches {{ serving.prefill_bf16_pct }} of the copy roof with a bfloat16 cache and
#   {{ serving.prefill_fp8_pct }} with an FP8 cache;
# * a decode step takes {{ serving.decode_gap_us }} longer than a copy of its bytes;
# * the two-launch chain takes {{ serving.vs_scatter_ratio }} as long as the op, and
#   `torch.compile`'s chain {{ serving.vs_compiled_ratio }} as long.

# %%
record = lessons.recorded("serving")
if record is not None:
    print(lessons.provenance(record))
    calls = ["op", "fused+scatter", "compiled_chain", "copy"]
    groups = sorted({(r["case"], r["cache_dtype"]) for r in record["rows"]})
    fig, ax = plt.subplots(figsize=(10, 3.6))
    width = 0.2
    for j, call in enumerate(calls):
        times = [next((r["median_us"] for r in record["rows"] if (r["case"], r["cache_dtype"])
                       == g and r["call"] == call), np.nan) for g in groups]
        ax.bar(np.arange(len(groups)) + (j - 1.5) * width, times, width, label=call)
    ax.set_xticks(np.arange(len(groups)))
    ax.set_xticklabels([f"{case}\n{dtype} cache" for case, dtype in groups], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("median time per call (us)")
    ax.legend(fontsize=8)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ## Build it yourself
#
# Four graded steps build the write: the slot scatter, the FP8 rounding, the fused kernel's K/V
# write, and its launch for a ragged batch.  Write each function in its cell and run the cell
# after it: the grader runs it on the simulator, compares it with a float64 reference (the
# cache slots no token maps to must stay untouched), and says which typical mistake a wrong
# value matches.  A kernel with right values is then compiled for the H200 (no GPU needed) and
# must hold the notebook's rules: no float64 arithmetic (a bare literal or an `int32 *
# float32` is a float64 in Numba), and the [shuffle](00_rope_in_one_notebook.ipynb#9-glossary) butterfly for the norm in step 10.3.
# Solutions: `notebooks/solutions/10_serving.py`.
#
# ### Step 10.1: the slot scatter
#
# One thread per float of `k`.  Thread `i` belongs to token `t = i // (heads * head_dim)` and
# copies its float into that token's slot row, unless the slot is negative.

# %%
from numba import cuda, float32, uint32

from ropelab.grader import steps
from ropelab.grader.steps.nb10 import float_bits

FULL_MASK = 0xFFFFFFFF  # every lane of the warp takes part


@cuda.jit
def scatter_rows(k, slot_mapping, out, tokens, heads, head_dim):
    """out[slot_mapping[t] * heads * head_dim + c] = k[t * heads * head_dim + c] for every
    token t whose slot is not negative; every other float of out stays untouched.

    k: float32[tokens * heads * head_dim]; slot_mapping: int64[tokens]; out: the cache,
    float32[num_slots * heads * head_dim]; tokens, heads, head_dim: int64.  One thread per
    float of k, 64 threads per block.
    """
    pass

# %%
verdict = steps.check(scatter_rows, "10.1")

# %% [markdown]
# ### Step 10.2: FP8 e4m3, bit for bit
#
# One thread per value: `out[i]` is the code (a whole number 0 .. 255, in float32) of
# `v = x[i] * inv_scale`.  `float_bits(v)` gives the float32's bits as a `uint32`.  The normal
# range rebiases the exponent and rounds the 20 dropped mantissa bits to nearest even; below
# 2**-6 the code is `|v| / 2**-9` rounded to nearest even; 448 and above (and infinity) give
# `0x7E`; NaN gives `0x7F`; bit 7 is the sign.  The grader compares with torch's rounding on
# values chosen to meet every one of those rules, ties included (torch's own cast, unclamped,
# gives NaN from 480 up: the cache clamps to 448 first, and so does the reference).
#
# One trap the simulator hides: on a GPU, Numba computes `uint32 + uint32` in 64 bits, while the
# simulator computes it in NumPy's 32 bits and wraps.  A kernel that rebiases the exponent by
# adding `0xC4000000` and counts on the carry out of bit 31 vanishing would pass here and is
# wrong on an H200 (a held-out learner's kernel was: every code off by 4096), so the grader
# refuses a sum that wraps on the simulator and names its line.  Subtract instead, as the hint
# does, or wrap on purpose: `uint32(a + b)`.

# %%
@cuda.jit
def e4m3_codes(x, out, inv_scale, n):
    """out[i] = the e4m3fn code of the float32 x[i] * inv_scale, as torch.float8_e4m3fn
    rounds it (nearest even, subnormals, saturating at 448, NaN 0x7F with its sign).

    x: float32[n]; out: float32[n], whole numbers 0 .. 255; inv_scale: float32; n: int64.
    One thread per value, 64 threads per block.
    """
    pass

# %%
verdict = steps.check(e4m3_codes, "10.2")

# %% [markdown]
# ### Step 10.3: the fused kernel's K/V write
#
# One warp per token, four warps a block; `qkv` rows hold 2 Q heads, then K (floats 128 ..
# 191), then V, heads of 64.  Lane `l` holds floats `2l` and `2l + 1` of K and of V.  K is
# normalized (the sum of squares by the butterfly, divided by 64, plus `eps = 1e-6`), weighted
# by `k_weight`, turned by `positions[token] * inv_freq[l]` and stored at its slot's K row,
# `out[slot * 64 + 2l]`; V is copied to `out[(num_slots + slot) * 64 + 2l]`.  A token whose slot
# is negative is skipped by its whole warp (so the shuffles stay [warp-uniform](00_rope_in_one_notebook.ipynb#9-glossary)).

# %%
@cuda.jit(fastmath=True)
def write_kv(qkv, k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots):
    """Warp w writes token w's normalized, weighted, rotated K head into its slot's K row of
    out and copies its V head into the slot's V row; padding tokens (slot < 0) write nothing.

    qkv: float32[tokens * 256]; k_weight: float32[64]; positions: int32[tokens];
    slot_mapping: int64[tokens]; inv_freq: float32[32]; out: float32[2 * num_slots * 64], the
    cache [2, num_slots, 64]; tokens, num_slots: int64.  Four warps per block.
    """
    pass

# %%
verdict = steps.check(write_kv, "10.3")

# %% [markdown]
# ### Step 10.4: the launch for a ragged batch
#
# A host function: `query_lens` and `context_lens` are tuples on the host, as the scheduler
# holds them.  Build the positions of every token of the batch (the section on ragged batches
# above), copy them to the device as `int32`, and launch your `write_kv` with one warp per
# token: `ceil(tokens / 4)` blocks of 128 threads.

# %%
def launch_kv_write(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                    num_slots):
    """Launch write_kv over the batch: positions[t] = context_lens[r] + (t - start of
    request r), tokens = sum(query_lens); the arrays are device arrays, the lengths host
    tuples."""
    pass

# %%
verdict = steps.check(launch_kv_write, "10.4")

# %% [markdown]
# On a GPU, `verdict.time()` times a passing kernel against a device copy of the same bytes.

# %% tags=["nbval-ignore-output"]
verdict.time()
