# %% [markdown]
# # On-ramp — fourteen small kernels before notebook 00
#
# This notebook is the way in.  It asks you to write fourteen GPU functions, most of them one
# to three lines long, from squaring an array to the attention scores of rotated queries and
# keys.  Each is graded the moment you run the cell after it, and each is a piece that a
# later notebook builds on: the puzzle says which one.
#
# **What it assumes:** Python (functions, `if`, `for`, `while`, integer division `//` and
# remainder `%`) and NumPy arrays (`float32` and `int32`, indexing `x[i]`).  Nothing about
# GPUs: every word the puzzles need is defined where it first appears, in *italics*.
#
# **What it needs:** no GPU.  On a machine without one, ropelab runs your functions on the
# *Numba CUDA simulator*, which executes GPU code in ordinary Python, slowly but faithfully,
# and checks every array index on the way.  On a GPU the same cells run there.

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

from ropelab.grader import steps

print(ropelab.format_description())

# %% [markdown]
# ## How a GPU runs your function
#
# A *kernel* is a function that the GPU runs many times at once.  Each run is a *thread*: the
# same code, on its own data.  You start a kernel with a *launch*, written
# `my_kernel[blocks, threads_per_block](arguments)`: it creates a *grid* of `blocks` *blocks*,
# each of `threads_per_block` threads (at most 1024).  A thread tells itself apart from the
# others by three numbers that the kernel reads:
#
# * `cuda.threadIdx.x`: its number inside its block, `0 .. threads_per_block - 1`;
# * `cuda.blockIdx.x`: its block's number in the grid, `0 .. blocks - 1`;
# * `cuda.blockDim.x`: the number of threads per block, the same for every block.
#
# A kernel returns nothing: it writes its results into an array it was given, here always
# `out`.  The GPU runs the threads of a block in groups of 32 consecutive threads, called
# *warps*; puzzles ramp.1 to ramp.10 do not need to know it, puzzle ramp.11 does.
#
# In Python (with Numba, a compiler of Python for GPUs), a kernel is a function under the
# decorator `@cuda.jit`.  A kernel that adds one to every float, launched with one thread per
# float, reads like this:
#
# ```python
# @cuda.jit
# def add_one(x, out):
#     i = cuda.threadIdx.x
#     out[i] = x[i] + 1
#
# add_one[1, 5](x, out)  # one block of 5 threads, for 5 floats
# ```
#
# ## How the puzzles are graded
#
# Each puzzle gives you a cell with the function's name, its arguments, a docstring that
# states its contract (what each argument holds, how the grader launches it, what `out` must
# hold afterwards) and `pass`.  Replace `pass` with your lines, run the cell, then run the
# cell below it: `steps.check(your_function, "ramp.1")` launches it on a few small arrays
# (from puzzle ramp.3 on, of sizes that fill no block evenly), compares every element of `out`
# with the answer computed in float64 NumPy (float32 rounding is allowed for: the verdict
# prints the tolerance), and prints either `PASS` or the first element that is wrong, with
# what was expected, what your function wrote, and a hint.  It also catches an index past the end of an array (the
# simulator checks every one), a write into an input, and a function that never finishes
# (stopped after 30 seconds).  A wrong function never stops the notebook: fix it and run
# both cells again.  Until you write a body, the verdict says "not solved yet"; after a
# failing one, a line starting `first kernel?` says what the grader's words mean.
#
# `verdict.show()` draws what the graded function did: which thread wrote each element of
# `out`, your output beside the expected one with the wrong elements outlined, and each
# thread's reads and writes.  Call it after any check.  Stuck?  `steps.hint("ramp.1")` gives
# a hint, one level more each time you call it: a direction, then the structure, then the key
# line (every failing verdict ends by saying so).  `steps.progress()` lists the puzzles and
# steps you have passed, kept on your machine, and `steps.reset_progress()` forgets them.  The
# solutions, and the mistakes the grader recognizes, are in `notebooks/solutions/00_on_ramp.py`.
#
# ### Puzzle ramp.1 — Map
#
# Square every float: thread `i` writes `out[i] = x[i] * x[i]`.  The grader launches one block
# with exactly as many threads as `x` has floats, so thread `i`'s number in the block,
# `cuda.threadIdx.x`, is the index of its float.
#
# **Comes back in** notebook 06: *RMSNorm* (root-mean-square normalization: a vector divided by
# the square root of the mean of its squares) squares every float of a head before adding the
# squares up (puzzle ramp.10 adds them).

# %%
from numba import cuda, float32


