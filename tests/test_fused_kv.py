"""The serving op (ropelab.fused_qknorm_rope_kv): the float64 reference, the kernel against it
(Q, every written cache row, every untouched row), a planted error per output, bit-for-bit
equality with ``fused_qknorm_rope`` followed by a torch scatter, and the slot semantics.

On the simulator: 3-5 tokens, a few heads, head_dim 64 or 128, caches of a few blocks.
Refusals and the error word: tests/test_fused_kv_errors.py.
"""

import numpy as np
import pytest

import ropelab
from ropelab import check_kv, reference, reference_kv
from ropelab.check import decode

torch = pytest.importorskip("torch")

STORAGES = ["float32", "float16", "bfloat16"]
YARN = dict(factor=4.0, low=2.0, high=9.0, attention_factor=1.2)


# ---- the reference ---------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["rms", "gemma"])
def test_reference_is_the_fused_reference_then_a_scatter(rng, norm):
    hq, hk, hv, d, tokens = 3, 1, 2, 8, 5
    qkv = rng.standard_normal((tokens, (hq + hk + hv) * d))
    wq, wk = rng.uniform(-0.5, 1.5, d), rng.uniform(-0.5, 1.5, d)
    pos = rng.integers(0, 100, tokens)
    slots = np.array([3, -1, 0, 7, 5])
    kc, vc = rng.standard_normal((2, 4, hk, d)), rng.standard_normal((2, 4, hv, d))
    q, k_new, v_new = reference_kv.fused_qknorm_rope_kv(
        qkv, num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d, q_weight=wq,
        k_weight=wk, positions=pos, slot_mapping=slots, k_cache=kc, v_cache=vc, norm=norm)
    heads = qkv.reshape(tokens, -1, d)
    gain = (lambda w: 1.0 + w) if norm == "gemma" else (lambda w: w)
    normed = np.concatenate([heads[:, :hq] / np.sqrt((heads[:, :hq] ** 2).mean(-1, keepdims=True)
                                                     + 1e-6) * gain(wq),
                             heads[:, hq:hq + hk] / np.sqrt((heads[:, hq:hq + hk] ** 2).mean(
                                 -1, keepdims=True) + 1e-6) * gain(wk)], axis=1)
    rotated = reference.rope(normed, pos)
    np.testing.assert_allclose(q, rotated[:, :hq].reshape(tokens, -1), rtol=1e-12, atol=1e-12)
    written = {3: 0, 0: 2, 7: 3, 5: 4}  # slot -> token
    for slot in range(8):
        block, offset = divmod(slot, 4)  # vLLM's slot = block * block_size + offset
        if slot in written:
            t = written[slot]
            np.testing.assert_allclose(k_new[block, offset], rotated[t, hq:], rtol=1e-12,
                                       atol=1e-12)
            np.testing.assert_array_equal(v_new[block, offset], heads[t, hq + hk:])
        else:
            np.testing.assert_array_equal(k_new[block, offset], kc[block, offset])
            np.testing.assert_array_equal(v_new[block, offset], vc[block, offset])


def test_slots_for_a_ragged_prefill():
    pos, slots = reference_kv.slots_for([3, 5], 4, [[2], [0, 3]])
    assert pos.tolist() == [0, 1, 2, 0, 1, 2, 3, 4]
    assert slots.tolist() == [8, 9, 10, 0, 1, 2, 3, 12]


# ---- the kernel against the reference -------------------------------------------------------

@pytest.mark.parametrize("fp8_cache", [False, True], ids=["same", "fp8"])
@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
@pytest.mark.parametrize("storage", STORAGES)
def test_kernel_matches_reference(rng, storage, interleave, fp8_cache):
    row = check_kv.check_case(rng, tokens=4, heads=(2, 1, 1), head_dim=64, storage=storage,
                              interleave=interleave, fp8_cache=fp8_cache)
    assert row.passed, row


