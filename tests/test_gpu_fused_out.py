"""The one-pass functional forward on a real GPU (skipped without one).

Run on a GPU host with ``python -m pytest tests/test_gpu_fused_out.py``.  What is checked, on
torch CUDA tensors at a production shape (flux_1024) and a small GQA shape with an odd V count:

* ``ropelab.fused_qknorm_rope(qkv, out=out)`` equals the in-place call bit for bit on Q and K,
  ``qkv`` on V, and leaves ``qkv`` unchanged, for bfloat16 / float16 / float32, both layouts,
  partial rotary, on aligned tensors (the 128-bit V copy) and on a qkv and out 8 bytes off a
  16-byte boundary (the word path), on the validating call and on the cached one;
* ``ropelab.torch_ops.fused_qknorm_rope`` on a qkv that requires grad returns the same bits,
  and its autograd graph holds no copy of qkv (one kernel launch, no ``aten::clone``);
* a CUDA graph of the out-of-place call replays the eager result.
"""

import numpy as np
import pytest

import ropelab
from ropelab import check as ropelab_check, shapes

pytestmark = pytest.mark.skipif(ropelab.SIMULATED, reason="needs a GPU")
torch = pytest.importorskip("torch") if not ropelab.SIMULATED else None

TORCH_DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32"}


def _tensors(storage, tokens, heads, head_dim, seed=0, offset=0):
    """qkv, q_weight, k_weight, positions on the GPU; ``offset`` elements into a fresh buffer
    (0: 16-byte aligned)."""
    rng = np.random.default_rng(seed)
    qkv, wq, wk, pos = ropelab_check.random_inputs(rng, tokens, heads, head_dim, storage)
    dtype = getattr(torch, TORCH_DTYPES[storage])

    def dev(a):
        t = torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a).cuda()
        return t.view(dtype) if storage == "bfloat16" else t

    q = dev(qkv)
    if offset:
        buf = torch.empty(q.numel() + offset, dtype=q.dtype, device="cuda")
        shifted = buf[offset:].view(q.shape)
        shifted.copy_(q)
        q = shifted
    return q, dev(wq), dev(wk), torch.from_numpy(pos).cuda()


def _bits(t):
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


def _empty_like_at(qkv, offset):
    if not offset:
        return torch.empty_like(qkv)
    buf = torch.empty(qkv.numel() + offset, dtype=qkv.dtype, device="cuda")
    return buf[offset:].view(qkv.shape)


CASES = [
    ("flux_1024", "bfloat16", True, None),
    ("flux_1024", "bfloat16", False, None),
    ("small", "bfloat16", True, 64),
    ("small", "float16", False, 64),
    ("small", "float32", True, None),
    ("small", "float32", False, 64),
]


@pytest.mark.parametrize("shape, storage, interleave, rotary_dim", CASES)
@pytest.mark.parametrize("offset_bytes", [0, 8])
def test_out_equals_in_place_and_v_is_copied(shape, storage, interleave, rotary_dim,
                                             offset_bytes):
    if shape == "flux_1024":
        s = shapes.PRODUCTION_SHAPES["flux_1024"]
        tokens, heads, d = s.tokens, (s.heads_q, s.heads_k, s.heads_v), s.head_dim
    else:
        tokens, heads, d = 333, (8, 2, 3), 128
    item = 4 if storage == "float32" else 2
    offset = offset_bytes // item
    qkv, wq, wk, pos = _tensors(storage, tokens, heads, d, offset=offset)
    kw = dict(num_heads_q=heads[0], num_heads_k=heads[1], num_heads_v=heads[2], head_dim=d,
              q_weight=wq, k_weight=wk, positions=pos, interleave=interleave,
              rotary_dim=rotary_dim)
    before = qkv.clone()
    want = ropelab.fused_qknorm_rope(qkv.clone(), **kw)
    qk = (heads[0] + heads[1]) * d
    for _ in range(2):  # the validating call, then the cached one on a new out
        out = _empty_like_at(qkv, offset)
        out.fill_(float("nan"))
        assert ropelab.fused_qknorm_rope(qkv, out=out, **kw) is out
        torch.cuda.synchronize()
        assert torch.equal(_bits(qkv), _bits(before)), "qkv changed"
        assert torch.equal(_bits(out)[:, :qk], _bits(want)[:, :qk]), "Q/K differ from in place"
        assert torch.equal(_bits(out)[:, qk:], _bits(before)[:, qk:]), "V not copied"


def test_the_autograd_forward_is_one_launch_without_a_clone():
    import ropelab.torch_ops as rt

    s = shapes.PRODUCTION_SHAPES["flux_1024"]
    heads = (s.heads_q, s.heads_k, s.heads_v)
    qkv, wq, wk, pos = _tensors("bfloat16", s.tokens, heads, s.head_dim)
    kw = dict(num_heads_q=s.heads_q, num_heads_k=s.heads_k, num_heads_v=s.heads_v,
              head_dim=s.head_dim, positions=pos)
    want = ropelab.fused_qknorm_rope(qkv.clone(), q_weight=wq, k_weight=wk, **kw)
    leaf = qkv.clone().requires_grad_()
    w = wq.clone().requires_grad_()
    rt.fused_qknorm_rope(leaf, q_weight=w, k_weight=wk, **kw)  # warm: validate, upload tables
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        y = rt.fused_qknorm_rope(leaf, q_weight=w, k_weight=wk, **kw)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert not any("clone" in n or "copy_" in n or "Memcpy" in n for n in names), sorted(set(names))
    assert torch.equal(_bits(y.detach()), _bits(want))
    assert torch.equal(_bits(leaf.detach()), _bits(qkv))
    y.backward(torch.ones_like(y))  # the backward still runs from the saved input
    assert leaf.grad is not None and w.grad is not None


def test_a_cuda_graph_of_the_out_of_place_call_replays_the_eager_result():
    qkv, wq, wk, pos = _tensors("bfloat16", 512, (8, 2, 2), 128)
    kw = dict(num_heads_q=8, num_heads_k=2, num_heads_v=2, head_dim=128, q_weight=wq,
              k_weight=wk, positions=pos)
    eager = ropelab.fused_qknorm_rope(qkv, out=torch.empty_like(qkv), **kw)
    out = torch.empty_like(qkv)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ropelab.fused_qknorm_rope(qkv, out=out, **kw)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ropelab.fused_qknorm_rope(qkv, out=out, **kw)
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(_bits(out), _bits(eager))