@cuda.jit
def square(x, out):
    """out[i] = x[i] * x[i] for thread i.

    x, out: float32[n].  Launched with one block of n threads: thread i is cuda.threadIdx.x.
    """
    pass

# %%
verdict = steps.check(square, "ramp.1")

# %% [markdown]
# The drawing of the empty starter: nobody wrote anything yet.  Run it again once `square` has
# a body, and after any failing verdict.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Puzzle ramp.2 — Zip
#
# Two inputs, one output: `out[i] = x[i] * weight[i]`.  Same launch: one block, one thread per
# float.
#
# **Comes back in** notebook 06: after normalizing a head, RMSNorm multiplies float `i` by its
# learned weight `weight[i]`.

# %%
@cuda.jit
def weigh(x, weight, out):
    """out[i] = x[i] * weight[i] for thread i.

    x, weight, out: float32[n].  Launched with one block of n threads.
    """
    pass

# %%
verdict = steps.check(weigh, "ramp.2")

# %% [markdown]
# ### Puzzle ramp.3 — Guard
#
# Now the block has 32 threads whatever the length `n` of `x`, so when `n < 32` some threads
# have no float.  Such a thread must not touch memory: an index past the end of an array
# stops the kernel on the simulator, and on a GPU it silently reads or overwrites whatever
# lies after the array.  Scale the floats that exist, `out[i] = x[i] * scale`, and let the
# other threads do nothing (`scale` is `1/sqrt(8)`, a number puzzle ramp.13 explains).
#
# **Comes back in** every kernel from notebook 00 on: arrays rarely fill whole blocks, so each
# kernel starts by sending its extra threads home (step 00.2).

# %%
@cuda.jit
def scale_guarded(x, out, scale, n):
    """out[i] = x[i] * scale for every i < n; threads with i >= n do nothing.

    x, out: float32[n], n <= 32; scale: float32; n: int64.  Launched with one block of 32
    threads.
    """
    pass

# %%
verdict = steps.check(scale_guarded, "ramp.3")

# %% [markdown]
# ### Puzzle ramp.4 — Several blocks
#
# One block holds at most 1024 threads, so a long array needs several.  The grader now
# launches blocks of 8 threads, as many as cover `n` (`ceil(n / 8)`).  `cuda.threadIdx.x`
# alone repeats in every block (0 to 7); a thread's number in the *whole grid* is
# `cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x`: block 2's thread 3 is thread
# 19.  Numba writes the same thing as `cuda.grid(1)`.  The last block may again have threads
# past the end.
#
# **Comes back in** notebook 01: its `flat` kernel gives every pair of floats a thread by this
# global number.

# %%
@cuda.jit
def scale_blocks(x, out, scale, n):
    """out[i] = x[i] * scale for every i < n, i the thread's number in the whole grid.

    x, out: float32[n]; scale: float32; n: int64.  Launched with ceil(n / 8) blocks of 8
    threads.
    """
    pass

# %%
verdict = steps.check(scale_blocks, "ramp.4")

# %% [markdown]
# ### Puzzle ramp.5 — The launch
#
# So far the grader chose the grid.  Now you do: write a plain Python function (no
# `@cuda.jit`) that launches your `scale_blocks` from puzzle ramp.4 over `n` floats,
# `scale_blocks[blocks, threads](x, out, scale, n)`.  Pick the threads per block (a multiple
# of 32, at most 1024; 256 is a common choice) and enough blocks that every float has a
# thread: round `n / threads` *up*.  The grader's longest array has 1500 floats, more than
# one block can hold.  It records your launch and checks that every float is covered, that
# no block is wholly idle (none of its threads has a float), and that a GPU would accept the
# configuration.
#
# **Comes back in** every notebook's last step, where you write the launch of your kernel;
# notebook 02 meets the 1024-thread limit head on.

# %%
def launch_scale(x, out, scale, n):
    """Launch scale_blocks (puzzle ramp.4) so that each of the n floats has a thread: at most
    1024 threads per block, blocks = enough to cover n, none wholly idle.

    x, out: float32[n] (device arrays: on the GPU, or the simulator's); scale: float; n: int.
    """
    pass

# %%
verdict = steps.check(launch_scale, "ramp.5")

