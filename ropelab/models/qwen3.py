"""Qwen3's attention with ropelab's fused QK-RMSNorm + RoPE inside: :func:`patch_qwen3`.

Qwen3's attention (``transformers.models.qwen3.modeling_qwen3.Qwen3Attention``) projects the
hidden states three times (``q_proj``, ``k_proj``, ``v_proj``), applies a per-head RMSNorm to
q and k (``q_norm``, ``k_norm``, one weight vector of ``head_dim`` each), then rotates them
with ``apply_rotary_pos_emb`` (the half-split NeoX layout, cos/sin from ``rope_theta``).  That
norm-then-rotate pair is exactly ``ropelab.fused_qknorm_rope``, which works in place on one
packed ``[tokens, (Hq + Hk + Hv) * head_dim]`` qkv.  :func:`patch_qwen3` rewires every
attention layer of a model to produce that packed qkv with one matrix multiply and to call
the fused op once, through its torch custom op (:mod:`ropelab.torch_ops`), so the patched
model also runs under ``torch.compile(fullgraph=True)``.

What the patch changes and what it keeps, layer by layer:

* ``q_proj``, ``k_proj``, ``v_proj`` become one ``qkv_proj`` whose weight is their weights
  stacked (rows ``[q | k | v]``, biases likewise): the same products, one GEMM (a state dict
  then holds ``qkv_proj.weight`` instead of the three; patch after loading weights);
* ``q_norm`` and ``k_norm`` stay as modules (their weights are the op's ``q_weight`` /
  ``k_weight``; state dicts and optimizers see the same parameters), but their forward is no
  longer called;
* the RoPE cos/sin that the model computes once per forward (``position_embeddings``) are not
  read: the op computes its own from ``position_ids`` and ``rope_theta``;
* the KV cache update, the attention function (eager, SDPA, FlashAttention, as configured)
  and ``o_proj`` are unchanged.

``patch_qwen3(model, qk="transformers")`` is the control: the same fused GEMM, then
transformers' own norm and rotation; timing it beside the fused op separates the two gains.

Training: when autograd needs the op's input, ``ropelab.torch_ops.fused_qknorm_rope`` works
out of place and its backward is ropelab's fused backward kernel, so the patched
forward keeps the tensor the op returns.

torch and transformers are imported when this module is; ``import ropelab`` never imports it.
"""

from __future__ import annotations

import inspect
import types

import torch
from transformers import cache_utils
from transformers.models.qwen3 import modeling_qwen3

import ropelab.torch_ops as rt
from ropelab.kernels.fused_qknorm_rope import HEAD_DIMS
from ropelab.validate import check_bool


class PatchError(ValueError):
    """The model cannot be patched as it is (a RoPE type, head size or norm the op lacks)."""


def _rope_theta(config) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    rope_type = params.get("rope_type", "default")
    if rope_type != "default":
        raise PatchError(f"patch_qwen3 handles rope_type 'default' only (Qwen3's own); this model "
                         f"uses {rope_type!r}, whose frequencies ropelab would have to be told")
    theta = params.get("rope_theta", getattr(config, "rope_theta", None))
    if theta is None:
        raise PatchError("the config has no rope_theta")
    return float(theta)


def _fuse_projections(attn) -> torch.nn.Linear:
    """One Linear computing ``[q_proj(x) | k_proj(x) | v_proj(x)]``: the weights stacked by rows."""
    parts = (attn.q_proj, attn.k_proj, attn.v_proj)
    has_bias = parts[0].bias is not None
    ref = parts[0].weight
    fused = torch.nn.Linear(ref.shape[1], sum(p.weight.shape[0] for p in parts), bias=has_bias,
                            device=ref.device, dtype=ref.dtype)
    with torch.no_grad():
        fused.weight.copy_(torch.cat([p.weight for p in parts], dim=0))
        if has_bias:
            fused.bias.copy_(torch.cat([p.bias for p in parts], dim=0))
    fused.weight.requires_grad_(ref.requires_grad)
    if has_bias:
        fused.bias.requires_grad_(parts[0].bias.requires_grad)
    return fused


def _positions(position_ids, batch: int, seq: int) -> torch.Tensor:
    """``position_ids`` ``[1 or batch, seq]`` as the op's ``[batch * seq]`` int32 positions."""
    if position_ids is None:
        raise PatchError("the patched Qwen3 attention needs position_ids (the decoder layer passes "
                         "them); call the layer with position_ids=...")
    return position_ids.expand(batch, seq).reshape(-1).to(torch.int32)


