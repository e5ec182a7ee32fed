# %% [markdown]
# # 00 — RoPE in one notebook
#
# Rotary position embedding (RoPE) tells attention where each token sits by *turning* parts
# of its query and key vectors, a little for early tokens and a lot for late ones.  Llama,
# Qwen, Mistral and most current open models use it.  This course writes RoPE as GPU kernels
# again and again, each time removing one cost, and measures what each change buys.
#
# This first notebook has no performance in it.  It builds the operator itself:
#
# 1. the math: pairs of numbers as complex numbers, rotated by *position x frequency*;
# 2. two plots: the frequency of every pair, and the angle every pair reaches by position;
# 3. the property that makes RoPE worth having: attention scores depend on relative position;
# 4. the two memory layouts found in the wild (interleaved and half-split);
# 5. the float64 reference that judges every kernel in the course;
# 6. a GPU in one page: grid, block, warp, thread, SM, memory, coalescing, special functions;
# 7. how a Numba kernel is compiled (Python to PTX to machine code) and launched;
# 8. how `ropelab` decides between a real GPU and the Numba CUDA simulator, and a first call.
#
# Everything runs on a laptop: without a GPU, `ropelab` runs its kernels on the simulator.

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

from ropelab import lessons, reference
from ropelab.measure import census as ptx

print(ropelab.format_description())

# %% [markdown]
# ## 1. The math
#
# Take one token's vector for one attention head, `d` floats (`d = head_dim`, 64 or 128 in
# real models).  RoPE groups the floats into `d/2` pairs.  Pair `i` is read as a complex number
#
# $$z_i = x_{2i} + \mathrm{j}\,x_{2i+1},$$
#
# and a token at position $m$ multiplies it by a unit complex number:
#
# $$z_i' = z_i\, e^{\mathrm{j}\, m\, \theta_i}, \qquad \theta_i = \text{base}^{-2i/d},
# \qquad \text{base} = 10000 .$$
#
# Multiplying by $e^{\mathrm{j}\phi}$ is a rotation by the angle $\phi$, so in real numbers
# each pair goes through a 2x2 rotation matrix:
#
# $$\begin{pmatrix} x_{2i}' \\ x_{2i+1}' \end{pmatrix} =
# \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
# \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}.$$
#
# Every kernel in this course computes exactly that: per pair, one frequency, one angle, one
# cosine, one sine, four multiplies and two adds.  Here it is by hand, with NumPy's complex
# numbers, next to `ropelab.reference.rope`:

# %%
d, base, m = 8, 10000.0, 3
x = np.arange(1.0, d + 1)  # one token, one head of 8 floats: 4 pairs
theta = base ** (-np.arange(0, d, 2) / d)  # one frequency per pair
z = x[0::2] + 1j * x[1::2]  # the pairs as complex numbers
rotated = z * np.exp(1j * m * theta)  # pair i turned by m * theta_i radians
by_hand = np.stack([rotated.real, rotated.imag], axis=-1).ravel()

print("theta_i              :", theta)
print("lengths unchanged    :", np.allclose(np.abs(rotated), np.abs(z)))
print("same as the reference:", np.allclose(by_hand, reference.rope(x[None, :], [m])[0]))

# %% [markdown]
# A rotation never changes a pair's length, so RoPE moves information around inside each
# pair without growing or shrinking it.  The reference agrees with the complex form; it is
# written with cos/sin because that is how a kernel computes it.
#
# ## 2. Frequencies and angles
#
# The frequencies fall geometrically with the pair index: pair 0 turns one radian per token,
# the last pair of a 128-float head turns about $10^{-4}$ radians per token.  Fast pairs
# distinguish neighbours; slow pairs still tell apart tokens tens of thousands of positions
# apart.