# %% [markdown]
# ### Puzzle ramp.6 — A 2-D grid over `[tokens, hidden]`
#
# A language model holds one vector of `hidden` floats per *token* (a word or a piece of one):
# a `[tokens, hidden]` array, stored in memory row after row, so element `(t, h)` sits at
# `x[t * hidden + h]`.  Grids and blocks can have two dimensions, and such an array is
# naturally covered by a 2-D grid: the grader launches blocks of 8 x 4 threads, 8 along a row
# (`x`) and 4 rows (`y`), as many blocks as cover the array in both directions.
# `cuda.grid(2)` returns the thread's two global coordinates, `x` first: the column `h`, then
# the row `t`.  Multiply each element by its column's weight; guard both coordinates, since
# the last blocks stick out past the right edge and past the bottom.  (`verdict.show()` draws a
# 2-D puzzle as the array is, a row per token: once your kernel passes, its colours show the
# blocks tiling the array, 8 floats wide and 4 rows high.)
#
# **Comes back in** notebook 06: its grid is two-dimensional, tokens along `x` and the heads
# of each token along `y`.

# %%
@cuda.jit
def weigh_rows(x, weight, out, tokens, hidden):
    """out[t * hidden + h] = x[t * hidden + h] * weight[h] for the thread at column h, row t.

    x, out: float32[tokens * hidden], rows one after the other; weight: float32[hidden];
    tokens, hidden: int64.  Launched with a 2-D grid of blocks of 8 x 4 threads
    (x: along the row, y: along the tokens) covering the whole array.
    """
    pass

# %%
verdict = steps.check(weigh_rows, "ramp.6")

# %% [markdown]
# ### Puzzle ramp.7 — Broadcast: the angle table
#
# The rest of the course computes *RoPE*, the rotary position embedding that most current
# language models use to tell attention where each token sits.  RoPE splits each token's
# vector into pairs of floats and turns pair `j` of the token at position `positions[t]` by
# the angle `positions[t] * inv_freq[j]`, where `inv_freq` falls from one radian per
# position (pair 0) to nearly nothing (the last pair).  Build the table of all those angles:
# a column (`positions`, one per token) times a row (`inv_freq`, one per pair), one thread per
# entry, on the same kind of 2-D grid.  Note `float32(positions[t])`: Numba computes an
# int32 times a float32 in float64; converting first keeps the product in float32, as the
# course's kernels do.
#
# **Comes back in** notebook 01, whose kernels compute this angle in every thread, and
# notebook 04, which tabulates its cosine and sine once instead.

# %%
@cuda.jit
def angle_table(positions, inv_freq, out, tokens, pairs):
    """out[t * pairs + j] = positions[t] * inv_freq[j] for the thread at column j, row t.

    positions: int32[tokens]; inv_freq: float32[pairs]; out: float32[tokens * pairs];
    tokens, pairs: int64.  Launched with a 2-D grid of blocks of 8 x 4 threads
    (x: along the pairs, y: along the tokens) covering the whole table.
    """
    pass

# %%
verdict = steps.check(angle_table, "ramp.7")

# %% [markdown]
# ### Puzzle ramp.8 — The pair swap, interleaved (GPT-J)
#
# To turn the pair `(a, b)` by an angle `θ`, RoPE computes `(a cos θ - b sin θ, a sin θ +
# b cos θ)`: that is `x * cos θ + swap(x) * sin θ`, where `swap` sends `(a, b)` to `(-b, a)`.
# Which two floats form a pair is a convention.  The *interleaved* one (GPT-J's, and the
# course's kernels until notebook 06) pairs neighbours, floats `2p` and `2p + 1`.  Write the
# swap: one thread per float, one block per token (the grader launches blocks of `hidden`
# threads); a thread's partner is its neighbour, `i + 1` for an even `i`, `i - 1` for an odd
# one.
#
# **Comes back in** notebooks 00 to 05: every kernel there rotates interleaved pairs with
# exactly this swap hidden inside.

# %%
@cuda.jit
def swap_pairs(x, out):
    """Each pair (x[2p], x[2p+1]) becomes (out[2p], out[2p+1]) = (-x[2p+1], x[2p]).

    x, out: float32[tokens * hidden], rows one after the other, hidden even.  Launched with
    one block per token of hidden threads: one thread per float.
    """
    pass

# %%
verdict = steps.check(swap_pairs, "ramp.8")

