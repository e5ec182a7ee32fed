"""Notebook 10's ladder of graded steps (10_serving.ipynb): the paged KV-cache write of the
serving op, ``ropelab.fused_qknorm_rope_kv``, one piece a step.

1. the slot scatter: rows of K copied into the cache rows ``slot_mapping`` names, negative slots
   skipped, every other slot untouched; one thread per float, from an empty body;
2. FP8 e4m3 rounding, bit-exact against torch's ``float8_e4m3fn`` conversion of the scaled
   float32 value (nearest even, subnormals, saturating at 448, NaN with its sign); one thread
   per value, from an empty body;
3. the fused kernel's K/V write: K normalized (RMSNorm, a warp butterfly), weighted, rotated
   and stored at its slot, V copied, into one cache ``[2, slots, 64]``; one warp per token,
   from an empty body;
4. the launch for a ragged batch: positions from the requests' lengths (the on-ramp's prefix
   sum), a grid from the total number of tokens, the kernel of step 3.

The references are float64 (:mod:`ropelab.reference_kv` for the cache) and
:func:`ropelab.fp8.from_float32` for e4m3 (itself checked against torch); the cases are built
in :mod:`.nb10_cases`.  A slot no token maps to is NaN in the reference: it must stay
untouched.  Solutions and recorded wrong attempts: ``notebooks/solutions/10_serving.py``.
"""

from __future__ import annotations

import numpy as np

from ...bf16 import _float_bits
from ...kernels import fused_qknorm_rope_kv as kv
from ...problem import FusedProblem
from ..grading import Gate
from . import nb10_cases as c
from .base import Step
from .cases import BASE, NO_F64, butterfly_only, signature_of
from .contracts import blocks_exactly, threads_exactly

NOTEBOOK = "10_serving"
# A float32's bits as a uint32, in a kernel (the simulator's and the GPU's forms are ropelab's
# own): the e4m3 step reads them, and the notebook imports this name.
float_bits = _float_bits