# %%
head_dim = 128
freqs = reference.inv_freq(head_dim)  # float64, one per pair
positions = np.arange(0, 65)
angles = reference.angles(positions, freqs)  # [positions, pairs]

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
left.semilogy(np.arange(head_dim // 2), freqs, ".-")
left.set_xlabel("pair index i")
left.set_ylabel(r"$\theta_i$ (radians per token)")
left.set_title(f"frequency by pair, head_dim {head_dim}, base 10000")
for i in (0, 6, 12, 24):
    wrapped = np.angle(np.exp(1j * angles[:, i]))  # the angle as the rotation sees it
    right.plot(positions, wrapped, ".-", ms=3, lw=1, label=f"pair {i}")
right.set_xlabel("position m")
right.set_ylabel(r"$m\,\theta_i$ wrapped to $(-\pi, \pi]$")
right.set_title("rotation angle by position")
right.legend(fontsize=8, loc="lower left")
fig.tight_layout()
plt.show()

# %%
wavelength = 2 * np.pi / freqs  # tokens per full turn
print(f"pair 0 turns once every {wavelength[0]:.2f} tokens")
print(f"pair {head_dim // 2 - 1} turns once every {wavelength[-1]:,.0f} tokens")
print(f"angle of pair 0 at position 131071: {131071 * freqs[0]:,.0f} radians")

# %% [markdown]
# Keep the last line in mind: with a long context, the fastest pair's angle reaches
# $10^5$ radians.  A float32 angle that large has an absolute rounding step of about
# 0.008 rad, and the GPU's fast `sin`/`cos` approximations lose accuracy as the angle grows.
# Notebook 04 measures what that does to the output.
#
# ## 3. Why rotate: scores depend on relative position
#
# Attention compares a query at position $m$ with a key at position $n$ through a dot
# product.  With RoPE, $\langle R_m q, R_n k \rangle = \langle q, R_{n-m} k \rangle$: only the
# offset $n - m$ survives.  Check it numerically with random vectors, the same offset at very
# different absolute positions:

# %%
rng = np.random.default_rng(0)
q, k = rng.standard_normal((2, 64))


def score(m, n):
    """The attention logit (before scaling) of a query at position m and a key at n."""
    return reference.rope(q[None], [m])[0] @ reference.rope(k[None], [n])[0]


same_offset = [score(m, m - 3) for m in (3, 10, 1_000, 50_000)]
other_offset = score(10, 5)
print("offset 3 at m = 3, 10, 1000, 50000:", np.round(same_offset, 4))
print("all equal (within 1e-8)           :", bool(np.ptp(same_offset) < 1e-8))
print("offset 5 differs                  :", bool(abs(other_offset - same_offset[0]) > 1e-3))

# %% [markdown]
# ## 4. Two layouts of the same rotation
#
# Which floats form a pair is a convention, and both are in use:
#
# * **interleaved** (GPT-J, the seed CUDA kernels, `interleave=True`): pair $i$ is
#   $(x_{2i}, x_{2i+1})$;
# * **half-split** (GPT-NeoX, Llama in Hugging Face transformers, `interleave=False`):
#   pair $i$ is $(x_i, x_{i+d/2})$.
#
# `reference.pair_indices` lists them:

# %%
for interleave in (True, False):
    first, second = reference.pair_indices(8, interleave)
    name = "interleaved" if interleave else "half-split "
    print(name, [(int(a), int(b)) for a, b in zip(first, second)])

# %% [markdown]
# The two are the same rotation seen through a permutation of the head's floats: gather the
# even floats, then the odd ones, and the interleaved pairs become half-split pairs.  That
# is why checkpoint converters permute the rows of the query and key projections when they
# move weights between the two conventions.

# %%
x = rng.standard_normal((4, 16))
pos = np.array([0, 5, 17, 1000])
perm = np.concatenate([np.arange(0, 16, 2), np.arange(1, 16, 2)])  # evens, then odds

interleaved = reference.rope(x, pos, interleave=True)
half_split = reference.rope(x[:, perm], pos, interleave=False)
print("same rotation up to the permutation:", np.allclose(half_split, interleaved[:, perm]))

# %% [markdown]
# ## 5. The judge
#
# Every kernel in `ropelab` is compared with one float64 NumPy function, written to be read
# rather than to be fast.  It also covers what later notebooks need: several heads, partial
# rotation (only the first `rotary_dim` floats turn), both layouts, the inverse rotation and
# custom frequencies, which is how the context-extension schemes plug in: *YaRN* (pairs that
# turn slowly over the trained context get slower, fast ones keep their frequency) and
# *Llama 3.1* scaling (the same idea, decided by wavelength).  A second, independent formulation (`reference.rope_complex`, the complex
# multiply above) cross-checks it in the test suite.

# %%
print(inspect.getsource(reference.rope))

# %% [markdown]
# ## 6. A GPU in one page
#
# The rest of the course talks about kernels, warps, sectors and special functions.  This
# section defines each of those words once, with one picture, before any notebook uses them.
#
# **What a launch creates.**  A *kernel* is a function that the GPU runs many times at once, once
# per *thread*.  A launch `kernel[blocks, threads_per_block](args)` asks for a *grid* of
# *blocks*; every block holds the same number of threads (at most 1024).  Each thread runs the
# same code and tells itself apart from the others by its coordinates: `cuda.blockIdx.x`
# (which block), `cuda.threadIdx.x` (which thread inside the block) and `cuda.blockDim.x`
# (threads per block); `cuda.grid(1)` is `blockIdx.x * blockDim.x + threadIdx.x`, a global
# thread number.  Grids and blocks may also have a second and third dimension (notebooks 02
# and 06 use a 2-D grid).
#
# **Warps and lanes.**  The hardware does not run threads one by one: it runs them in groups of
# 32 consecutive threads of a block, called *warps*.  The 32 threads of a warp are its *lanes*
# (lane = `threadIdx.x % 32`).  A warp issues one instruction at a time for all its lanes.  When
# lanes disagree at an `if`, the warp runs both sides one after the other with the lanes of
# the other side switched off (*divergence*).  A block whose size is not a multiple of 32 still
# occupies whole warps, and the lanes past its end idle.
#
# **Where it runs.**  The GPU is made of *SMs* (streaming multiprocessors): 132 on the H200 that
# recorded this course's data.  The hardware places each block on one SM, whole, and keeps it
# there until all its threads finish; an SM holds up to 2048 threads (64 warps) of up to 32
# blocks at once, as far as its registers and shared memory allow (the share of those 64
# warp slots in use is the *occupancy*).  Each SM has:
#
# * four *warp schedulers*; every clock each one picks a warp that is ready and issues its next
#   instruction.  While one warp waits for memory, the others run: having many warps resident
#   is how a GPU hides the *latency* of memory (hundreds of clock cycles per access);
# * 128 FP32 lanes: 128 float32 multiply-adds per clock;
# * 16 *special function units* (SFUs), which compute fast approximations of `sin`, `cos`,
#   `exp2`, `log2`, reciprocal and reciprocal square root: 16 results per clock, one eighth of
#   the FP32 rate;
# * a *register file* of 64K 32-bit registers, split among the resident threads: a thread's
#   local variables live in registers, the fastest storage there is;
# * 256 KB of on-chip memory, split between *L1* (a cache of global memory) and *shared
#   memory*: memory that the threads of one block share, read and write explicitly, and
#   synchronize on with `cuda.syncthreads()`.  The ladders use it where threads of a block must
#   exchange values (the on-ramp's puzzles, steps 04.2 and 06.2); notebook 06's kernel lets the
#   lanes of a warp exchange values with *warp shuffles* instead.
#
# Outside the SMs, all of them share the *L2 cache* (60 MiB on the H200) and the *global
# memory*, HBM (high bandwidth memory, the GPU's DRAM): 141 GB at about 4.8 TB/s on an H200.
# Every array a kernel receives, `x` and `out` included, lives in global memory.
#
# **Coalescing and sectors.**  Global memory is read and written in *sectors* of 32 bytes.  When
# the 32 lanes of a warp execute a load, the hardware gathers their addresses and fetches
# every sector that at least one lane touches, once.  If lane `k` reads the float32 at index
# `k`, the warp's 128 bytes sit in 4 sectors and nothing fetched is wasted: the access is
# *coalesced*.  If lane `k` reads index `8k` instead, the same 32 floats are spread over 32
# sectors, and 7/8 of the bytes fetched are thrown away.  Much of GPU kernel engineering is
# arranging the threads so that neighbouring lanes touch neighbouring bytes.
#
# The picture draws all three ideas, with the SM count and L2 size read from the GPU record:

# %%
bench = lessons.recorded("bench")
meta = bench["meta"] if bench is not None else {"sm_count": 132, "l2_bytes": 60 * 2**20}
lessons.plot_execution_model(sm_count=meta["sm_count"], l2_mib=meta["l2_bytes"] / 2**20)
plt.show()

# %% [markdown]
# Panel 1 is a launch of 3 blocks of 80 threads: each block needs three warps, and the last one
# has 16 idle lanes.  Panel 2 is one SM of the 132, and panel 3 a single warp load instruction
# counted in sectors.  The same count for a few access patterns a RoPE kernel meets:

# %%
print(f"{'lane k reads float':<20} {'sectors':>8} {'bytes fetched':>14} {'bytes used':>11} {'used':>6}")
for stride, what in ((1, "x[k]"), (2, "x[2k]"), (4, "x[4k]"), (8, "x[8k]"), (32, "x[32k]")):
    sectors = lessons.sectors_touched(stride)
    fetched = sectors * 32
    print(f"{what:<20} {sectors:>8} {fetched:>14} {32 * 4:>11} {32 * 4 / fetched:>6.0%}")

# %% [markdown]
# The `flat` kernel of notebook 01 has lane `k` read `x[2k]` and then `x[2k + 1]`: each of the two
# load instructions touches 8 sectors and uses half of each, but the second one finds its
# sectors already on chip (in L1 or L2), fetched by the first, so every byte that comes from
# memory is used.  The consecutive-pairs version of notebook 05 put each lane 32 bytes from the next:
# the `x[8k]` row.
#
# **Memory-bound or compute-bound?**  A kernel is limited by whichever it runs out of first:
# instructions or bytes.  On paper, for an H200 (the clock and bandwidth are data-sheet numbers,
# not measurements), here is how many instructions per pair all SMs together can issue in the
# time HBM needs to move one float32 pair in and out (16 bytes):

# %%
budget = lessons.paper_budget(meta["sm_count"])
print(f"HBM moves {budget['pairs_per_s'] / 1e9:,.0f} billion pairs per second (16 bytes each)")
print(f"in that time: about {budget['fp32_per_pair']:.0f} FP32 instructions per pair, "
      f"{budget['sfu_per_pair']:.0f} SFU instructions per pair")

# %% [markdown]
# A RoPE kernel needs a few dozen instructions per pair, four of them on the SFU: the `pow`
# as two (a base-2 logarithm `lg2` and an exponential `ex2`), a `sin` and a `cos` (the census
# line printed under the compile pipeline below lists them): on paper, below both budgets, so memory should set its speed, and the
# fastest it can go is a copy of the same bytes.  Paper is not a measurement: an integer
# division costs dozens of instructions, a warp's instructions wait on each other's results,
# and a kernel that does not keep enough bytes in flight stays below the memory's rate
# whatever its instruction count.  The variant notebooks measure each of these on the H200.
#
# ## 7. How a Numba kernel is compiled and launched
#
# A Numba CUDA kernel is a Python function made into a kernel by `cuda.jit`, written either as
# the decorator `@cuda.jit` above the `def` or as the call `cuda.jit(fn)`.  `ropelab` keeps its
# kernels as plain functions and applies `cuda.jit` when it first launches one (so the files
# import without a GPU).  On the first launch with a given set of argument types, Numba:
#
# 1. reads the function's bytecode into the **Numba IR** and infers a type for every variable
#    from the argument types (`float32` arrays, `uint64` scalars, ...); a float64 that sneaks in
#    here is compiled as float64;
# 2. lowers it to **NVVM IR**, NVIDIA's dialect of the intermediate code of *LLVM* (an open
#    compiler toolkit, which NVIDIA's compiler is built on); `math.sin` becomes a
#    call into *libdevice* (NVIDIA's accurate math library) or, with `fastmath=True` (*fast-math*), the SFU
#    approximation `sin.approx.f32`;
# 3. compiles that with libNVVM to **PTX**, a virtual instruction set that is portable across
#    GPU generations (`ropelab.measure.census.census()` counts instructions at this level, with no GPU);
# 4. has PTX assembled into **SASS**, the machine code of one GPU generation (compute
#    capability 9.0 for H100 and H200), by the driver or by *nvJitLink* (NVIDIA's linker library).
#
# The compiled kernel is cached per argument types, so later launches skip all of it.  A
# **launch** then hands the driver the grid and block sizes and the arguments
# (`cuLaunchKernel`) on a *stream*, a queue of GPU work that runs in order.  It returns as soon
# as the launch is queued, before the kernel has run: the host and the GPU work
# asynchronously until something waits (a copy back to the host, or `cuda.synchronize()`).
# Notebook 07 measures what a launch costs the host.
#
# The pipeline, with the instruction counts of notebook 01's kernel at the last two stages
# (PTX from the census, SASS from the census record under `data/census/`):

# %%
flat_ptx = ptx.row(ptx.census(), "flat", fastmath=True)
sass_record = ptx.census(sass=True)  # the recorded SASS counts, read without nvdisasm
flat_sass = ptx.row(sass_record, "flat", fastmath=True)
lessons.plot_compile_pipeline({"PTX": f"rope_flat: {flat_ptx['instructions']} instructions",
                              "SASS": f"rope_flat: {flat_sass['sass_instructions']} instructions"})
plt.show()
print("rope_flat's special-function instructions in PTX:", flat_ptx["sfu"])

# %% [markdown]
# ## 8. Where the kernels run: GPU or simulator
#
# `import ropelab` decides, before `numba.cuda` is loaded, where kernels will run:
#
# 1. `ROPELAB_TARGET=gpu` or `ROPELAB_TARGET=simulator` in the environment wins;
# 2. otherwise `NUMBA_ENABLE_CUDASIM=1` or `=0`, if you set it, is respected;
# 3. otherwise `ropelab` asks the CUDA driver (through `ctypes`) whether it sees a device, and
#    falls back to the Numba CUDA simulator when it does not.
#
# The order matters because numba-cuda reads `NUMBA_ENABLE_CUDASIM` once, when `numba.cuda`
# is first imported, and swaps in a different module for the simulator.  So **import ropelab
# before numba.cuda**; if something imported `numba.cuda` first with the other target,
# `ropelab` raises an error that says how to fix it.
#
# The simulator runs every CUDA thread in Python, in turn (threads that wait for each other
# take turns), about ten thousand threads a second.
# What it computes:
#
# * a kernel's float32 arithmetic is NumPy float32 arithmetic, rounded as on a GPU (so
#   `float32(position) * frequency` rounds the same way there);
# * but `math.sin`, `math.cos` and `math.pow` are double-precision library calls, rounded to
#   float32 afterwards, and there is no fast-math: the simulator shows neither the error of the
#   GPU's `sin.approx` nor the libdevice versions' own;
# * its `cuda.fma` would be a plain multiply then add; `ropelab` replaces it with a correctly
#   rounded float32 fused multiply-add, as the GPU computes it.
#
# So the simulator is exact enough to check indexing and logic, and it checks bounds for free
# (an out-of-bounds access raises `IndexError`).  It says nothing about time, and nothing
# final about float32 precision where sines and fast-math matter.  That is why every number
# about speed or precision in this course comes from a recorded GPU run under `data/`.

# %%
# NBVAL_IGNORE_OUTPUT
# Machine-dependent: "simulator" here, "gpu" on a GPU host.
info = ropelab.describe()
print("target:", info["target"], "-", info["reason"])

# %% [markdown]
# A first kernel call.  `ropelab.rope` takes a float32 `[tokens, hidden]` array (one head of
# `hidden` floats, as in the seed kernels) or `[tokens, heads, head_dim]`, checks everything,
# runs the chosen variant and returns the result.  `lessons.check` compares it with the
# reference under the tolerance the test suite uses and prints only deterministic facts;
# the raw error goes in a separate cell, because it differs between the simulator and a GPU.

# %%
x = rng.standard_normal((5, 130)).astype(np.float32)  # 65 pairs per token: fills no block evenly
pos = np.array([0, 1, 7, 300, 4095], dtype=np.int32)
y = ropelab.rope(x, variant="flat", positions=pos)
first_call = lessons.check("flat", x, y, pos)
print(y.shape, y.dtype)
print(first_call.line)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"max |error| = {first_call.max_error:.2e} on the {ropelab.TARGET}")

# %% [markdown]
# ## 9. Glossary
#
# The words the later notebooks use, defined once (the list is kept in
# `ropelab.lessons.glossary`, and `tests/test_glossary.py` fails when a notebook uses one that is
# not defined here).  Many come from the two tools that look inside a kernel: the *SASS census*
# (`ropelab census --sass`, the machine code, no GPU needed) and *Nsight Compute* (`ncu`,
# NVIDIA's profiler, whose records are under `data/profile/`).
#
# **The machine**
#
# * **thread**: one run of a kernel's function, told apart from the others by `threadIdx` and
#   `blockIdx`.
# * **block**: up to 1024 threads launched together on one SM; they share its shared memory and
#   can meet at a barrier.
# * **grid**: all the blocks of one launch, numbered in one to three dimensions.
# * **barrier**: `cuda.syncthreads()`: no thread of the block goes past it until all have
#   reached it.
# * **race**: two threads touching one shared element, at least one writing, with no barrier
#   between them: the result depends on timing.
# * **warp**: 32 consecutive threads of a block that issue one instruction at a time together.
# * **lane**: one thread of a warp, numbered 0 to 31 (`threadIdx.x % 32`).
# * **SM**: streaming multiprocessor, the unit that runs blocks; an H200 has 132.
# * **register**: a thread's private on-chip storage, the fastest there is; `reg` in the profile
#   table is registers per thread (more per thread leaves room for fewer warps).
# * **occupancy**: the share of an SM's 64 warp slots that hold a warp; `occ%` prints achieved
#   (what the run had on average) over theoretical (what registers and block size allow).
# * **SFU**: special function unit, which computes fast approximations of `sin`, `cos`, `ex2`,
#   `lg2` and reciprocals (`MUFU` instructions in SASS).
# * **XU**: Nsight Compute's name for the pipe of the SFUs (and some conversions); `XU%` is how
#   busy it was, a share of its peak.
# * **HBM**: the GPU's DRAM, its global memory; `DRAM%` is the DRAM throughput the profiler saw,
#   a share of its peak.
# * **GDDR6X**: the DRAM of consumer GPUs such as the RTX 4090: a narrower bus than HBM, and
#   about a fifth of an H200's bandwidth by the two data sheets.
# * **L1** / **L2**: the caches between the SMs and HBM: L1 one per SM (it shares its storage
#   with shared memory), L2 one for the whole GPU.
# * **L1TEX**: Nsight Compute's name for an SM's L1 data cache and texture unit, through which
#   every global load and store passes; its `l1tex__` metrics count a kernel's requests and
#   sectors.
# * **shared memory**: on-chip memory a block's threads share and synchronize on explicitly.
# * **sector**: the 32-byte unit in which global memory is read and written; `sect/req` is
#   sectors per load/store request of a warp (8 when 32 lanes read consecutive 8-byte pairs).
# * **coalescing**: a warp's accesses merged into as few sectors as their bytes need.
# * **latency**: how long one access takes to return (hundreds of cycles for HBM); hidden by
#   running other warps meanwhile.
# * **divergence**: lanes of one warp taking different sides of a branch, run one after the other.
# * **warp-uniform**: the same for every lane of a warp.  A branch on a warp-uniform condition
#   does not diverge, and a shuffle with a full mask must be reached by every lane, so it may
#   only sit under warp-uniform conditions.
# * **stream**: a queue of GPU work that runs in order; launches return before the work runs.
#
# **Compiling**
#
# * **PTX**: the portable virtual instruction set Numba's compiler emits.
# * **SASS**: the machine code of one GPU generation, assembled from PTX.
# * **NVVM**: NVIDIA's LLVM-based compiler from NVVM IR to PTX, which Numba calls.
# * **LLVM**: an open compiler toolkit and its intermediate code (LLVM IR), on which Numba and
#   NVVM are built.
# * **libdevice**: NVIDIA's library of accurate math functions that non-fast-math builds call.
# * **fast-math**: `fastmath=True`: approximate SFU functions and relaxed float rules.
# * **NVRTC**: NVIDIA's runtime compiler for CUDA C++ (the course's C++ twins use it).
# * **nvJitLink**: the library that links and assembles PTX into SASS without a driver.
# * **nvdisasm**: NVIDIA's disassembler, which turns a compiled kernel back into SASS text.
#
# **SASS instructions the course names**
#
# * **LDG.E.128**: one global load of 128 bits (16 bytes) per lane; `LDG.E.64` 8 bytes,
#   `LDG.E` 4 bytes.  `STG` is the store.
# * **IADD3**: a 32-bit integer add of three operands, the usual index arithmetic.
# * **IADD3.X**: the same add taking the carry of the one before: the upper half of a 64-bit
#   add, so a 64-bit index costs a pair of instructions.
# * **.EX**: the suffix of a compare (`ISETP...EX`) on the upper half of a 64-bit value, the
#   second instruction of a 64-bit compare.
# * **BSSY**: with `BSYNC`, the divergence barrier the compiler wraps around a branch that some
#   lanes may skip, so the warp re-converges after it.
# * **SHFL**: a warp shuffle (`SHFL.BFLY` for `shfl_xor_sync`): a lane reads another lane's
#   register directly.
#
# **Nsight Compute metrics and stall reasons**
#
# A warp's *stall reason* is what kept it from issuing in a cycle; the profile table lists the
# top reasons in cycles per issued instruction.
#
# * **issue%**: the share of cycles in which the SM's schedulers issued an instruction; near its
#   peak the kernel is *issue-bound*.
# * **cycles/issue**: cycles between two instructions of one warp, split by stall reason.
# * **traffic**: DRAM bytes moved over the minimum the kernel must move (a ratio of one: no waste).
# * **long_scoreboard**: waiting for a global (or local) memory load's data.
# * **short_scoreboard**: waiting for an on-chip result: shared memory, a shuffle or the SFU.
# * **mio_throttle**: the memory input/output queue is full (too many shared-memory, shuffle or
#   special instructions at once).
# * **math_pipe_throttle**: the math pipe the instruction needs is busy.
# * **drain**: waiting at the kernel's end for its stores to leave the SM.
# * **imc_miss**: waiting for a constant (kernel arguments, literals) missing in the constant cache.
# * **not_selected**: ready, but the scheduler issued another warp's instruction that cycle.
# * **wait**: a fixed wait the compiler scheduled for an instruction's result; in the census's
#   SASS order, `w` marks a wait for a load still in flight.
#
# **Measuring**
#
# * **roof**: the fastest device copy of the same bytes: what a kernel that reads and writes
#   every byte once cannot beat.
# * **Little's law**: bytes in flight = bandwidth x latency: the bytes a kernel must keep
#   requested to run at full bandwidth.
# * **p20-p80**: the 20th to 80th percentile of the single launches of one measurement.
# * **noise floor**: the largest difference between two timings of the same kernel in one run.
# * **cold L2**: timed after a fill that evicts the L2 cache, so data comes from HBM.
# * **host_bound**: a row whose host enqueue time nearly filled the GPU's busy time: it may have
#   timed the host.
# * **CUDA events**: markers recorded into a stream; the GPU stamps each one when it reaches it,
#   and `cuda.event_elapsed_time(start, end)` is the time between two in milliseconds: GPU
#   time, not the host's (notebook 07 shows what they can and cannot time).
#
# **Numbers and models**
#
# * **ulp**: unit in the last place, the gap between a float and the next one of its format:
#   at 1.0 it is 2^-23 (about 1.2e-7) in float32, 2^-10 in float16 and 2^-7 in bfloat16.
#   Rounding to nearest is off by at most half an ulp.
# * **float16** / **bfloat16**: the two 16-bit storage formats.  float16 (IEEE half
#   precision) has 5 exponent bits and 10 mantissa bits (largest value 65504); bfloat16 has
#   float32's 8 exponent bits, so its range, and 7 mantissa bits: it is the upper half of a
#   float32's bits.  ropelab computes in float32 and rounds to the storage format when it
#   stores; bfloat16 arrays travel as `uint16` bit patterns.
# * **RMSNorm**: `x / sqrt(mean(x**2) + eps) * weight`, a normalization by the root mean square
#   (no mean subtracted), applied per head to Q and K by "QK-norm" models.
# * **YaRN**: a context-extension scheme for RoPE (Peng et al. 2023): pairs that turn more than
#   about 32 times over the trained context keep their frequency, pairs that turn less than
#   once are slowed by the extension factor, a linear ramp blends those between, and cos and
#   sin are multiplied by an attention factor `0.1 ln(factor) + 1`.
# * **Llama 3.1 scaling**: Meta's context extension for Llama 3.1, by wavelength (`2 pi /
#   frequency`): pairs whose wavelength is below the trained context over `high_freq_factor`
#   keep their frequency, those above it over `low_freq_factor` are slowed by `factor` (8), and
#   those between are blended; no attention factor.
# * **GQA**: grouped-query attention: fewer K and V heads than Q heads, each K/V head shared by
#   a group of Q heads (Qwen3-8B: 32 Q heads, 8 K and 8 V).
# * **GEMM**: a general matrix multiply, what a linear layer (the qkv projection) runs.
# * **SGD**: stochastic gradient descent: step each weight against its gradient, times a
#   learning rate.

# %% [markdown]
# ## Takeaways
#
# * RoPE rotates each pair of a head by `position x frequency`; frequencies fall geometrically
#   from 1 rad/token to about `1/base`.
# * Only relative position survives in the attention score, which is the point.
# * Interleaved and half-split layouts are one permutation apart; kernels must know which one
#   they are given.
# * Angles grow to $10^5$ radians in long contexts: precision will matter.
# * A launch is a grid of blocks of threads; the GPU runs them 32 at a time, as warps, on its
#   SMs.  A warp's loads are fetched in 32-byte sectors: neighbouring lanes should touch
#   neighbouring bytes (coalescing).  `sin`, `cos` and `pow` run on the SFUs under fast-math.
# * A Numba kernel goes Python -> Numba IR -> NVVM IR -> PTX -> SASS on its first launch; the
#   census counts PTX without a GPU.
# * The float64 reference judges every kernel; the simulator checks logic, the GPU records
#   speed and precision.

# %% [markdown]
# ## Build it yourself
#
# Time to write kernels.  This section is a ladder of five graded steps, each one a little
# further than the last: copy an array, guard a partial block, rotate pairs, launch a kernel
# yourself, and finally a first RoPE kernel.  Each step gives you a cell with the function's
# signature, a docstring that states its contract, and `pass`; replace the `pass` with your
# code and run the cell after it, which grades your function:
#
# * `@cuda.jit` compiles the function for the GPU (or hands it to the simulator) and
#   `fastmath=True` lets the compiler use the GPU's fast approximate `sin`, `cos` and division,
#   as every ropelab kernel does;
# * the grader launches your kernel on a few small shapes (from step 00.2 on, shapes that fill
#   no block evenly), compares every float with the float64 reference, and prints either the
#   first mistake with a hint or PASS, with your kernel's instruction census next to a ropelab
#   kernel's;
# * it never stops the notebook: a kernel that never finishes is stopped after 30 seconds.
#   Until you write the body, it says "not solved yet".
#
# Stuck?  `steps.hint("00.1")` gives a hint, one level more each time you call it: a
# direction, then the structure, then the key line.  `steps.progress()` shows the steps you
# have passed, in every notebook, and `steps.reset_progress()` forgets them.  Each step's
# solution, and the mistakes the grader recognizes, are in
# `notebooks/solutions/00_rope_in_one_notebook.py`.
#
# ### Step 00.1: map, one thread per float
#
# Copy `x` into `out`.  The launch has exactly one thread per float: `n / 32` blocks of 32
# threads, so every thread owns one float.  A thread's global number is `cuda.grid(1)`, that is
# `blockIdx.x * blockDim.x + threadIdx.x` (section 6).

# %%
from numba import cuda


@cuda.jit(fastmath=True)
def copy(x, out):
    """out[i] = x[i] for this thread's global index i.

    x, out: float32[n].  Launched with n / 32 blocks of 32 threads: one thread per float.
    """
    pass

# %%
from ropelab.grader import steps

verdict = steps.check(copy, "00.1")

# %% [markdown]
# `verdict.show()` draws the kernel you just graded on the step's small case: which thread
# wrote each element of `out` (colour = block, number = global thread), which read `x` (where
# the step has one), your output beside the reference with wrong cells outlined, and each
# thread's reads and writes.  With the empty starter nothing is written yet: run it again once
# `copy` has a body, and after every failing verdict.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Step 00.2: guard, the grid rounded up to whole blocks
#
# Arrays rarely hold a multiple of 32 floats.  The launch now has `ceil(n / 32)` blocks of 32
# threads, so the last block usually has threads past the end of the array.  Such a thread must
# not touch memory: on the simulator (and here) its index raises an error, on a GPU it reads or
# overwrites whatever lies after the array.

# %%
from numba import cuda


@cuda.jit(fastmath=True)
def copy_guarded(x, out, n):
    """out[i] = x[i] for every i < n; threads with i >= n do nothing.

    x, out: float32[n]; n: int64.  Launched with ceil(n / 32) blocks of 32 threads.
    """
    pass

# %%
verdict = steps.check(copy_guarded, "00.2")

# %% [markdown]
# ### Step 00.3: rotate, one thread per pair
#
# Now RoPE itself, with the angles done for you: `cos_t[p]` and `sin_t[p]` hold the cosine and
# sine of pair `p`'s angle (computed in float64 on the host, pair after pair, row after row).
# Thread `p` rotates pair `p`, the floats `x[2p]` and `x[2p + 1]` (the interleaved layout of
# section 4):
#
# $$\text{out}[2p] = x_0 \cos\theta_p - x_1 \sin\theta_p, \qquad
# \text{out}[2p + 1] = x_0 \sin\theta_p + x_1 \cos\theta_p,$$
#
# where $x_0$ is `x[2p]`, $x_1$ is `x[2p + 1]`, and $\cos\theta_p$, $\sin\theta_p$ are
# `cos_t[p]`, `sin_t[p]`.  Guard with the number of pairs.  The grader launches blocks of 64
# threads on 1x2, 3x10 and 5x130 floats (1, 15 and 325 pairs).

# %%
from numba import cuda


@cuda.jit(fastmath=True)
def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    """Thread p < n_pairs rotates pair p: (x[2p], x[2p+1]) by the angle whose cosine is
    cos_t[p] and sine is sin_t[p], into out[2p] and out[2p+1].

    x, out: float32[2 * n_pairs]; cos_t, sin_t: float32[n_pairs]; n_pairs: int64.
    Launched with ceil(n_pairs / 64) blocks of 64 threads.
    """
    pass

# %%
verdict = steps.check(rotate_pairs, "00.3")

# %% [markdown]
# ### Step 00.4: the launch
#
# So far the grader chose the grid.  Now you do: write the host function that launches your
# `rotate_pairs` over `n_pairs` pairs, `rotate_pairs[blocks, threads](x, out, cos_t, sin_t,
# n_pairs)`.  Pick the threads per block (a multiple of 32, at most 1024) and enough blocks
# that every pair has a thread.  The grader records your launch and checks that every pair is
# covered, that no block is wholly idle, and that a GPU would accept the configuration.

# %%
def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    """Launch rotate_pairs on these device arrays so that every one of the n_pairs pairs has a
    thread: threads per block at most 1024, blocks = enough to cover n_pairs, none idle.
    """
    pass

# %%
verdict = steps.check(launch_rotate_pairs, "00.4")

# %% [markdown]
# ### Step 00.5: one thread per float
#
# The last step turns the mapping around: one thread per **float**, as the copy was.  Thread
# `i` writes `out[i]` alone, so it must find its pair: both floats of pair `i // 2` turn by
# `cos_t[i // 2]` and `sin_t[i // 2]`; an even `i` is the first float of its pair,
# `out[i] = x[i] * c - x[i + 1] * s`, an odd `i` the second, `out[i] = x[i - 1] * s + x[i] * c`.
# Guard with `n`, the number of floats.  On a pass the grader shows your kernel's instruction
# census next to ropelab's `flat` kernel (notebook 01), and on a GPU the next cell times it
# against a device copy of the same bytes.

# %%
from numba import cuda


@cuda.jit(fastmath=True)
def rotate_elements(x, out, cos_t, sin_t, n):
    """Thread i < n writes out[i], the rotated float i: its pair is i // 2, turned by cos_t[i // 2]
    and sin_t[i // 2]; threads with i >= n do nothing.

    x, out: float32[n], n = tokens * hidden; cos_t, sin_t: float32[n / 2]; n: int64.
    Launched with ceil(n / 64) blocks of 64 threads.
    """
    pass

# %%
verdict = steps.check(rotate_elements, "00.5")

# %%
# NBVAL_IGNORE_OUTPUT
# On a GPU, a passing kernel is timed against a device copy of the same bytes; nothing is
# timed on the simulator.
verdict.time()