def _cache_style(update) -> str:
    """How a ``Cache.update`` takes extra arguments: older transformers releases a
    ``cache_kwargs`` dict (sin, cos, cache_position), some none at all, newer ones (5.24 here)
    the attention's keyword arguments."""
    params = inspect.signature(update).parameters
    if "cache_kwargs" in params:
        return "dict"
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return "keywords"
    return "none"


_CACHE_STYLE = _cache_style(cache_utils.Cache.update)


def _update_cache(cache, key_states, value_states, layer_idx, position_embeddings, kwargs):
    if _CACHE_STYLE == "dict":
        cos, sin = position_embeddings
        cache_kwargs = {"sin": sin, "cos": cos, "cache_position": kwargs.get("cache_position")}
        return cache.update(key_states, value_states, layer_idx, cache_kwargs)
    if _CACHE_STYLE == "keywords":
        return cache.update(key_states, value_states, layer_idx, kwargs=kwargs)
    return cache.update(key_states, value_states, layer_idx)


def _attend(self, query_states, key_states, value_states, attention_mask, cache,
            position_embeddings, kwargs):
    """The original forward from the KV cache on: the configured attention function, o_proj."""
    if cache is not None:
        key_states, value_states = _update_cache(cache, key_states, value_states, self.layer_idx,
                                                 position_embeddings, kwargs)
    attention_interface = modeling_qwen3.ALL_ATTENTION_FUNCTIONS.get_interface(
        self.config._attn_implementation, modeling_qwen3.eager_attention_forward)
    attn_output, attn_weights = attention_interface(
        self, query_states, key_states, value_states, attention_mask,
        dropout=0.0 if not self.training else self.attention_dropout, scaling=self.scaling,
        sliding_window=self.sliding_window, **kwargs)
    batch, _, seq = query_states.shape[:3]
    attn_output = attn_output.reshape(batch, seq, -1).contiguous()
    return self.o_proj(attn_output), attn_weights


# ex: begin qwen3_fused_forward
def fused_attention_forward(self, hidden_states, position_embeddings, attention_mask,
                            cache=None, **kwargs):
    """Qwen3Attention.forward with one qkv projection and ropelab's fused QK-norm + RoPE."""
    if cache is None:  # older transformers releases name the cache past_key_values
        cache = kwargs.pop("past_key_values", None)
    batch, seq = hidden_states.shape[:-1]
    hq, hk, d = self.config.num_attention_heads, self.config.num_key_value_heads, self.head_dim
    # One GEMM gives each token's row [Q heads | K heads | V heads], the op's packed layout.
    qkv = self.qkv_proj(hidden_states).view(batch * seq, (hq + 2 * hk) * d)
    # RMSNorm every Q and K head with q_norm's / k_norm's weight, then rotate it, half-split
    # pairs (interleave=False: Qwen3's rotate_half), theta from the config.  In place, unless
    # autograd needs the input: then the result is a new tensor, so keep what the op returns.
    qkv = rt.fused_qknorm_rope(qkv, num_heads_q=hq, num_heads_k=hk, num_heads_v=hk, head_dim=d,
                               q_weight=self.q_norm.weight, k_weight=self.k_norm.weight,
                               positions=_positions(kwargs.get("position_ids"), batch, seq),
                               eps=self.q_norm.variance_epsilon, base=self.ropelab_theta,
                               interleave=self.ropelab_interleave, **self.ropelab_cos_sin)
    qkv = qkv.view(batch, seq, hq + 2 * hk, d).transpose(1, 2)  # [batch, heads, seq, d]
    query_states, key_states, value_states = qkv.split((hq, hk, hk), dim=1)
    # From here on, the original forward: KV cache, attention function, o_proj.
    return _attend(self, query_states, key_states, value_states, attention_mask, cache,
                   position_embeddings, kwargs)
# ex: end qwen3_fused_forward


def qkv_gemm_attention_forward(self, hidden_states, position_embeddings, attention_mask,
                               cache=None, **kwargs):
    """The control: the same one qkv GEMM, then transformers' own q_norm, k_norm and
    apply_rotary_pos_emb.  It separates what the fused GEMM buys from what the fused op buys
    (the bench times it), and it is differentiable."""
    if cache is None:
        cache = kwargs.pop("past_key_values", None)
    batch, seq = hidden_states.shape[:-1]
    hq, hk, d = self.config.num_attention_heads, self.config.num_key_value_heads, self.head_dim
    q, k, v = self.qkv_proj(hidden_states).view(batch, seq, hq + 2 * hk, d).split((hq, hk, hk),
                                                                                  dim=2)
    cos, sin = position_embeddings
    query_states, key_states = modeling_qwen3.apply_rotary_pos_emb(
        self.q_norm(q).transpose(1, 2), self.k_norm(k).transpose(1, 2), cos, sin)
    return _attend(self, query_states, key_states, v.transpose(1, 2), attention_mask, cache,
                   position_embeddings, kwargs)


