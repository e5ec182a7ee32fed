"""The serving op as PyTorch custom operators (registered when :mod:`ropelab.torch_ops` is
imported; how: :mod:`ropelab.torch_ops.registry`):

* ``torch.ops.ropelab.fused_qknorm_rope_kv(qkv!, q_weight, k_weight, positions, slot_mapping,
  k_cache!, v_cache!, config, cos_sin_cache=None)``: Q normalized and rotated in place in qkv,
  K and V written into the caches; declares that it mutates ``qkv`` and both caches;
* ``torch.ops.ropelab.fused_qknorm_rope_kv_out(qkv, ..., v_cache!, q_out!, config,
  cos_sin_cache=None)``: the same with Q into ``q_out`` (qkv only read); mutates ``q_out`` and
  both caches.

Users call :func:`fused_qknorm_rope_kv`, with the keywords of
:func:`ropelab.fused_qknorm_rope_kv` (except ``stream``: PyTorch's current stream), which
picks the op and returns the tensor holding Q.  Both ops are opaque to dynamo, so a function
calling them compiles with ``torch.compile(fullgraph=True)``; a call of the public function met
while tracing is replaced by this wrapper.  An FP8 cache may be a ``torch.float8_e4m3fn``
tensor or ``torch.uint8`` (vLLM's); both are handed over as their bytes.

An inference op: nothing here has a gradient.  A tensor that requires grad while autograd is
recording is refused with a RuntimeError before anything runs (the wrapper and the ops'
Autograd kernel both check), rather than letting a gradient vanish.
"""

from __future__ import annotations

import torch

from ..ops.fused_kv import fused_qknorm_rope_kv as _public
from .args import call_public, config_of, encode, on_rows, options_for
from .registry import define, in_graph, recording, refusing_autograd

_NO_GRAD = ("ropelab's serving op fused_qknorm_rope_kv is for inference: it writes caches in "
            "place and has no gradient; run it under torch.no_grad() / torch.inference_mode(), "
            "or detach the tensors that require grad")


def _bits(t: torch.Tensor | None) -> torch.Tensor | None:
    """An FP8 tensor as its bytes (the same memory): what ropelab takes on both paths."""
    return t.view(torch.uint8) if t is not None and t.dtype == torch.float8_e4m3fn else t


def _run(qkv, q_weight, k_weight, positions, slot_mapping, k_cache, v_cache, q_out, config,
         cos_sin_cache) -> None:
    call_public(_public, {"qkv": qkv, "q_weight": q_weight, "k_weight": k_weight,
                          "positions": positions, "slot_mapping": slot_mapping,
                          "k_cache": _bits(k_cache), "v_cache": _bits(v_cache), "q_out": q_out,
                          "cos_sin_cache": cos_sin_cache}, options_for(_public, config))


def _kv_kernel(qkv, q_weight, k_weight, positions, slot_mapping, k_cache, v_cache, config,
               cos_sin_cache=None):
    # A strided qkv (a view of a wider projection) runs on a contiguous copy, written back.
    on_rows(qkv, lambda rows: _run(rows, q_weight, k_weight, positions, slot_mapping, k_cache,
                                   v_cache, None, config, cos_sin_cache), k_cache, v_cache)


def _kv_out_kernel(qkv, q_weight, k_weight, positions, slot_mapping, k_cache, v_cache, q_out,
                   config, cos_sin_cache=None):
    # A strided qkv (only read here) is read from a contiguous copy; a strided q_out is
    # written through a contiguous one.
    on_rows(qkv, lambda rows: on_rows(q_out, lambda out: _run(
        rows, q_weight, k_weight, positions, slot_mapping, k_cache, v_cache, out, config,
        cos_sin_cache), k_cache, v_cache), k_cache, v_cache, q_out, read_only=True)


_KV = define("fused_qknorm_rope_kv(Tensor(a!) qkv, Tensor q_weight, Tensor k_weight, "
             "Tensor positions, Tensor slot_mapping, Tensor(b!) k_cache, Tensor(c!) v_cache, "
             "str config, Tensor? cos_sin_cache=None) -> ()", _kv_kernel,
             lambda *args, **kwargs: None)
