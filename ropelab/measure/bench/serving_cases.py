"""The serving bench's cases: tensors of a ragged batch, the byte model, and the launchers it
times (:mod:`.serving` runs them).

Byte model (the least traffic of the op; what ``bytes_moved`` counts for every row of a case):
``qkv`` read once (Q, K and V of every token), Q written once, K and V written once into the
cache in its dtype (2 bytes a value, or 1 for FP8), the token's position (4 bytes) and slot
(8) read; the two norm weights (``2 * head_dim`` values) are read too.  Cache rows no token
names are neither read nor written.  The copy row moves the same number of bytes (half read,
half written).

Launchers, all on the same CUDA tensors, on PyTorch's current stream:

* ``op``: ``ropelab.fused_qknorm_rope_kv`` (one launch);
* ``fused+scatter``: ``ropelab.fused_qknorm_rope`` in place, then ``index_copy_`` of K and of V
  into the caches (FP8: torch's cast of the scaled float32 values first);
* ``compiled_chain``: ``torch.compile`` of the whole chain written in torch (RMSNorm, RoPE from
  a float32 cos/sin table, Q back into qkv, the FP8 cast, ``index_copy_`` into the caches);
* ``copy``: ``dst.copy_(src)`` of a buffer of half the byte model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK_SIZE = 16
MAX_POSITION = 32768  # decode positions are drawn below this
# A decode step's cache: 16384 blocks of 16 slots (512 MiB per bfloat16 cache of 8 heads), so
# the 64 tokens' rows lie far apart in memory, as in a serving engine's pool.
DECODE_BLOCKS = 16384


@dataclass(frozen=True)
class Case:
    name: str  # e.g. "prefill flux 4x1024"
    regime: str  # prefill, decode
    heads: tuple  # (q, k, v)
    head_dim: int
    interleave: bool
    lengths: tuple  # tokens per request this step
    graph_calls: int = 0  # > 0: timed as CUDA graph replays of that many calls
    pool_blocks: int = 0  # decode: the blocks of the cache (0: DECODE_BLOCKS)

    @property
    def tokens(self) -> int:
        return sum(self.lengths)


FLUX = ((24, 24, 24), 128, True)  # FLUX.1: 24 heads of each, head_dim 128, GPT-J pairs
QWEN = ((32, 8, 8), 128, False)  # Qwen3-8B: 32 Q heads, 8 KV heads, NeoX pairs

# In the order a time limit should keep them.
CASES = (
    Case("prefill qwen3-8b 4x1024", "prefill", *QWEN, (1024,) * 4),
    Case("decode qwen3-8b 64x1", "decode", *QWEN, (1,) * 64, graph_calls=20),
    Case("decode qwen3-8b 1x1", "decode", *QWEN, (1,), graph_calls=20),
    Case("prefill flux 4x1024", "prefill", *FLUX, (1024,) * 4),
)


def byte_model(case: Case, cache_itemsize: int, itemsize: int = 2) -> int:
    hq, hk, hv = case.heads
    t, d = case.tokens, case.head_dim
    return (t * (hq + hk + hv) * d * itemsize + t * hq * d * itemsize
            + t * (hk + hv) * d * cache_itemsize + t * (4 + 8) + 2 * d * itemsize)


def tensors(case: Case, fp8: bool, device: str = "cuda", seed: int = 0) -> dict:
    """qkv (bfloat16, N(0, 1) times a per-head scale), weights, positions and slots of one
    step, and caches (garbage in every row).  Prefill: each request's positions 0 .. n-1 on
    pages from a shuffled pool; decode: one token per request at a position below 32k, on
    a block of its own, somewhere in a pool of :data:`DECODE_BLOCKS`."""
    import torch

    rng = np.random.default_rng(seed)
    hq, hk, hv = case.heads
    d, t = case.head_dim, case.tokens
    scale = np.repeat(rng.uniform(0.25, 4.0, hq + hk + hv), d).astype(np.float32)
    qkv = (torch.randn(t, (hq + hk + hv) * d, generator=torch.Generator().manual_seed(seed))
           * torch.from_numpy(scale)).to(torch.bfloat16)
    w = torch.from_numpy(rng.uniform(0.5, 1.5, (2, d)).astype(np.float32)).to(torch.bfloat16)
    if case.regime == "prefill":
        blocks = -(-max(case.lengths) // BLOCK_SIZE)
        pool = rng.permutation(2 * blocks * len(case.lengths))
        positions, slots = [], []
        for r, n in enumerate(case.lengths):
            p = np.arange(n)
            table = pool[r * blocks:(r + 1) * blocks]
            positions.append(p)
            slots.append(table[p // BLOCK_SIZE] * BLOCK_SIZE + p % BLOCK_SIZE)
        num_blocks = len(pool)
        positions, slots = np.concatenate(positions), np.concatenate(slots)
    else:
        positions = rng.integers(0, MAX_POSITION, t)
        num_blocks = case.pool_blocks or DECODE_BLOCKS
        slots = rng.permutation(num_blocks)[:t] * BLOCK_SIZE + positions % BLOCK_SIZE
    out = dict(qkv=qkv, q_weight=w[0].clone(), k_weight=w[1].clone(),
               positions=torch.from_numpy(positions.astype(np.int32)),
               slot_mapping=torch.from_numpy(slots.astype(np.int64)))
    out = {k: v.to(device) for k, v in out.items()}
    # The caches (up to 512 MiB each) are filled where they live: garbage in every row.
    gen = torch.Generator(device=device).manual_seed(seed)
    for name, h in (("k_cache", hk), ("v_cache", hv)):
        shape = (num_blocks, BLOCK_SIZE, h, d)
        out[name] = (torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=gen)
                     if fp8 else torch.randn(shape, device=device, generator=gen,
                                             dtype=torch.bfloat16))
    return out


def options(case: Case) -> dict:
    hq, hk, hv = case.heads
    return dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=case.head_dim,
                interleave=case.interleave)


SCALES = (0.5, 0.25)  # k_scale, v_scale of the FP8 cases


def _host(t):
    """A CPU tensor as the public functions take host data (bfloat16 as uint16 bits); a CUDA
    tensor as it is."""
    import torch

    if t.is_cuda:
        return t
    return (t.view(torch.uint16) if t.dtype == torch.bfloat16 else t).numpy()


def op_launcher(case: Case, t: dict, fp8: bool):
    import ropelab

    scales = dict(k_scale=SCALES[0], v_scale=SCALES[1]) if fp8 else {}
    args = {k: _host(v) for k, v in t.items()}
    qkv = args.pop("qkv")
    return lambda: ropelab.fused_qknorm_rope_kv(qkv, **args, **scales, **options(case))


def _scatter(torch, case, qkv, slots, k_cache, v_cache, fp8, inv):
    """K and V of ``qkv`` (``[tokens, heads, head_dim]``) into their cache rows."""
    hq, hk, _ = case.heads
    for cache, part, scale in ((k_cache, qkv[:, hq:hq + hk], inv[0]),
                               (v_cache, qkv[:, hq + hk:], inv[1])):
        if fp8:
            part = (part.float() * scale).to(torch.float8_e4m3fn).view(torch.uint8)
        cache.view(-1, part.shape[1], case.head_dim).index_copy_(0, slots, part)


def fused_scatter_launcher(case: Case, t: dict, fp8: bool):
    import torch

    import ropelab

    inv = [torch.tensor(np.float32(1.0 / s), device=t["qkv"].device) for s in SCALES]
    heads = t["qkv"].view(case.tokens, -1, case.head_dim)
    fused_args = {k: _host(t[k]) for k in ("q_weight", "k_weight", "positions")}
    qkv = _host(t["qkv"])

    def launch():
        ropelab.fused_qknorm_rope(qkv, **fused_args, **options(case))
        _scatter(torch, case, heads, t["slot_mapping"], t["k_cache"], t["v_cache"], fp8, inv)

    return launch


def cos_sin_table(case: Case, device: str):
    """float32 ``(cos, sin)`` ``[MAX_POSITION, head_dim / 2]``, computed in float64."""
    import torch

    from ... import reference

    theta = np.outer(np.arange(MAX_POSITION), reference.inv_freq(case.head_dim))
    return (torch.from_numpy(np.cos(theta).astype(np.float32)).to(device),
            torch.from_numpy(np.sin(theta).astype(np.float32)).to(device))


def chain(qkv, wq, wk, pos, slots, k_rows, v_rows, cos, sin, inv_k, inv_v, *, heads,
          head_dim, interleave, fp8, eps=1e-6):
    """The serving step in plain torch (the caches as ``[slots, heads, head_dim]`` rows): what
    ``torch.compile`` gets to fuse."""
    import torch

    hq, hk, hv = heads
    x = qkv.view(qkv.shape[0], hq + hk + hv, head_dim)
    c, s = cos[pos][:, None, :], sin[pos][:, None, :]

    def norm_rope(h, w):
        h = h.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        if interleave:
            a, b = h[..., 0::2], h[..., 1::2]
            return torch.stack((a * c - b * s, a * s + b * c), -1).flatten(-2).to(qkv.dtype)
        a, b = h[..., :head_dim // 2], h[..., head_dim // 2:]
        return torch.cat((a * c - b * s, b * c + a * s), -1).to(qkv.dtype)

    q = norm_rope(x[:, :hq], wq)
    k = norm_rope(x[:, hq:hq + hk], wk)
    v = x[:, hq + hk:]
    if fp8:
        k = (k.float() * inv_k).to(torch.float8_e4m3fn).view(torch.uint8)
        v = (v.float() * inv_v).to(torch.float8_e4m3fn).view(torch.uint8)
    x[:, :hq] = q
    k_rows.index_copy_(0, slots, k)
    v_rows.index_copy_(0, slots, v)


def compiled_launcher(case: Case, t: dict, fp8: bool, backend: str = "inductor"):
    import functools

    import torch

    device = t["qkv"].device
    cos, sin = cos_sin_table(case, device)
    inv = [torch.tensor(np.float32(1.0 / s), device=device) for s in SCALES]
    fn = torch.compile(functools.partial(chain, heads=case.heads, head_dim=case.head_dim,
                                         interleave=case.interleave, fp8=fp8),
                       fullgraph=True, dynamic=False, backend=backend)
    # The caches as rows of heads, views made here: a view of a graph input taken inside the
    # compiled function could make the mutation a copy of the whole cache.
    rows = [t[c].view(-1, *t[c].shape[2:]) for c in ("k_cache", "v_cache")]
    args = (t["qkv"], t["q_weight"], t["k_weight"], t["positions"].long(), t["slot_mapping"],
            rows[0], rows[1], cos, sin, inv[0], inv[1])
    return lambda: fn(*args)


def copy_launcher(nbytes: int, device: str):
    import torch

    src = torch.randint(0, 256, (nbytes // 2,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


LAUNCHERS = {"op": op_launcher, "fused+scatter": fused_scatter_launcher,
             "compiled_chain": compiled_launcher}
