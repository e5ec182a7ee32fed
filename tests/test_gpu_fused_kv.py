"""The serving op on a real GPU (skipped without one): ``python -m pytest tests/test_gpu_fused_kv.py``.

* the kernel against the float64 judge (:mod:`ropelab.check_kv`) at a few hundred tokens, the
  fast-math build, every storage, both layouts, FP8 and the Gemma norm;
* on CUDA tensors, the op equals ``ropelab.fused_qknorm_rope`` followed by torch's
  ``index_copy_`` into the caches (and torch's FP8 cast), bit for bit;
* both e4m3 conversions compiled with fast-math (the hardware one the kernels use here, and the
  integer one) equal torch's on every tie, subnormal, saturated value and NaN;
* a CUDA graph captured after a warm-up replays the eager call with new slots and positions;
* a device slot past the cache is reported by ``check_errors``.
"""

import numpy as np
import pytest

import ropelab
from ropelab import check_kv, fp8

pytestmark = pytest.mark.skipif(ropelab.SIMULATED, reason="needs a GPU")
torch = pytest.importorskip("torch") if not ropelab.SIMULATED else None

HEADS, D = (8, 2, 2), 128


@pytest.mark.parametrize("case", [
    dict(storage="bfloat16"), dict(storage="bfloat16", fp8_cache=True),
    dict(storage="bfloat16", interleave=False, fp8_cache=True),
    dict(storage="float16", interleave=False, rotary_dim=64),
    dict(storage="float32", interleave=False, fp8_cache=True, norm="gemma"),
    dict(storage="bfloat16", interleave=False, cache=True, max_position=4096, q_out=True),
], ids=["bf16", "bf16-fp8", "bf16-neox-fp8", "f16-neox-partial", "f32-neox-fp8-gemma",
        "bf16-neox-cache-q_out"])
def test_the_gpu_kernel_matches_the_reference(case):
    row = check_kv.check_case(np.random.default_rng(0), tokens=333, heads=HEADS, head_dim=D,
                              num_blocks=64, block_size=16, padding=5, **case)
    assert row.passed, row


def _cuda(a):
    t = torch.from_numpy(np.ascontiguousarray(a)).cuda()
    return t.view(torch.bfloat16) if a.dtype == np.uint16 else t