@pytest.mark.parametrize("case", [
    dict(storage="bfloat16", heads=(4, 1, 1), head_dim=128, interleave=False),  # GQA 4:1, split
    dict(storage="bfloat16", heads=(3, 2, 2), head_dim=64, rotary_dim=32, interleave=False),
    dict(storage="float16", heads=(1, 3, 3), head_dim=128, rotary_dim=96, yarn=YARN),
    dict(storage="float32", heads=(2, 1, 1), head_dim=64, rotary_dim=32, interleave=False,
         fp8_cache=True, norm="gemma"),  # partner shuffles, FP8, Gemma's 1 + w
    dict(storage="bfloat16", heads=(2, 1, 1), head_dim=64, norm="gemma", q_out=True),
    dict(storage="bfloat16", heads=(2, 2, 2), head_dim=64, interleave=False, cache=True,
         max_position=256, fp8_cache=True, yarn=YARN),
    dict(storage="bfloat16", heads=(0, 1, 1), head_dim=64),  # no Q heads: only the cache
], ids=["gqa4-split", "partial-neox", "partial-yarn-f16", "f32-shuffle-fp8-gemma",
        "q_out-gemma", "cache-fp8-yarn", "no-q"])
def test_options_match_reference(rng, case):
    row = check_kv.check_case(rng, tokens=3, **case)
    assert row.passed, row


@pytest.mark.parametrize("fp8_cache", [False, True], ids=["same", "fp8"])
@pytest.mark.parametrize("output", ["q", "k", "v"])
def test_a_planted_error_in_each_output_fails(rng, output, fp8_cache):
    row = check_kv.check_case(rng, tokens=3, heads=(2, 1, 1), head_dim=64, storage="bfloat16",
                              fp8_cache=fp8_cache, plant=(output, 10.0))
    assert not row.passed and getattr(row, output) > 1.0, row
    assert max(getattr(row, o) for o in "qkv" if o != output) <= 1.0, row


# ---- one launch equals the unfused chain: fused_qknorm_rope, then a torch scatter ----------

def _as_torch(a, storage):
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.view(torch.bfloat16) if storage == "bfloat16" else t


def _unfused(inputs, heads, d, storage, interleave, rotary_dim, fp8_cache, scales):
    """fused_qknorm_rope in place on a copy of qkv, then K and V scattered into copies of the
    caches with torch (FP8: torch's cast of the scaled float32 value)."""
    hq, hk, hv = heads
    qkv = inputs["qkv"].copy()
    ropelab.fused_qknorm_rope(qkv, num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d,
                              q_weight=inputs["q_weight"], k_weight=inputs["k_weight"],
                              positions=inputs["positions"], interleave=interleave,
                              rotary_dim=rotary_dim)
    t = _as_torch(qkv, storage).view(qkv.shape[0], hq + hk + hv, d)
    slots = torch.from_numpy(inputs["slot_mapping"])
    keep = slots >= 0
    out = []
    for cache, part, scale in ((inputs["k_cache"], t[:, hq:hq + hk], scales[0]),
                               (inputs["v_cache"], t[:, hq + hk:], scales[1])):
        c = torch.from_numpy(cache.copy())
        rows = c.view(-1, part.shape[1], d)
        if fp8_cache:
            inv = torch.tensor(np.float32(1.0 / scale))
            rows.view(torch.float8_e4m3fn)[slots[keep]] = (part[keep].float() * inv).to(
                torch.float8_e4m3fn)
        else:
            rows.view(part.dtype)[slots[keep]] = part[keep]
        out.append(c.numpy())
    return qkv, out[0], out[1]


@pytest.mark.parametrize("fp8_cache", [False, True], ids=["same", "fp8"])
@pytest.mark.parametrize("storage, interleave, rotary_dim", [
    ("bfloat16", True, None), ("bfloat16", False, None), ("bfloat16", False, 32),
    ("float16", True, None), ("float16", False, 32), ("float32", False, None),
    ("float32", True, 48)], ids=["bf16-gptj", "bf16-neox", "bf16-neox-partial", "f16-gptj",
                                 "f16-neox-partial", "f32-neox", "f32-gptj-partial"])