_KV_OUT = define("fused_qknorm_rope_kv_out(Tensor qkv, Tensor q_weight, Tensor k_weight, "
                 "Tensor positions, Tensor slot_mapping, Tensor(a!) k_cache, Tensor(b!) v_cache, "
                 "Tensor(c!) q_out, str config, Tensor? cos_sin_cache=None) -> ()",
                 _kv_out_kernel, lambda *args, **kwargs: None)
# An op that writes in place must not drop a gradient without a word: its Autograd kernel
# refuses a tensor that requires grad, then hands the call on below autograd and bumps the
# versions of what the schema says it writes.
refusing_autograd("fused_qknorm_rope_kv", _NO_GRAD)
refusing_autograd("fused_qknorm_rope_kv_out", _NO_GRAD)


# The wrapper's options in order, the key of its remembered config strings.
_KV_OPTIONS = ("num_heads_q", "num_heads_k", "num_heads_v", "head_dim", "k_scale", "v_scale",
               "norm", "eps", "base", "rotary_dim", "interleave", "yarn", "fastmath",
               "warps_per_block", "cache", "max_positions", "check_slots")


def fused_qknorm_rope_kv(qkv: torch.Tensor, *, num_heads_q: int, num_heads_k: int,
                         num_heads_v: int, head_dim: int, q_weight: torch.Tensor,
                         k_weight: torch.Tensor, positions: torch.Tensor,
                         slot_mapping: torch.Tensor, k_cache: torch.Tensor,
                         v_cache: torch.Tensor, k_scale: float | None = None,
                         v_scale: float | None = None, q_out: torch.Tensor | None = None,
                         norm: str = "rms", eps: float = 1e-6, base: float = 10000.0,
                         rotary_dim: int | None = None, interleave: bool = True, yarn=None,
                         fastmath: bool = True, warps_per_block: int | None = None,
                         cache: bool = False, max_positions: int | None = None,
                         cos_sin_cache: torch.Tensor | None = None,
                         check_slots: bool = False) -> torch.Tensor:
    """:func:`ropelab.fused_qknorm_rope_kv` as a custom op (in place, or into ``q_out``);
    returns the tensor holding Q.  Works inside ``torch.compile(fullgraph=True)`` and CUDA
    graphs (after one warm-up call).

    Raises
    ------
    RuntimeError
        A tensor requires grad while autograd records: this op has no gradient.
    TypeError, ropelab.RopeInputError
        As the public function, before any kernel runs.
    """
    if recording(qkv, q_weight, k_weight, k_cache, v_cache, q_out, cos_sin_cache):
        raise RuntimeError(_NO_GRAD)
    if torch.compiler.is_compiling():  # dynamo: encode is evaluated once, as a constant
        config = encode(num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                        num_heads_v=num_heads_v, head_dim=head_dim, k_scale=k_scale,
                        v_scale=v_scale, norm=norm, eps=eps, base=base, rotary_dim=rotary_dim,
                        interleave=interleave, yarn=yarn, fastmath=fastmath,
                        warps_per_block=warps_per_block, cache=cache,
                        max_positions=max_positions, check_slots=check_slots)
    else:  # the remembered string, as the other ops' eager calls (no JSON per call)
        config = config_of(_KV_OPTIONS, (num_heads_q, num_heads_k, num_heads_v, head_dim,
                                         k_scale, v_scale, norm, eps, base, rotary_dim,
                                         interleave, yarn, fastmath, warps_per_block, cache,
                                         max_positions, check_slots))
    if q_out is None:
        _KV(qkv, q_weight, k_weight, positions, slot_mapping, k_cache, v_cache, config,
            cos_sin_cache)
        return qkv
    _KV_OUT(qkv, q_weight, k_weight, positions, slot_mapping, k_cache, v_cache, q_out, config,
            cos_sin_cache)
    return q_out


in_graph(_public, fused_qknorm_rope_kv)

__all__ = ["fused_qknorm_rope_kv"]