QK_OPS = {"ropelab": fused_attention_forward, "transformers": qkv_gemm_attention_forward}


def check_attention(attn) -> float:
    """The RoPE theta of a ``Qwen3Attention`` that the fused op can serve, or PatchError."""
    theta = _rope_theta(attn.config)
    if attn.head_dim not in HEAD_DIMS:
        raise PatchError(f"head_dim {attn.head_dim}: ropelab's fused op takes "
                         f"{', '.join(map(str, HEAD_DIMS))}")
    if attn.q_norm.variance_epsilon != attn.k_norm.variance_epsilon:
        raise PatchError("q_norm and k_norm have different eps; the fused op takes one")
    return theta


def patch_attention(attn, *, interleave: bool = False, qk: str = "ropelab",
                    cache: bool = False) -> None:
    """Patch one ``Qwen3Attention`` in place (see :func:`patch_qwen3`)."""
    theta = check_attention(attn)
    interleave = check_bool("interleave", interleave)
    cache = check_bool("cache", cache)
    attn.ropelab_cos_sin = ({"cache": True, "max_positions": attn.config.max_position_embeddings}
                            if cache else {})
    if not is_patched(attn):  # patched before: the projections are fused already
        attn.qkv_proj = _fuse_projections(attn)
        del attn.q_proj, attn.k_proj, attn.v_proj
    attn.ropelab_theta = theta
    # interleave=True (GPT-J pairs) is wrong for Qwen3; tests plant it to prove they can fail.
    attn.ropelab_interleave = interleave
    attn.forward = types.MethodType(QK_OPS[qk], attn)


def patch_qwen3(model, *, interleave: bool = False, qk: str = "ropelab", cache: bool = False):
    """Make every Qwen3 attention layer of ``model`` use one qkv GEMM and ropelab's fused op.

    ``cache=True`` makes the op read cos/sin from its float64-built table of
    ``config.max_position_embeddings`` rows (the long-context path of notebook 06) instead of
    computing a fast-math sin/cos of a float32 angle, whose error grows with the position
    (``ropelab.tolerance``); positions must then lie below ``max_position_embeddings``.

    ``qk="transformers"`` keeps transformers' own norm and rotation after the fused GEMM: the
    control that tells the GEMM's share of a speed-up from the op's.

    ``model`` is any ``transformers`` module holding ``Qwen3Attention`` layers
    (``Qwen3ForCausalLM``, ``Qwen3Model``, a single ``Qwen3DecoderLayer``); it is modified in
    place and returned.  Parameters keep their dtype and device; the fused op runs where they
    are (CUDA: the GPU kernel; CPU: the host path, the simulator without a GPU).

    Patching a patched model again is allowed: its projections stay fused, and the layers take
    this call's ``interleave``, ``qk`` and ``cache`` (so the same options make it a no-op).

    Raises :class:`PatchError` before changing anything for a model ropelab cannot serve
    (a rope_type other than "default", a head_dim the op lacks, different q/k norm eps),
    TypeError for an ``interleave`` or ``cache`` that is not a bool (``"False"`` is truthy: it
    would have meant GPT-J pairs), and ValueError when there is no Qwen3 attention layer to
    patch.
    """
    interleave = check_bool("interleave", interleave)
    cache = check_bool("cache", cache)
    if qk not in QK_OPS:
        raise ValueError(f"qk must be one of {', '.join(QK_OPS)}, got {qk!r}")
    layers = [m for m in model.modules() if isinstance(m, modeling_qwen3.Qwen3Attention)]
    if not layers:
        raise ValueError(f"no Qwen3Attention layer in {type(model).__name__}")
    for attn in layers:  # check all before changing any
        check_attention(attn)
    for attn in layers:
        patch_attention(attn, interleave=interleave, qk=qk, cache=cache)
    return model


def is_patched(attn) -> bool:
    return hasattr(attn, "qkv_proj") and not hasattr(attn, "q_proj")


__all__ = ["PatchError", "QK_OPS", "check_attention", "fused_attention_forward", "is_patched",
           "patch_attention", "patch_qwen3", "qkv_gemm_attention_forward"]