def _reference(fp8: bool) -> dict:
    """The census's reference: ropelab's serving kernel for one float32 GPT-J head of 64 per
    kind, 32 lanes a head (the course's steps hold one head a warp)."""
    fused = FusedProblem(1, c.HEADS_Q, c.HEADS_K, c.HEADS_V, c.HEAD_DIM, c.HEAD_DIM, True,
                         "float32", c.EPS, BASE, inv_freq=np.ones(c.HEAD_DIM // 2))
    problem = kv.KVProblem(fused, 16, fp8, False, c.ROW)
    return dict(reference=("ropelab.kernels.fused_qknorm_rope_kv.kernel", "make_kernel",
                           [c.HEAD_DIM, True, "float32", 32, False, False, True, fp8, False]),
                reference_signature=signature_of(kv.VARIANT, {}, problem))


# A negative slot stops the simulator (its arrays check every index); a GPU's Numba kernel wraps
# it around to the end of the cache instead, where the alternatives of nb10_cases look for it.
NEGATIVE_SLOT = ("an index outside the cache: a padding token's slot is -1, so skip every "
                 "token whose slot is negative (on a GPU, Numba wraps a negative index around "
                 "and would overwrite the cache's last row); or a row past the cache's slots")

HAS_SHUFFLE = Gate("shfl", ">=", 1, "the PTX has no warp shuffle: the sum of squares of the K "
                                    "head is the shuffle butterfly's (cuda.shfl_xor_sync)")

KV_WRITE = Step(
    id="10.3", notebook=NOTEBOOK, kind="kernel",
    title="The fused kernel's K/V write: K normalized and rotated into its slot, V copied",
    kernel_name="write_kv",
    task=("one warp per token, lane l holding floats 2l and 2l + 1 of the K head and of the V "
          "head: skip the token when its slot is negative; K: RMSNorm (sum of squares by the "
          "butterfly, / 64, + eps), times k_weight, turned by positions[token] * inv_freq[l], "
          "into out[slot * 64 + 2l ...]; V: copied into out[(num_slots + slot) * 64 + 2l ...]"),
    arguments=("qkv", "k_weight", "positions", "slot_mapping", "inv_freq", "out", "tokens",
               "num_slots"),
    contract=(f"qkv: float32[tokens * {c.ROW}], a row per token: {c.HEADS_Q} Q heads, then K "
              f"(floats {c.K_AT}..{c.V_AT - 1}), then V, heads of {c.HEAD_DIM}; k_weight: "
              f"float32[{c.HEAD_DIM}]; positions: int32[tokens]; slot_mapping: int64[tokens] "
              f"(negative: padding); inv_freq: float32[{c.HEAD_DIM // 2}]; out: float32[2 * "
              f"num_slots * {c.HEAD_DIM}], the cache [2, num_slots, {c.HEAD_DIM}]: K rows, then "
              "V rows; tokens, num_slots: int64; eps = 1e-6"),
    launch_text=(f"one warp per token, {c.WARPS_PER_BLOCK} warps per block, grid ceil(tokens "
                 f"/ {c.WARPS_PER_BLOCK})"),
    signature=("void(float32[::1], float32[::1], int32[::1], int64[::1], float32[::1], "
               "float32[::1], int64, int64)"),
    counters=("instructions", "f64", "shfl", "sincos", "ld_global", "st_global"),
    gates=(NO_F64, HAS_SHUFFLE, butterfly_only("the K head's sum of squares")),
    **_reference(False),
    make_cases=c.kv_cases,
    ownership="lane l of token t's warp writes floats 2l and 2l + 1 of t's K row and V row",
    hint=("ss = k0*k0 + k1*k1, then ss += cuda.shfl_xor_sync(FULL_MASK, ss, m) for m = 16 .. 1; "
          "scale = 1 / sqrt(ss / 64 + eps); n = k * scale * k_weight; out[slot * 64 + 2l] = "
          "n0*c - n1*s, out[... + 1] = n0*s + n1*c; V copied at (num_slots + slot) * 64"),
    bounds_hint=("a warp past the last token ran: return (the whole warp) when token >= tokens; "
                 "or a cache index past its 2 * num_slots rows"),
    bounds_hints={"out": NEGATIVE_SLOT},
)

STEPS = [
    Step(
        id="10.1", notebook=NOTEBOOK, kind="kernel",
        title="The slot scatter: rows of K into the cache rows slot_mapping names",
        kernel_name="scatter_rows",
        task=("one thread per float of k: token t = i // (heads * head_dim), float c = the "
              "rest; if slot_mapping[t] >= 0, out[slot * heads * head_dim + c] = k[i]; every "
              "other cache float stays as it is"),
        arguments=("k", "slot_mapping", "out", "tokens", "heads", "head_dim"),
        contract=("k: float32[tokens * heads * head_dim], a row per token; slot_mapping: "
                  "int64[tokens], slot = block * block_size + offset, negative for padding; "
                  "out: float32[num_slots * heads * head_dim], the cache [num_blocks, "
                  "block_size, heads, head_dim] seen flat; tokens, heads, head_dim: int64"),
        launch_text=f"one thread per float of k, {c.THREADS} threads per block",
        signature="void(float32[::1], int64[::1], float32[::1], int64, int64, int64)",
        counters=("instructions", "f64", "ld_global", "st_global"),
        gates=(NO_F64,),
        **_reference(False),
        make_cases=c.scatter_cases,
        ownership="thread token * heads * head_dim + c writes float c of its token's slot row",
        hint=("row = heads * head_dim; t = i // row; slot = slot_mapping[t]; if slot >= 0: "
              "out[slot * row + i % row] = k[i]"),
        bounds_hint=("a thread past the last float of k ran: guard i < tokens * heads * "
                     "head_dim"),
        bounds_hints={"slot_mapping": "a thread past the last token read slot_mapping: guard "
                                      "i < tokens * heads * head_dim first",
                      "out": NEGATIVE_SLOT},
    ),
    Step(
        id="10.2", notebook=NOTEBOOK, kind="kernel",
        title="FP8 e4m3: the cache's rounding, bit for bit as torch rounds",
        kernel_name="e4m3_codes",
        task=("out[i] = the e4m3fn code (0 .. 255) of v = x[i] * inv_scale: round to nearest "
              "even (normal range: rebias the exponent, round 20 mantissa bits; below 2**-6: "
              "multiples of 2**-9), saturate at 448 (0x7E), NaN 0x7F, the sign in bit 7"),
        arguments=("x", "out", "inv_scale", "n"),
        contract=("x: float32[n]; out: float32[n], each a whole number 0 .. 255, the byte "
                  "torch.float8_e4m3fn stores for x[i] * inv_scale (a float32 product) once "
                  "it is clamped to [-448, 448] (torch's own cast of a value from 480 up "
                  "gives NaN); inv_scale: float32; n: int64; float_bits(v): v's bits as a "
                  "uint32.  On a GPU Numba computes uint32 + uint32 in 64 bits, where the "
                  "simulator wraps at 32: a sum that must wrap past 2**32 is wrapped "
                  "explicitly, uint32(a + b)"),
        launch_text=f"one thread per value, {c.THREADS} threads per block",
        signature="void(float32[::1], float32[::1], float32, int64)",
        counters=("instructions", "f64", "ld_global", "st_global"),
        gates=(NO_F64,),
        **_reference(True),
        make_cases=c.fp8_cases,
        ownership="thread i writes out[i]",
        hint=("b = float_bits(x[i] * inv_scale); a = b & 0x7FFFFFFF; normal: "
              "(a - (120 << 23) + 0x7FFFF + ((a >> 20) & 1)) >> 20; subnormal (a < 0x3C800000): "
              "float_bits(|v| + 2**14) - float_bits(2**14); a >= 448's bits: 0x7E; NaN: 0x7F; "
              "then | the sign (b >> 24) & 0x80"),
        bounds_hint="a thread past the last value ran: guard i < n",
    ),
    KV_WRITE,
    Step(
        id="10.4", notebook=NOTEBOOK, kind="launch",
        title="The launch for a ragged batch: positions from the requests' lengths",
        kernel_name="launch_kv_write",
        task=("tokens = sum(query_lens); positions[t] = context_lens[r] + (t - start[r]) for "
              "the token's request r, start the prefix sum of query_lens (on the host: the "
              "lengths are host tuples); positions as a device int32 array; write_kv, the one "
              f"kernel this step launches, with ceil(tokens / {c.WARPS_PER_BLOCK}) blocks of "
              f"{32 * c.WARPS_PER_BLOCK} threads"),
        arguments=("qkv", "k_weight", "slot_mapping", "inv_freq", "out", "query_lens",
                   "context_lens", "num_slots"),
        contract=("the arrays of step 10.3 on the device (no positions); query_lens, "
                  "context_lens: tuples of ints on the host, per request the new tokens (in "
                  "qkv, request after request) and the tokens already cached; num_slots: int"),
        launch_text=(f"ceil(tokens / {c.WARPS_PER_BLOCK}) blocks of {32 * c.WARPS_PER_BLOCK} "
                     "threads, tokens = sum(query_lens)"),
        make_cases=c.ragged_cases,
        launch_rules=(
            threads_exactly(lambda case: 32 * c.WARPS_PER_BLOCK,
                            f"{32 * c.WARPS_PER_BLOCK} (write_kv's {c.WARPS_PER_BLOCK} warps)"),
            blocks_exactly(lambda case: c.blocks(sum(case.inputs["query_lens"]),
                                                 c.WARPS_PER_BLOCK),
                           f"ceil(tokens / {c.WARPS_PER_BLOCK}), tokens = sum(query_lens)"),
        ),
        **KV_WRITE.launching(),
        hint=("starts = np.cumsum((0,) + query_lens[:-1]); positions = np.concatenate("
              "[np.arange(c, c + q) for q, c in zip(query_lens, context_lens)]); "
              "cuda.to_device(positions.astype(np.int32))"),
        bounds_hint=("positions holds one entry per token of the batch, sum(query_lens): the "
                     "kernel reads positions[token] for every token below tokens"),
    ),
]
