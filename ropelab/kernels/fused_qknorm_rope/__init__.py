"""Fused QK-RMSNorm + RoPE, in place on a packed ``qkv`` buffer (SGLang's ``fused_qknorm_rope``).

``qkv`` is ``[tokens, (heads_q + heads_k + heads_v) * head_dim]``, each row ``[Q | K | V]``.  For
every token and every Q and K head: RMSNorm over ``head_dim`` in float32 (``x * rsqrt(mean(x**2)
+ eps) * weight``, one weight vector for all Q heads and one for all K heads), then RoPE on the
first ``rotary_dim`` dims, written back where it came from.  V is never read nor written.

Out of place (``make_kernel(..., out_of_place=True)``, the public ``out=``, autograd's
functional forward): the kernel reads ``qkv`` and writes a second array ``out`` of the same
layout, so the result costs one pass over memory instead of a copy of ``qkv`` and then the
in-place pass.  Q and K go through the same device code (the body takes a destination; the
in-place builds pass ``qkv`` as both, and their PTX is what it was before the destination
existed); each token's V heads get warps of their own after its Q and K warps, ``HPW`` heads a
warp, and copy their bits with lane-consecutive 16-byte accesses (one item at a time when an
array is not 16-byte aligned).

Mapping: a group of ``G`` lanes per (token, head), ``G`` = 32 (a whole warp) or 16 (half a
warp, two heads side by side).  Lane ``l`` of a group holds ``E = head_dim / G`` elements in
registers, so a head is read once and written once: the contiguous elements ``l*E .. l*E + E-1``
(GPT-J, and NeoX with partner shuffles), or, for NeoX with every dim rotated in 16-bit storage
(*split*), two runs of ``E / 2``: ``l*E/2 ..`` in the first half of the head and the same
offsets in the second half, so that both elements of each of the lane's pairs are its own.

* RMSNorm: each lane sums its squares; a ``shfl_xor_sync`` butterfly (16, 8, 4, 2, 1 for a whole
  warp; 8, 4, 2, 1 for half a warp: an xor below 16 never leaves the half) leaves the head's
  sum in every lane of its group, with no shared memory and no ``syncthreads``.
* Interleaved RoPE (GPT-J): ``E`` is even, so pair ``(2k, 2k+1)`` never straddles two lanes; each
  pair costs one frequency lookup and one sin/cos, shared by its two elements (the point of
  SGLang PR 21654).  Split NeoX pairs slot ``j`` of the two runs and costs the same.  The
  sin/cos of a lane's pairs depend on the token and the lane only: they are computed once and
  shared by every head the lane works on.
* Half-split RoPE (NeoX) with partner shuffles (partial rotary, float32): element ``d`` pairs
  with ``d + rotary_dim/2``, which lives ``half_lanes = rotary_dim / (2E)`` lanes away in the
  same group and register slot: one ``shfl_sync`` per slot fetches the partner, and sin/cos is
  computed per slot.  Every lane of the warp takes part in every shuffle (lanes outside the
  rotated range read themselves, lanes of a head past the end shuffle values they never store),
  so the calls are warp-uniform.  This needs ``rotary_dim`` to be a multiple of ``2E``; the
  public API checks it for ``G = 32``, and the plan keeps ``G = 32`` when ``G = 16`` would break
  it.  Measured on the H200 (``data/bench_fused/``, 11:20): the split mapping took 16-bit NeoX
  from 81-87% of the copy to 93-97%.
* When every dim rotates (``full_rotary``), the norm's scale and the attention factor ride on
  cos and sin (``c * scale * af``): two multiplies per pair instead of one per element and two
  per pair; a partial-rotary kernel tests each pair instead.

Heads per warp (``HPW``): the warp's ``32 / G`` groups side by side, times ``HPW * G / 32`` heads
each group handles one after the other (every load first, then the arithmetic).  The point is
bytes in flight (Little's law): a 16-bit head of 128 elements is only 256 bytes, so one head per
warp cannot keep enough loads outstanding to reach the copy rate.  Measured with a CUDA C++
kernel on the H200 (bf16, GPT-J, head_dim 128): 8-byte loads per lane with one head per warp
reached 72-74% of the copy, 16-byte loads with half a warp per head 93-96%.  So 16-bit storage
defaults to two heads per warp on 16-lane groups, each lane moving its 8 elements with one
128-bit access (``ld.global.v4.u32``).  A head past the end (an odd head count) reads the last
head instead and stores nothing: a select rather than a branch around the loads.

The grid is 2-D: ``blockIdx.x * blockDim.y + threadIdx.y`` is the token and ``blockIdx.y *
warps_per_block + warp`` the warp, so no thread divides by the number of heads (an integer
division is dozens of instructions, and at these sizes the instruction count, not DRAM, is what
a careless kernel runs out of first).  A block holds a row of warps for each of ``8 /
warps_per_block`` tokens, so blocks keep 8 warps even when a token needs only 2 (zimage's 30
head pairs: 64-thread blocks of one token reached 82% of the copy, 256-thread blocks of four
tokens 91%, same run).  Index arithmetic is 32-bit: numba widens ``uint32 op uint32`` to 64
bits, so every step is cast back (the launcher refuses buffers of 2**32 elements or more).

Frequencies come from a float32 table ``inv_freq[rotary_dim / 2]`` built on the host in float64
(YaRN blend included) rather than from an in-kernel ``pow``: the kernel is bound by memory and
the table (at most 1 KiB) stays in L1 after the first warp of a block reads it, so the lookup is
cheaper than ``lg2.approx`` + ``ex2.approx``; the frequency is then exact to float32 rounding
instead of carrying fast-math ``pow`` error that the angle multiplies by the position; and YaRN
costs the kernel nothing.  ``ropelab.kernels.freq_table`` makes the same choice for plain RoPE.

Long contexts (``cache=True``): the float32 angle ``position * inv_freq`` is off by up to
``angle * 2**-23`` rad, about 1e-2 at position 131072, and fast-math sin/cos add more.  The cache
kernel instead reads ``cos`` and ``sin`` from float32 tables ``[max_positions, rotary_dim / 2]``
computed in float64 on the host (YaRN blend included): exact to float32 rounding at every
position.  A position outside ``[0, max_positions)`` cannot be looked up: that token's Q and K
heads are written as NaN and the position is stored in the device error word (``errors[0]``),
which :func:`ropelab.check_errors` reads.

Storage dtypes: float32, float16, and bfloat16 as ``uint16`` bit patterns (see
:mod:`ropelab.bf16`); all arithmetic is float32 and shuffles carry float32 only.  Memory access
per lane, when ``qkv`` and both weights start on a 16-byte boundary: 16-bit storage moves as
32-bit words through 128-bit (or, when a lane holds 4 elements, 64-bit) vector accesses
(:mod:`ropelab.kernels.vec`) and :mod:`ropelab.kernels.words16` converts the words; float32 with
a multiple of 4 elements per lane uses 128-bit ``float4`` accesses.  Otherwise bfloat16 moves as
single 32-bit words of two elements, float32 and float16 one element at a time.  One kernel is
built per (head size, layout, storage, access width, heads per warp, lanes per head, cache) by
:func:`make_kernel`, because the number of registers a lane holds must be a compile-time
constant for them to stay in registers.
"""

# The package: mapping (lanes, warps, blocks), kernel (device code), host (its plan: arguments,
# tables, options; a module not called "plan" so that it does not clash with the function).
from .mapping import (  # noqa: F401  (the names callers used from the single module)
    BLOCK_WARPS, HEAD_DIMS, HEADS_PER_WARP, HEADS_PER_WARP_CHOICES, LANES_PER_HEAD,
    LANES_PER_HEAD_CHOICES, STORAGES, WARP, launch_config, neox_fits, neox_split,
    pick_lanes_per_head, pick_warps_per_block, split_fits, vector_bytes_for)
from .kernel import KERNEL, make_kernel  # noqa: F401
from .host import (  # noqa: F401
    CALLER, NAME, OPTIONS, SUMMARY, VARIANT, cache_options, census_plans, plan, scalar_args)
