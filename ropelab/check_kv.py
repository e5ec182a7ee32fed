"""The serving op against its float64 reference (:mod:`ropelab.reference_kv`): random inputs,
one call, and a verdict on every output: Q, each written cache row, each untouched row.

Tolerances: Q and a K cache of qkv's dtype get the fused kernel's budget
(:func:`ropelab.tolerance.fused_atol`); V in a cache of qkv's dtype must be its bits; an FP8
entry may be off by half an e4m3 step (``2**-4`` of the value, or ``2**-10 * scale`` among the
subnormals) beyond the budget of the value it converts.  Every output is judged elementwise as
``|got - want| / bound``, so one number per output says how close it is to failing (1.0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import bf16, fp8, reference_kv, scaling
from .check import decode, random_inputs
from .ops.fused_kv import fused_qknorm_rope_kv
from .tolerance import fused_atol

FP8_REL = 2.0**-4  # half an e4m3 step, relative (3 mantissa bits)
FP8_SUB = 2.0**-10  # half the subnormal step 2**-9, times the scale


@dataclass
class KVCheck:
    """Worst ``|got - want| / bound`` of each output (<= 1 passes) and whether every slot no
    token names, and qkv's K and V columns, kept their bytes."""

    name: str
    q: float
    k: float
    v: float
    untouched: bool
    inputs_kept: bool

    @property
    def passed(self) -> bool:
        return max(self.q, self.k, self.v) <= 1.0 and self.untouched and self.inputs_kept


def encode(values: np.ndarray, storage: str) -> np.ndarray:
    if storage == "bfloat16":
        return bf16.from_float32(values.astype(np.float32))
    return values.astype(np.dtype(storage))


def kv_inputs(rng, *, tokens, heads, head_dim, storage, num_blocks=4, block_size=4, fp8_cache=False,
              max_position=4096, padding=1) -> dict:
    """Host inputs: ``random_inputs``' qkv, weights and positions, slots drawn without repeats
    from the cache (the first ``padding`` tokens get -1), and caches full of old values."""
    qkv, wq, wk, pos = random_inputs(rng, tokens, heads, head_dim, storage, max_position)
    _, hk, hv = heads
    capacity = num_blocks * block_size
    slots = rng.permutation(capacity)[:tokens].astype(np.int64)
    slots[:padding] = -1
    caches = []
    for h in (hk, hv):
        shape = (num_blocks, block_size, h, head_dim)
        old = rng.integers(0, 256, shape, dtype=np.uint8) if fp8_cache else \
            encode(rng.standard_normal(shape), storage)
        caches.append(old)
    return dict(qkv=qkv, q_weight=wq, k_weight=wk, positions=pos, slot_mapping=slots,
                k_cache=caches[0], v_cache=caches[1])


def _ratio(got, want, bound) -> float:
    if got.size == 0:
        return 0.0
    diff = np.abs(got - want)
    bad = ~np.isfinite(got) | ~np.isfinite(diff)
    return float("inf") if bad.any() else float(np.max(diff / bound))