@pytest.mark.parametrize("fp8_cache", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("interleave", [True, False], ids=["gptj", "neox"])
def test_cuda_tensors_equal_fused_then_index_copy(fp8_cache, interleave):
    host = check_kv.kv_inputs(np.random.default_rng(1), tokens=300, heads=HEADS, head_dim=D,
                              storage="bfloat16", num_blocks=32, block_size=16,
                              fp8_cache=fp8_cache, padding=0)
    t = {k: _cuda(v) for k, v in host.items()}
    scales = dict(k_scale=0.25, v_scale=3.0) if fp8_cache else {}
    kw = dict(num_heads_q=8, num_heads_k=2, num_heads_v=2, head_dim=D, interleave=interleave)
    ref = t["qkv"].clone()
    ropelab.fused_qknorm_rope(ref, q_weight=t["q_weight"], k_weight=t["k_weight"],
                              positions=t["positions"], **kw)
    heads = ref.view(300, 12, D)
    want = []
    for cache, part, scale in ((t["k_cache"], heads[:, 8:10], scales.get("k_scale")),
                               (t["v_cache"], heads[:, 10:], scales.get("v_scale"))):
        c = cache.clone()
        if fp8_cache:
            part = (part.float() * torch.tensor(np.float32(1 / scale), device="cuda")).to(
                torch.float8_e4m3fn).view(torch.uint8)
        c.view(-1, 2, D).index_copy_(0, t["slot_mapping"], part)
        want.append(c)
    ropelab.fused_qknorm_rope_kv(t["qkv"], q_weight=t["q_weight"], k_weight=t["k_weight"],
                                 positions=t["positions"], slot_mapping=t["slot_mapping"],
                                 k_cache=t["k_cache"], v_cache=t["v_cache"], **scales, **kw)
    torch.cuda.synchronize()
    q = t["qkv"][:, :8 * D]
    diff = (q.view(torch.int16) != ref[:, :8 * D].view(torch.int16)).sum().item()
    assert diff == 0, f"{diff} Q elements differ from fused_qknorm_rope's"
    for got, exp, name in ((t["k_cache"], want[0], "K"), (t["v_cache"], want[1], "V")):
        diff = (got.view(torch.uint8) != exp.view(torch.uint8)).sum().item()
        assert diff == 0, f"{diff} {name} cache bytes differ from the unfused chain's"


def test_fp8_conversions_compiled_with_fastmath_are_torchs():
    """Both device forms: pack4 (the kernels' path: the hardware conversion on this GPU, signs
    put back) and e4m3_bits (the integer form the simulator runs)."""
    from numba import cuda

    def packed(x, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = fp8.pack4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3])

    def single(x, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = fp8.e4m3_bits(x[i])

    finite = fp8.to_float32(np.arange(256, dtype=np.uint8))
    finite = np.unique(finite[np.isfinite(finite)]).astype(np.float64)
    mids = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)
    x = np.concatenate([finite.astype(np.float32), mids, np.nextafter(mids, np.float32(9e9)),
                        np.nextafter(mids, np.float32(-9e9)),
                        np.array([np.inf, -np.inf, 1e-40, -1e-40, 500.0, -0.0], np.float32),
                        np.array([0x7FC00000, 0xFFC00000, 0xFF800001], np.uint32).view(np.float32),
                        np.random.default_rng(2).integers(0, 2**32, 1 << 20, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32)])
    x = x[:x.size // 4 * 4]
    # Saturating, as torch 2.13's cast does (2.11's, on the H200 image, makes NaN past 448).
    want = torch.from_numpy(x).clamp(-fp8.MAX, fp8.MAX).to(torch.float8_e4m3fn).view(
        torch.uint8).numpy()
    dx = cuda.to_device(x)
    words = cuda.device_array(x.size // 4, np.uint32)
    cuda.jit(fastmath=True)(packed)[(words.size + 255) // 256, 256](dx, words)
    ones = cuda.device_array(x.size, np.uint32)
    cuda.jit(fastmath=True)(single)[(x.size + 255) // 256, 256](dx, ones)
    for name, got in (("pack4", words.copy_to_host().view(np.uint8)),
                      ("e4m3_bits", ones.copy_to_host().astype(np.uint8))):
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, (f"{name}: {bad.size} values differ, e.g. {x[bad[:5]]}: "
                               f"{got[bad[:5]]} vs torch {want[bad[:5]]}")


def test_a_cuda_graph_replays_new_slots_and_positions():
    host = check_kv.kv_inputs(np.random.default_rng(3), tokens=64, heads=HEADS, head_dim=D,
                              storage="bfloat16", num_blocks=64, block_size=16, fp8_cache=True,
                              padding=3)
    t = {k: _cuda(v) for k, v in host.items()}
    kw = dict(num_heads_q=8, num_heads_k=2, num_heads_v=2, head_dim=D, q_weight=t["q_weight"],
              k_weight=t["k_weight"], positions=t["positions"], slot_mapping=t["slot_mapping"],
              k_cache=t["k_cache"], v_cache=t["v_cache"], k_scale=0.5, v_scale=0.5)
    qkv0 = t["qkv"].clone()
    ropelab.fused_qknorm_rope_kv(t["qkv"], **kw)  # warm-up: compiles, validates, remembers
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ropelab.fused_qknorm_rope_kv(t["qkv"], **kw)
    new_slots = torch.randperm(1024, device="cuda")[:64]
    t["slot_mapping"].copy_(new_slots)
    t["positions"].copy_(torch.randint(0, 4096, (64,), device="cuda", dtype=torch.int32))
    t["qkv"].copy_(qkv0)
    graph.replay()
    replayed = [t["qkv"].clone(), t["k_cache"].clone()]
    t["qkv"].copy_(qkv0)
    ropelab.fused_qknorm_rope_kv(t["qkv"], **kw)
    assert torch.equal(replayed[0], t["qkv"]) and torch.equal(replayed[1], t["k_cache"])


def test_a_device_slot_past_the_cache_is_reported():
    ropelab.check_errors()
    host = check_kv.kv_inputs(np.random.default_rng(4), tokens=8, heads=HEADS, head_dim=D,
                              storage="bfloat16")
    t = {k: _cuda(v) for k, v in host.items()}
    t["slot_mapping"][3] = 1 << 40  # an int64 slot far past the 16-slot cache
    ropelab.fused_qknorm_rope_kv(t["qkv"], num_heads_q=8, num_heads_k=2, num_heads_v=2,
                                 head_dim=D, q_weight=t["q_weight"], k_weight=t["k_weight"],
                                 positions=t["positions"], slot_mapping=t["slot_mapping"],
                                 k_cache=t["k_cache"], v_cache=t["v_cache"])
    with pytest.raises(ropelab.RopeDeviceError, match="slot 2147483647 .or more."):
        ropelab.check_errors()
