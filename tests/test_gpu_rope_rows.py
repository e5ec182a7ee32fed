"""rope_rows on a real GPU through PyTorch tensors (skipped without a GPU): bfloat16 and
float16, q and k as column slices of one qkv, the cached second call, a CUDA graph.

Run on a GPU host with ``python -m pytest tests/test_gpu_rope_rows.py``.
"""

import numpy as np
import pytest

import ropelab
from ropelab import bf16, reference, tolerance
from ropelab.ops import call as engine

pytestmark = pytest.mark.skipif(ropelab.SIMULATED, reason="needs a GPU")
torch = pytest.importorskip("torch") if not ropelab.SIMULATED else None


def _qkv(dtype, tokens=257, hq=32, hk=8, hv=8, hd=128, seed=0):
    rng = np.random.default_rng(seed)
    host = rng.standard_normal((tokens, (hq + hk + hv) * hd)).astype(np.float32)
    t = torch.from_numpy(host).cuda().to(dtype)
    pos = torch.from_numpy(rng.integers(0, 4096, tokens).astype(np.int32)).cuda()
    return t, pos


def _f64(t):
    return t.float().cpu().numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("interleave", [True, False])
def test_rope_qk_on_column_slices_matches_the_judge_and_the_cached_call(dtype, interleave):
    tdt = getattr(torch, dtype)
    hq, hk, hd = 32, 8, 128
    qkv, pos = _qkv(tdt)
    before = qkv.clone()
    q, k = qkv[:, :hq * hd], qkv[:, hq * hd:(hq + hk) * hd]
    want_q = reference.rope(_f64(q).reshape(-1, hq, hd), pos.cpu().numpy(), interleave=interleave)
    engine.clear()
    ropelab.rope_qk(q, k, positions=pos, head_dim=hd, interleave=interleave)
    torch.cuda.synchronize()
    bound = tolerance.rows_atol(np.abs(_f64(before)).max(), 4096.0, dtype)
    assert np.abs(_f64(q).reshape(-1, hq, hd) - want_q).max() <= bound
    assert torch.equal(qkv[:, (hq + hk) * hd:], before[:, (hq + hk) * hd:])  # V untouched
    # The call shape is remembered (the engine's one cache); the inverse call brings the input
    # back within two roundings.
    assert len(engine.remembered()) == 1
    ropelab.rope_qk(q, k, positions=pos, head_dim=hd, interleave=interleave, inverse=True)
    torch.cuda.synchronize()
    assert np.abs(_f64(qkv) - _f64(before)).max() <= 2 * bound


def test_bf16_rope_public_call_allocates_and_matches_the_numpy_path():
    x = torch.randn(300, 32, 128, device="cuda").to(torch.bfloat16)
    pos = torch.arange(300, dtype=torch.int32, device="cuda")
    got = ropelab.rope(x, positions=pos)
    assert got.dtype == torch.bfloat16 and got.shape == x.shape
    bits = x.view(torch.uint16).cpu().numpy() if hasattr(torch, "uint16") else \
        x.view(torch.int16).cpu().numpy().view(np.uint16)
    want = ropelab.rope(bits, positions=np.arange(300))
    np.testing.assert_array_equal(got.view(torch.int16).cpu().numpy().view(np.uint16), want)
    again = ropelab.rope(x, positions=pos)  # the cached path
    assert torch.equal(again, got)


def test_strided_tensors_of_one_shape_and_two_strides_do_not_share_an_entry():
    base = torch.randn(64, 512, device="cuda").to(torch.float16)
    pos = torch.arange(64, dtype=torch.int32, device="cuda")
    a = base[:, :128].reshape(64, 1, 128)
    other = torch.randn(64, 256, device="cuda").to(torch.float16)
    b = other[:, :128].reshape(64, 1, 128)  # same shape, another row stride
    want_b = reference.rope(_f64(b), np.arange(64))
    bound = tolerance.rows_atol(np.abs(_f64(b)).max(), 64.0, "float16")
    ropelab.rope(a, positions=pos, out=a)  # validated and remembered
    ropelab.rope(b, positions=pos, out=b)  # must not reuse a's row stride
    torch.cuda.synchronize()
    assert np.abs(_f64(b) - want_b).max() <= bound


def test_rope_qk_replays_in_a_cuda_graph():
    qkv, pos = _qkv(torch.bfloat16, tokens=64)
    q, k = qkv[:, :32 * 128], qkv[:, 32 * 128:40 * 128]
    ropelab.rope_qk(q, k, positions=pos, head_dim=128)  # warm-up outside the capture
    eager = qkv.clone()
    ropelab.rope_qk(q, k, positions=pos, head_dim=128, inverse=True)  # back to the start
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ropelab.rope_qk(q, k, positions=pos, head_dim=128)
    g.replay()
    torch.cuda.synchronize()
    assert np.abs(_f64(qkv) - _f64(eager)).max() <= 0.05


def test_fused_with_a_user_cache_equals_the_built_cache():
    from ropelab.kernels.freq_table import cos_sin_rows

    qkv, pos = _qkv(torch.bfloat16, tokens=129, hq=24, hk=24, hv=24)
    w = torch.ones(128, device="cuda", dtype=torch.bfloat16)
    kw = dict(num_heads_q=24, num_heads_k=24, num_heads_v=24, head_dim=128, q_weight=w,
              k_weight=w, positions=pos)
    table = torch.from_numpy(cos_sin_rows(reference.inv_freq(128, 10000.0), 4096)).cuda()
    a, b = qkv.clone(), qkv.clone()
    for _ in range(2):  # the second call takes the cached path
        a.copy_(qkv)
        ropelab.fused_qknorm_rope(a, cos_sin_cache=table, **kw)
    ropelab.fused_qknorm_rope(b, cache=True, max_positions=4096, **kw)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