def test_one_launch_equals_fused_then_torch_scatter_bit_for_bit(rng, storage, interleave,
                                                                rotary_dim, fp8_cache):
    heads, d = (2, 1, 1), 64
    inputs = check_kv.kv_inputs(rng, tokens=5, heads=heads, head_dim=d, storage=storage,
                                fp8_cache=fp8_cache, padding=2)
    scales = (0.25, 3.0) if fp8_cache else (None, None)
    qkv_want, k_want, v_want = _unfused(inputs, heads, d, storage, interleave, rotary_dim,
                                        fp8_cache, scales)
    qkv = inputs["qkv"].copy()
    ropelab.fused_qknorm_rope_kv(
        qkv, num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=d,
        q_weight=inputs["q_weight"], k_weight=inputs["k_weight"], positions=inputs["positions"],
        slot_mapping=inputs["slot_mapping"], k_cache=inputs["k_cache"],
        v_cache=inputs["v_cache"], k_scale=scales[0], v_scale=scales[1], interleave=interleave,
        rotary_dim=rotary_dim)
    q = 2 * d
    np.testing.assert_array_equal(qkv[:, :q].view(np.uint8), qkv_want[:, :q].view(np.uint8))
    np.testing.assert_array_equal(inputs["k_cache"].view(np.uint8), k_want.view(np.uint8))
    np.testing.assert_array_equal(inputs["v_cache"].view(np.uint8), v_want.view(np.uint8))
    # K stays as it was in qkv (the fused op rotates it there; this op writes it to the cache).
    np.testing.assert_array_equal(qkv[:, q:], inputs["qkv"][:, q:])


# ---- slots -------------------------------------------------------------------------------------

def _call(inputs, heads=(2, 1, 1), d=64, **options):
    hq, hk, hv = heads
    return ropelab.fused_qknorm_rope_kv(
        inputs["qkv"], num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d,
        q_weight=inputs["q_weight"], k_weight=inputs["k_weight"], positions=inputs["positions"],
        slot_mapping=inputs["slot_mapping"], k_cache=inputs["k_cache"],
        v_cache=inputs["v_cache"], **options)


def test_consecutive_tokens_across_blocks_and_all_padding(rng):
    """A ragged prefill: 3 + 5 tokens whose pages are not contiguous (a token's neighbour may
    sit in another block); then a step whose every slot is padding writes nothing."""
    pos, slots = reference_kv.slots_for([3, 5], 2, [[3, 0], [5, 1, 4]])
    inputs = check_kv.kv_inputs(rng, tokens=8, heads=(2, 1, 1), head_dim=64, storage="bfloat16",
                                num_blocks=6, block_size=2, padding=0)
    inputs["positions"], inputs["slot_mapping"] = pos, slots
    before = {k: v.copy() for k, v in inputs.items()}
    _call(inputs)
    rows = inputs["k_cache"].reshape(12, 64)
    v_rows = inputs["v_cache"].reshape(12, 64)
    for t, s in enumerate(slots):
        np.testing.assert_array_equal(v_rows[s], before["qkv"].reshape(8, 4, 64)[t, 3])
        assert np.abs(decode(rows[s], "bfloat16")).max() > 0  # written (normalized: not zero)
    unused = sorted(set(range(12)) - set(slots.tolist()))
    np.testing.assert_array_equal(rows[unused], before["k_cache"].reshape(12, 64)[unused])
    padded = {k: v.copy() for k, v in inputs.items()}
    padded["slot_mapping"] = np.full(8, -1)
    k_before = padded["k_cache"].copy()
    _call(padded)
    np.testing.assert_array_equal(padded["k_cache"], k_before)


def test_device_arrays_on_the_simulator_and_q_out(rng):
    from numba import cuda

    inputs = check_kv.kv_inputs(rng, tokens=3, heads=(2, 1, 1), head_dim=64, storage="float16",
                                fp8_cache=True)
    host = {k: v.copy() for k, v in inputs.items()}
    dev = {k: cuda.to_device(v) for k, v in inputs.items()}
    q_out = cuda.to_device(np.zeros((3, 2, 64), np.float16))
    got = _call(dev, q_out=q_out, k_scale=0.5)
    assert got is q_out
    want_q = host["qkv"].copy()
    _call({**host, "qkv": want_q}, k_scale=0.5)  # in place on the host copy
    np.testing.assert_array_equal(q_out.copy_to_host().reshape(3, 128), want_q[:, :128])
    np.testing.assert_array_equal(dev["k_cache"].copy_to_host(), host["k_cache"])
    np.testing.assert_array_equal(dev["v_cache"].copy_to_host(), host["v_cache"])
    np.testing.assert_array_equal(dev["qkv"].copy_to_host(), inputs["qkv"])  # only read
