"""A paged-KV-cache decode loop around a (patched) Qwen3, through ``ropelab.fused_qknorm_rope_kv``:
prefill and greedy decode of a ragged batch, K and V written by the op into pages, attention
over the gathered pages with ``scaled_dot_product_attention``.

**A test harness, not a serving engine.**  It exists to show, on a real model's weights and
layers, that the serving op computes what the model computes: greedy generation through it
gives the tokens of the unpatched model's own ``generate``.  There is no scheduler, no
continuous batching, no preemption, no attention kernel over pages (the pages of each request
are gathered into a dense tensor every step), and it runs the model layer by layer in Python.

What it does keep from a real engine: a pool of fixed-size blocks shared by all requests, a
block table per request (blocks handed out from a shuffled free list, so a request's
consecutive tokens land in blocks far apart), ``slot_mapping`` computed from the block tables,
one flattened ragged batch per step (prefill: every prompt token; decode: one token per
request, positions from each request's own length), and one op call per layer per step that
normalizes and rotates Q and K and writes K and V into the layer's pages.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..torch_ops import fused_qknorm_rope_kv
from . import qwen3


class PagedKV:
    """Every layer's K and V pages, ``[num_blocks, block_size, kv_heads, head_dim]`` each, and
    the block table of each request.  ``dtype``: the model's, or ``torch.float8_e4m3fn``."""

    def __init__(self, layers: int, num_blocks: int, block_size: int, kv_heads: int,
                 head_dim: int, dtype, seed: int = 0):
        shape = (num_blocks, block_size, kv_heads, head_dim)
        fp8 = dtype == torch.float8_e4m3fn
        # Old contents that no request wrote must never be read: fill them with garbage.
        gen = torch.Generator().manual_seed(seed)
        make = (lambda: torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8).view(
            torch.float8_e4m3fn)) if fp8 else (lambda: torch.randn(shape, generator=gen).to(dtype))
        self.k = [make() for _ in range(layers)]
        self.v = [make() for _ in range(layers)]
        self.block_size = block_size
        self.free = list(np.random.default_rng(seed).permutation(num_blocks))
        self.tables: list[list[int]] = []
        self.lengths: list[int] = []

    def add(self) -> int:
        """A new, empty request; its index."""
        self.tables.append([])
        self.lengths.append(0)
        return len(self.tables) - 1

    def extend(self, request: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Room for ``n`` more tokens of ``request``: ``(positions, slots)`` for them."""
        start = self.lengths[request]
        positions = np.arange(start, start + n)
        need = -(-(start + n) // self.block_size) - len(self.tables[request])
        if need > len(self.free):
            raise RuntimeError("the block pool is exhausted (a harness: no preemption)")
        self.tables[request] += [int(self.free.pop()) for _ in range(need)]
        blocks = np.asarray(self.tables[request])[positions // self.block_size]
        self.lengths[request] = start + n
        return positions, blocks * self.block_size + positions % self.block_size

    def slots(self, request: int) -> np.ndarray:
        """The slots of every token ``request`` holds, in position order."""
        p = np.arange(self.lengths[request])
        return np.asarray(self.tables[request])[p // self.block_size] * self.block_size + \
            p % self.block_size

    def gather(self, layer: int, request: int, scales=(None, None)):
        """``(k, v)``: the request's pages of ``layer`` as dense ``[kv_heads, length, head_dim]``
        float32 (FP8 entries times their scale)."""
        idx = torch.from_numpy(self.slots(request))
        out = []
        for pages, scale in zip((self.k[layer], self.v[layer]), scales):
            fp8 = pages.dtype == torch.float8_e4m3fn
            flat = pages.reshape(-1, *pages.shape[2:])
            rows = (flat.view(torch.uint8)[idx].view(torch.float8_e4m3fn) if fp8
                    else flat[idx]).float()
            out.append((rows * scale if fp8 else rows).transpose(0, 1))
        return out


def _attention(attn, layer: int, hidden: torch.Tensor, positions, slots, requests, cache,
               scales) -> torch.Tensor:
    """One patched Qwen3 attention layer on a flattened ragged batch: the serving op writes K
    and V into the pages and Q in place; each request attends over its gathered pages."""
    hq, hk, d = attn.config.num_attention_heads, attn.config.num_key_value_heads, attn.head_dim
    qkv = attn.qkv_proj(hidden).contiguous()  # [tokens, (hq + 2 hk) * d]
    fp8 = cache.k[layer].dtype == torch.float8_e4m3fn
    fused_qknorm_rope_kv(
        qkv, num_heads_q=hq, num_heads_k=hk, num_heads_v=hk, head_dim=d,
        q_weight=attn.q_norm.weight, k_weight=attn.k_norm.weight,
        positions=torch.from_numpy(positions.astype(np.int32)),
        slot_mapping=torch.from_numpy(slots.astype(np.int64)), k_cache=cache.k[layer],
        v_cache=cache.v[layer], eps=attn.q_norm.variance_epsilon, base=attn.ropelab_theta,
        interleave=attn.ropelab_interleave, **(dict(k_scale=scales[0], v_scale=scales[1])
                                               if fp8 else {}))
    q_all = qkv[:, :hq * d].view(-1, hq, d)
    out = []
    for r, (first, count) in requests:
        k, v = cache.gather(layer, r, scales)
        k, v = (t.repeat_interleave(hq // hk, dim=0) for t in (k, v))  # GQA: kv head per group
        q = q_all[first:first + count].transpose(0, 1).float()  # [hq, count, d]
        query_pos = torch.from_numpy(positions[first:first + count])
        causal = torch.arange(k.shape[1])[None, :] <= query_pos[:, None]  # keys up to the query
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=causal, scale=attn.scaling)
        out.append(o.transpose(0, 1).reshape(count, hq * d).to(hidden.dtype))
    return attn.o_proj(torch.cat(out))


def _step(model, token_ids, positions, slots, requests, cache, scales) -> torch.Tensor:
    """The model on one flattened ragged batch; the logits of each request's last token."""
    inner = model.model
    h = inner.embed_tokens(torch.as_tensor(token_ids))
    for i, layer in enumerate(inner.layers):
        h = h + _attention(layer.self_attn, i, layer.input_layernorm(h), positions, slots,
                           requests, cache, scales)
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    last = torch.tensor([first + count - 1 for _, (first, count) in requests])
    return model.lm_head(inner.norm(h[last]))


@torch.no_grad()
def generate(model, prompts: list[list[int]], max_new_tokens: int, *, block_size: int = 4,
             num_blocks: int | None = None, cache_dtype=None, scales=(1.0, 1.0)) -> list[list[int]]:
    """Greedy generation for a batch of prompts of different lengths through the paged cache;
    each request's new tokens.  ``model``: a Qwen3ForCausalLM patched by
    :func:`ropelab.models.qwen3.patch_qwen3`.  ``cache_dtype``: the model's dtype (default) or
    ``torch.float8_e4m3fn`` with ``scales`` ``(k_scale, v_scale)``."""
    layers = list(model.model.layers)
    attn = layers[0].self_attn
    if not qwen3.is_patched(attn):
        raise ValueError("generate needs a model patched by ropelab.models.qwen3.patch_qwen3")
    total = sum(len(p) + max_new_tokens for p in prompts)
    blocks = num_blocks or 2 * (total // block_size + len(prompts))
    cache = PagedKV(len(layers), blocks, block_size, attn.config.num_key_value_heads,
                    attn.head_dim, cache_dtype or attn.qkv_proj.weight.dtype)
    ids = [cache.add() for _ in prompts]
    feed = [list(p) for p in prompts]  # what each request feeds this step: prompt, then 1 token
    new = [[] for _ in prompts]
    for _ in range(max_new_tokens):
        positions, slots, tokens, requests, first = [], [], [], [], 0
        for r, chunk in zip(ids, feed):
            p, s = cache.extend(r, len(chunk))
            positions.append(p)
            slots.append(s)
            tokens += chunk
            requests.append((r, (first, len(chunk))))
            first += len(chunk)
        logits = _step(model, tokens, np.concatenate(positions), np.concatenate(slots),
                       requests, cache, scales)
        nxt = logits.argmax(-1).tolist()
        for r, t in enumerate(nxt):
            new[r].append(int(t))
        feed = [[int(t)] for t in nxt]
    return new