# %% [markdown]
# ### Puzzle ramp.9 — A row staged in shared memory: the half-split swap (NeoX)
#
# The other convention, *half-split* (GPT-NeoX's, and Llama's in Hugging Face
# transformers), pairs float `j` of a row with float `j + hidden/2`: the swap is
# `rotate_half`, `(first half, second half)` becoming `(-second half, first half)`.
#
# Do it through *shared memory*: a small, fast memory that the threads of one block share
# (and only they).  `row = cuda.shared.array(64, float32)` gives the block an array of 64
# floats (its size must be a constant; the rows here have at most 64 floats).  Each thread
# stores its own float of the token's row there, then reads its partner's.  But threads run
# in no fixed order: the partner may not have stored its float yet.  Two threads touching
# the same element of shared memory, at least one of them writing, with nothing ordering
# them, is a *race*: the result depends on timing.  The cure is a *barrier*,
# `cuda.syncthreads()`: no thread of the block goes past it until every thread has reached
# it.  So: store, barrier, read.  The grader watches every shared element and reports a race
# even when the numbers happen to come out right.
#
# **Comes back in** notebook 06, whose half-split mode is this pairing, and notebook 04, which
# stages its table of frequencies in shared memory (step 04.2).

# %%
@cuda.jit
def rotate_half(x, out):
    """Stage the token's row in shared memory, then out[j] = -row[j + hidden/2] for
    j < hidden/2 and out[j] = row[j - hidden/2] for the second half (j: the float's index in
    its row; row: the token's hidden floats).

    x, out: float32[tokens * hidden], rows one after the other, hidden even and at most 64.
    Launched with one block per token of hidden threads: one thread per float.
    """
    pass

# %%
verdict = steps.check(rotate_half, "ramp.9")

# %% [markdown]
# ### Puzzle ramp.10 — A block reduction: a row's sum of squares
#
# A reduction turns many numbers into one.  Each block owns a row of `n` floats (one thread
# per float) and writes one number, the sum of the row's squares, to `out[row]`.  Each thread
# stores its square in a shared array; after a barrier, one thread (say `threadIdx.x == 0`)
# adds them all up and writes the result.  (Another order halves the number of partial sums
# at each step, a tree, with a barrier after each; any correct order passes.)
#
# **Comes back in** notebook 06: RMSNorm divides a head by the square root of its mean square,
# and step 06.2 gathers a head's sum of squares through shared memory like this.

# %%
@cuda.jit
def row_sum_squares(x, out):
    """out[r] = x[r*n]**2 + ... + x[r*n + n - 1]**2 for block r, which owns row r.

    x: float32[rows * n], n a power of two, at most 64; out: float32[rows].  Launched with one
    block per row of n threads (n is cuda.blockDim.x).
    """
    pass

# %%
verdict = steps.check(row_sum_squares, "ramp.10")

# %% [markdown]
# ### Puzzle ramp.11 — A warp shuffle: every lane gets the sum
#
# The 32 threads of a warp are its *lanes* (lane `threadIdx.x % 32`).  They can hand values to
# each other directly, without shared memory or a barrier, by a *warp shuffle*:
# `cuda.shfl_xor_sync(0xFFFFFFFF, v, m)` returns the value `v` held by the lane whose number
# is `lane ^ m`: yours with the bits of `m` flipped (the mask `0xFFFFFFFF` says that all 32
# lanes take part, and all 32 must reach the call).  Adding your partner's value at `m = 16`, then 8, 4, 2 and 1 leaves the
# sum of the warp's 32 floats in *every* lane: a butterfly.  Each block here is one warp;
# every lane writes the warp's sum.
#
# **Comes back in** notebook 06: step 06.1 is this butterfly, giving every lane of a warp its
# head's sum of squares.

# %%
@cuda.jit
def warp_sum(x, out):
    """out[i] = the sum of the 32 floats of thread i's warp, written by every lane.

    x, out: float32[32 * warps].  Launched with one block of 32 threads (one warp) per 32
    floats: the warp's floats are x[32 w .. 32 w + 31].
    """
    pass

# %%
verdict = steps.check(warp_sum, "ramp.11")

# %% [markdown]
# ### Puzzle ramp.12 — A dot product
#
# Attention compares a query `q` with a key `k`, two vectors of `d` floats, by their dot
# product `q · k = q[0] k[0] + ... + q[d-1] k[d-1]`.  Here one thread per token computes its
# query's dot product with its own key, with an ordinary `for` loop: `total` starts at
# `float32(0)` and adds one product per step.  The threads past the last token do nothing.
#
# **Comes back in** puzzle ramp.13, where every thread runs this loop, and notebook 08: the
# gradient of RMSNorm needs one dot product per head.

# %%
@cuda.jit
def dot_rows(q, k, out, tokens, d):
    """out[t] = q[t*d] * k[t*d] + ... + q[t*d + d - 1] * k[t*d + d - 1] for thread t < tokens.

    q, k: float32[tokens * d], a head of d floats per token; out: float32[tokens];
    tokens, d: int64.  Launched with ceil(tokens / 32) blocks of 32 threads.
    """
    pass