def judge(before: dict, got: dict, *, heads, head_dim, storage, rotary_dim=None,
          interleave=True, yarn=None, norm="rms", fastmath=True, k_scale=1.0, v_scale=1.0,
          fp8_cache=False, cache=False, name="", plant=None) -> KVCheck:
    """The verdict on ``got`` (``q``: the Q columns in qkv's storage, ``k_cache``, ``v_cache``,
    ``qkv``: qkv after the call) for the call on ``before`` (the inputs as they were).

    ``plant``: ``(output, factor)`` moves the first element of one output (``"q"``, ``"k"``,
    ``"v"``) by ``factor`` times its bound before the verdict (V into a cache of qkv's dtype,
    judged by its bits: one flipped bit), to show that the verdict can fail."""
    hq, hk, hv = heads
    d = head_dim
    rd = rotary_dim or d
    y = scaling.as_fused_yarn(yarn)
    freqs, att = scaling.resolve(y, rotary_dim=rd, base=10000.0)
    dec = lambda a: decode(a, storage)  # noqa: E731
    args = dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d,
                q_weight=dec(before["q_weight"]), k_weight=dec(before["k_weight"]),
                slot_mapping=before["slot_mapping"], norm=norm, rotary_dim=rd,
                interleave=interleave, freqs=freqs, attention_factor=att)
    old = [fp8.dequantize(before[c], s) if fp8_cache else dec(before[c])
           for c, s in (("k_cache", k_scale), ("v_cache", v_scale))]
    q_want, k_want, v_want = reference_kv.fused_qknorm_rope_kv(
        dec(before["qkv"]), positions=before["positions"], k_cache=old[0], v_cache=old[1], **args)
    q_normed, k_normed, _ = reference_kv.fused_qknorm_rope_kv(  # before the rotation
        dec(before["qkv"]), positions=np.zeros_like(before["positions"]), k_cache=old[0],
        v_cache=old[1], **args)
    angle = float(np.abs(before["positions"]).max(initial=0)) * float(freqs.max())
    slots = before["slot_mapping"]
    rows = slots[slots >= 0]

    def budget(normed, want):
        return np.full(want.shape, fused_atol(
            float(np.abs(normed).max(initial=0)), float(np.abs(want).max(initial=0)), angle,
            storage, fastmath=fastmath, attention_factor=att, cache=cache))

    k_want, v_want = k_want.reshape(-1, hk, d)[rows], v_want.reshape(-1, hv, d)[rows]
    k_got, v_got = got["k_cache"].reshape(-1, hk, d)[rows], got["v_cache"].reshape(-1, hv, d)[rows]
    k_bound = budget(k_normed.reshape(-1, hk, d)[rows], k_want)
    # (got, want, bound) per output, all float64; V into a cache of qkv's dtype is its bits.
    judged = {"q": [dec(got["q"]), q_want, budget(q_normed, q_want)]}
    if fp8_cache:
        judged["k"] = [fp8.dequantize(k_got, k_scale).astype(np.float64), k_want,
                       k_bound + FP8_REL * np.abs(k_want) + FP8_SUB * k_scale]
        judged["v"] = [fp8.dequantize(v_got, v_scale).astype(np.float64), v_want,
                       FP8_REL * np.abs(v_want) + FP8_SUB * v_scale]
    else:
        judged["k"] = [dec(k_got), k_want, k_bound]
    v_source = before["qkv"].reshape(len(slots), hq + hk + hv, d)[slots >= 0, hq + hk:]
    v_bits = np.array(v_got).view(np.uint8)
    if plant is not None:
        output, factor = plant
        if output == "v" and not fp8_cache:  # exact: one bit of one element is enough
            v_bits = v_bits.copy()
            v_bits.flat[0] ^= 1
        else:
            values, _, bound = judged[output]
            values.flat[0] += factor * bound.flat[0]
    ratios = {name: _ratio(*parts) for name, parts in judged.items()}
    if not fp8_cache:
        ratios["v"] = 0.0 if np.array_equal(v_bits, np.array(v_source).view(np.uint8)) else \
            float("inf")
    others = np.setdiff1d(np.arange(got["k_cache"].shape[0] * got["k_cache"].shape[1]), rows)
    untouched = all(np.array_equal(got[c].reshape(-1, h, d)[others].view(np.uint8),
                                   before[c].reshape(-1, h, d)[others].view(np.uint8))
                    for c, h in (("k_cache", hk), ("v_cache", hv)))
    qcols = hq * d
    kept = np.array_equal(got["qkv"][:, qcols:].view(np.uint8),
                          before["qkv"][:, qcols:].view(np.uint8))
    return KVCheck(name, ratios["q"], ratios["k"], ratios["v"], bool(untouched), bool(kept))


def check_case(rng, *, tokens, heads, head_dim, storage, rotary_dim=None, interleave=True,
               yarn=None, norm="rms", fp8_cache=False, q_out=False, k_scale=0.5, v_scale=2.0,
               fastmath=True, cache=False, max_position=4096, plant=None, **layout) -> KVCheck:
    """Run the op once on random host inputs and judge it (``plant``: see :func:`judge`);
    ``layout``: ``num_blocks``, ``block_size``, ``padding`` of :func:`kv_inputs`."""
    inputs = kv_inputs(rng, tokens=tokens, heads=heads, head_dim=head_dim, storage=storage,
                       fp8_cache=fp8_cache, max_position=max_position, **layout)
    before = {k: v.copy() for k, v in inputs.items()}
    hq, hk, hv = heads
    scales = dict(k_scale=k_scale, v_scale=v_scale) if fp8_cache else {}
    q_dest = np.empty((tokens, hq * head_dim), inputs["qkv"].dtype) if q_out else None
    cached = dict(cache=True, max_positions=max_position) if cache else {}
    result = fused_qknorm_rope_kv(
        inputs["qkv"], num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=head_dim,
        q_weight=inputs["q_weight"], k_weight=inputs["k_weight"],
        positions=inputs["positions"], slot_mapping=inputs["slot_mapping"],
        k_cache=inputs["k_cache"], v_cache=inputs["v_cache"], q_out=q_dest, norm=norm,
        rotary_dim=rotary_dim, interleave=interleave, yarn=yarn, fastmath=fastmath,
        **scales, **cached)
    got = dict(q=np.array(result[:, :hq * head_dim]), k_cache=inputs["k_cache"],
               v_cache=inputs["v_cache"], qkv=inputs["qkv"])
    return judge(before, got, heads=heads, head_dim=head_dim, storage=storage,
                 rotary_dim=rotary_dim, interleave=interleave, yarn=yarn, norm=norm,
                 fastmath=fastmath, k_scale=k_scale, v_scale=v_scale, fp8_cache=fp8_cache,
                 cache=cache, name=f"{tokens}x{heads}x{head_dim} {storage}", plant=plant)
