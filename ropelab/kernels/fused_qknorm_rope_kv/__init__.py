"""The serving op's kernel: QK-RMSNorm + RoPE, and the K/V write into a paged KV cache, in one
launch (``ropelab.fused_qknorm_rope_kv``).

What a serving engine does for every token of a ragged batch (the tokens of several requests
flattened into one ``qkv``, each with its own position) before attention: normalize and rotate
Q and K, then store K and V at the token's *slot* of the paged cache (vLLM's ``slot_mapping``:
``slot = block * block_size + offset``; a negative slot is padding and writes nothing).  Done
as ``fused_qknorm_rope`` and then a scatter, K makes two trips through memory (written back
into qkv, read again by the scatter) and V one more (read by the scatter); here each element of
qkv is read once and each output written once.

Cache layout: vLLM's flash layout, ``[num_blocks, block_size, num_kv_heads, head_dim]`` for K
and for V, C-contiguous.  The kernel sees each cache as rows of ``num_kv_heads * head_dim``,
one row per slot, so the block size never enters the address arithmetic: ``row = slot``.

Mapping (a subset of the fused kernel's, :mod:`ropelab.kernels.fused_qknorm_rope`): a group of
``G`` lanes per head, ``G`` = 16 for 16-bit storage (two heads per warp, 16 bytes a lane at
``head_dim`` 128) and 32 for float32 or where NeoX's halves would not fill whole lanes of 16;
one head per group.  A token's warps are its Q and K warps, then its V warps, so whether a warp
normalizes (shuffles) or only copies is decided per warp and the shuffles stay warp-uniform.
Q and K heads are normalized exactly as the fused kernel does it, in the same order of float32
operations (the sum of squares in element order, the same butterfly, the scale riding on cos
and sin), so with the same storage the Q this kernel writes and the K it stores are the fused
kernel's, bit for bit on the simulator.  Q goes back to qkv (or to ``q_out``), K to its cache
row; V heads are never normalized: a bit copy into a same-dtype cache, or scaled and rounded
to e4m3.  Block shape and token rows as in the fused kernel: 8 warps a block.

FP8 caches (``torch.float8_e4m3fn`` bits, one byte each) take ``e4m3(v * (1 / scale))`` with a
per-tensor scale for K and one for V (:mod:`ropelab.fp8`: round to nearest even, saturating at
448, integer work only).  K is first rounded to qkv's storage dtype, the value the unfused
chain (``fused_qknorm_rope``, then a cast of the cache's rows) would convert, so the cache is
that chain's bit for bit; for float32 storage no extra rounding happens.

Errors: a position without a row in the cos/sin cache writes that token's Q and K as NaN and
records the position in the device error word (as the fused kernel); a device slot at or past
the cache's ``num_blocks * block_size`` writes nothing for that token and is recorded in the
word's second entry (:func:`ropelab.check_errors` reads both).  Host slots never reach the
kernel unchecked.
"""

# The package: runs (how a lane moves its elements), kernel (device code), host (problem,
# mapping and plan; not "plan", which would clash with the function).
from .kernel import KERNEL, make_kernel  # noqa: F401
from .host import (  # noqa: F401
    NAME, OPTIONS, SUMMARY, VARIANT, KVProblem, caller_dtypes, census_plans, lanes_per_head,
    launch_config, plan, scalar_args, warps_per_token)