# %%
verdict = steps.check(dot_rows, "ramp.12")

# %% [markdown]
# ### Puzzle ramp.13 — A tiled `Q Kᵀ` in shared memory, and what RoPE does to it
#
# Attention scores every query against every key: `scores[m, n] = q[m] · k[n]`, a
# `tokens x tokens` matrix, `Q Kᵀ` (real models then multiply it by `1/sqrt(d)`, the `scale`
# of puzzle ramp.3).  Every query row is needed by a whole row of scores and every key by a
# whole column, so a block of 8 x 8 threads first stages its 8 queries and 8 keys in shared
# memory (a *tile*) and then each thread computes one score from the tiles.  One shared array
# holds both tiles: `tiles = cuda.shared.array((2, 8, 8), float32)`, `tiles[0]` the queries
# and `tiles[1]` the keys.  Block `(bx, by)` scores queries `8 by .. 8 by + 7` against keys
# `8 bx .. 8 bx + 7`; heads have 8 floats, so thread `(tx, ty)` loads one float of each tile.
#
# The inputs show RoPE's point.  Every token starts with the *same* query vector and the same
# key vector; RoPE then rotates token `t`'s by its position `t`.  A rotation by `m` against a
# rotation by `n` leaves only `n - m` in the dot product, so a score depends on how far apart
# two tokens are, not on where they are: every diagonal of the matrix holds one number.  The
# grader's 8-token answer, computed in float64 NumPy:

# %%
answer = steps.get("ramp.13").cases()[0].expected  # what the grader compares your scores with
for row in answer:
    print(" ".join(f"{value:6.2f}" for value in row))
spread = max(np.ptp(np.diagonal(answer, offset)) for offset in range(-7, 8))
print("largest difference along any diagonal below 1e-6:", bool(spread < 1e-6))

# %% [markdown]
# **Comes back in** notebook 00, section 3, which checks the property on random vectors: RoPE
# exists for this matrix.

# %%
@cuda.jit
def qk_scores(q, k, out, tokens):
    """out[m * tokens + n] = q[m] . k[n] for the thread that owns query m and key n, through a
    shared array holding the block's 8 queries (tiles[0]) and 8 keys (tiles[1]).

    q, k: float32[tokens * 8], a head of 8 floats per token; out: float32[tokens * tokens];
    tokens: int64, a multiple of 8.  Launched with a 2-D grid of (tokens / 8, tokens / 8)
    blocks of 8 x 8 threads: thread (tx, ty) of block (bx, by) owns query 8 by + ty and key
    8 bx + tx.
    """
    pass

# %%
verdict = steps.check(qk_scores, "ramp.13")

# %% [markdown]
# The drawing puts the expected matrix beside yours: look along the diagonals.

# %%
verdict.show()
plt.show()

# %% [markdown]
# ### Puzzle ramp.14 — A prefix sum: lengths to offsets
#
# A server packs several sequences of different lengths into one `[tokens, hidden]` array, one
# after the other (a *ragged batch*).  Sequence `i` starts at row `offsets[i]`, the sum of the
# lengths before it: lengths `[3, 5, 2]` give offsets `[0, 3, 8, 10]`, the last one the total.
# That running total is a *prefix sum*.  One block of 32 threads: thread `i <= n` adds the
# lengths before sequence `i` and writes `out[i]` (the offsets are whole numbers, exact in
# `out`'s float32).
#
# **Comes back in** no later notebook: ropelab takes one position per token, and in a ragged
# batch token `t` of sequence `i` has position `t - offsets[i]`.  Serving engines build these
# offsets for every batch (FlashAttention's variable-length functions take them as
# `cu_seqlens`).

# %%
@cuda.jit
def seq_offsets(lengths, out, n):
    """out[i] = lengths[0] + ... + lengths[i - 1] for i = 0 .. n: out[0] = 0, out[n] = the
    total; threads with i > n do nothing.

    lengths: int32[n], n <= 31; out: float32[n + 1]; n: int64.  Launched with one block of
    32 threads.
    """
    pass

# %%
verdict = steps.check(seq_offsets, "ramp.14")

# %% [markdown]
# ## Next
#
# That is every building block the course uses.  Notebook 00 puts them together: the math of
# RoPE, its two layouts, the float64 reference that judged these puzzles, what a GPU is made
# of, and a first RoPE kernel written from the map and the guard of this notebook.
