"""``ropelab::fused_qknorm_rope`` (in place) and, for training, its out-of-place form
``ropelab::fused_qknorm_rope_functional`` with the backward op
``ropelab::fused_qknorm_rope_backward`` (ropelab's backward kernel)."""

from __future__ import annotations

import functools

import torch

from .. import fused_qknorm_rope as _public_fused
from ..errors import RopeInputError
from ..ops.call import MISS, fast
from ..ops.fused import fast_scalars as _fused_scalars
from ..ops.fused_backward import fast_scalars as _backward_fast_scalars
from ..ops.fused_backward import fused_qknorm_rope_backward as _public_backward
from .args import (MAX_CONFIGS, call_public, config_of, decoded, encode, fast_scalars, from_host,
                   on_rows, options_for, result_like)
from .registry import (BELOW_AUTOGRAD, add_autograd, below_autograd, define, direct, in_graph,
                       recording, refuse_cache_grad, wrote)

_NO_GRAD_FUSED = ("the in-place op ropelab::fused_qknorm_rope has no gradient (autograd cannot "
                  "differentiate an op that overwrites its input); call "
                  "ropelab.torch_ops.fused_qknorm_rope, which returns a new differentiable "
                  "tensor when autograd needs one, or run under torch.no_grad()")


def _run_fused(qkv, q_weight, k_weight, positions, config, cos_sin_cache, out=None):
    """``ropelab.fused_qknorm_rope`` in place on ``qkv`` (or from ``qkv`` into ``out``); the
    routes of the rope op's ``_run_rope`` (:mod:`ropelab.torch_ops.rope_op`), and first of all
    the engine's fast path, keyed as the public function keys it (a validated call shape
    launches again without the public function's keyword binding)."""
    if qkv.is_cuda and not (torch.is_grad_enabled() and (
            qkv.requires_grad or q_weight.requires_grad or k_weight.requires_grad)):
        arrays = ((qkv, q_weight, k_weight, positions) if out is None else
                  (qkv, out, q_weight, k_weight, positions))
        if cos_sin_cache is not None:
            arrays += (cos_sin_cache,)
        result, _ = fast(fast_scalars(_public_fused, _fused_scalars, config, out is not None),
                         arrays, None)
        if result is not MISS:
            return result
        options = options_for(_public_fused, config)
        if out is not None:
            return _public_fused(qkv=qkv, q_weight=q_weight, k_weight=k_weight,
                                 positions=positions, cos_sin_cache=cos_sin_cache, out=out,
                                 **options)
        if cos_sin_cache is None:
            return _public_fused(qkv=qkv, q_weight=q_weight, k_weight=k_weight,
                                 positions=positions, **options)
        return _public_fused(qkv=qkv, q_weight=q_weight, k_weight=k_weight, positions=positions,
                             cos_sin_cache=cos_sin_cache, **options)
    return call_public(_public_fused, {"qkv": qkv, "q_weight": q_weight, "k_weight": k_weight,
                                       "positions": positions, "cos_sin_cache": cos_sin_cache,
                                       "out": out}, options_for(_public_fused, config))


def _fused_kernel(qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    # A strided qkv (a view of a wider projection) runs on a contiguous copy, written back.
    on_rows(qkv, lambda rows: _run_fused(rows, q_weight, k_weight, positions, config,
                                         cos_sin_cache))


_FUSED = define("fused_qknorm_rope(Tensor(a!) qkv, Tensor q_weight, Tensor k_weight, "
                "Tensor positions, str config, Tensor? cos_sin_cache=None) -> ()",
                _fused_kernel, lambda qkv, q_weight, k_weight, positions, config,
                cos_sin_cache=None: None)


# A mutating op cannot have an autograd formula, and a gradient must never pass silently (an
# in-place write on a tracked tensor would keep its old grad_fn): this Autograd kernel refuses,
# in eager mode and while torch.compile traces, and otherwise hands the call on to the CPU/CUDA
# kernel.
def _fused_autograd(keyset, qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    if recording(qkv, q_weight, k_weight):
        raise RuntimeError(_NO_GRAD_FUSED)
    refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    _FUSED.redispatch(keyset & BELOW_AUTOGRAD, qkv, q_weight, k_weight, positions, config,
                      cos_sin_cache)
    wrote(qkv)


add_autograd("fused_qknorm_rope", _fused_autograd)

_FUSED_OPTIONS = ("num_heads_q", "num_heads_k", "num_heads_v", "head_dim", "eps", "base",
                  "rotary_dim", "interleave", "yarn", "fastmath", "warps_per_block",
                  "heads_per_warp", "cache", "max_positions")


def fused_qknorm_rope(qkv: torch.Tensor, *, num_heads_q: int, num_heads_k: int, num_heads_v: int,
                      head_dim: int, q_weight: torch.Tensor, k_weight: torch.Tensor,
                      positions: torch.Tensor, eps: float = 1e-6, base: float = 10000.0,
                      rotary_dim: int | None = None, interleave: bool = True, yarn=None,
                      fastmath: bool = True, warps_per_block: int | None = None,
                      heads_per_warp: int | None = None, cache: bool = False,
                      max_positions: int | None = None,
                      cos_sin_cache: torch.Tensor | None = None) -> torch.Tensor:
    """QK-RMSNorm + RoPE in place on ``qkv``, as the custom op ``ropelab::fused_qknorm_rope``.

    The arguments are those of :func:`ropelab.fused_qknorm_rope`, except ``stream`` (the op runs
    on PyTorch's current stream); returns ``qkv``.  Works inside
    ``torch.compile(fullgraph=True)`` and CUDA graphs.

    When autograd needs a gradient (grad mode on and ``qkv``, ``q_weight`` or ``k_weight``
    requiring grad) the call is out of place instead: ``qkv`` is left as it is and a new tensor
    is returned (the op ``ropelab::fused_qknorm_rope_functional``), whose backward runs
    ropelab's backward kernel (:func:`ropelab.ops.fused_backward.fused_qknorm_rope_backward`,
    from the saved input ``qkv``) and gives ``qkv``, ``q_weight`` and ``k_weight`` their
    gradients.  Use the return value.

    Parameters
    ----------
    cos_sin_cache : float32 tensor ``[max_pos, rotary_dim]``, optional
        A user cos/sin table (each row its cos half, then its sin half; e.g.
        ``torch.from_numpy(ropelab.tables.flux_cache(ids))`` for FLUX), on ``qkv``'s device;
        ``positions`` index its rows, as in :func:`ropelab.fused_qknorm_rope` (it excludes
        ``cache``, ``yarn`` and a non-default ``base``).  The forward and the backward both read
        it; it gets no gradient, so one that requires grad (under grad mode) raises
        :class:`ropelab.RopeInputError` before any kernel runs: pass ``cos_sin_cache.detach()``.

    Examples
    --------
    >>> import torch, ropelab.torch_ops as rt
    >>> qkv = torch.ones(1, 3 * 64)
    >>> w = torch.ones(64)
    >>> _ = rt.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
    ...                          q_weight=w, k_weight=w, positions=torch.zeros(1, dtype=torch.int32))
    >>> bool(torch.allclose(qkv, torch.ones(1, 3 * 64), atol=1e-3))
    True
    """
    if torch.compiler.is_compiling():
        config = encode(num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                        num_heads_v=num_heads_v, head_dim=head_dim, eps=eps, base=base,
                        rotary_dim=rotary_dim, interleave=interleave, yarn=yarn,
                        fastmath=fastmath, warps_per_block=warps_per_block,
                        heads_per_warp=heads_per_warp, cache=cache, max_positions=max_positions)
        plain = False
    else:
        config = config_of(_FUSED_OPTIONS, (num_heads_q, num_heads_k, num_heads_v, head_dim, eps,
                                            base, rotary_dim, interleave, yarn, fastmath,
                                            warps_per_block, heads_per_warp, cache,
                                            max_positions))
        plain = direct(qkv, q_weight, k_weight, positions, cos_sin_cache)
    refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    if recording(qkv, q_weight, k_weight):
        if plain:
            return _FusedGrad.apply(None, qkv, q_weight, k_weight, positions, config,
                                    cos_sin_cache)
        return _FUSED_FUNCTIONAL(qkv, q_weight, k_weight, positions, config, cos_sin_cache)
    if plain:
        _fused_kernel(qkv, q_weight, k_weight, positions, config, cos_sin_cache)
        wrote(qkv)
    else:
        _FUSED(qkv, q_weight, k_weight, positions, config, cos_sin_cache)
    return qkv


# ex: begin torch_fused_backward
# ---- the fused op's gradient: an out-of-place op and its backward op ---------------------------
# The forward saves its input qkv (autograd keeps it; nothing extra is written) and the backward
# recomputes each head's RMS from it: see ropelab.kernels.fused_qknorm_rope.backward for why.

# The forward's options that the backward takes (warps_per_block / heads_per_warp are the
# forward kernel's geometry).
_BACKWARD_OPTIONS = ("num_heads_q", "num_heads_k", "num_heads_v", "head_dim", "eps", "base",
                     "rotary_dim", "interleave", "yarn", "fastmath", "cache", "max_positions")


@functools.lru_cache(maxsize=MAX_CONFIGS)
def _backward_options(config: str) -> dict:
    """The backward's keywords from the forward's config (remembered: read, never changed),
    with the weight gradients asked for in the weights' dtype: the reduction rounds them, so
    no cast launches follow the backward."""
    options = {k: v for k, v in decoded(config).items() if k in _BACKWARD_OPTIONS}
    options["weight_grad_dtype"] = "storage"
    return options


@functools.lru_cache(maxsize=MAX_CONFIGS)
def _backward_scalars(config: str) -> tuple:
    """The backward's fast-path scalars for the forward's config (its keywords as above)."""
    return fast_scalars(_public_backward, _backward_fast_scalars, encode(**_backward_options(config)))


def _fused_functional_kernel(qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    # One pass: the out-of-place kernel reads qkv and writes a new tensor (Q and K normalized
    # and rotated, V copied), instead of a copy of qkv and then the in-place kernel over it.
    # The kernel takes C-contiguous rows: a strided qkv is made contiguous first.
    out = result_like(qkv)
    _run_fused(qkv if qkv.is_contiguous() else qkv.contiguous(), q_weight, k_weight, positions,
               config, cos_sin_cache, out)
    return out


def _fused_backward_kernel(qkv, grad, q_weight, k_weight, positions, config, cos_sin_cache=None):
    result = MISS
    # The engine's fast path, as in _run_fused, in grad mode too: below autograd nothing here is
    # recorded, and the fast key holds each tensor's requires_grad under grad mode, so a call
    # whose tensors need the public function's detach misses and goes the long way.
    if qkv.is_cuda and not recording(qkv, grad, q_weight, k_weight):
        arrays = (qkv, grad, q_weight, k_weight, positions)
        if cos_sin_cache is not None:
            arrays += (cos_sin_cache,)
        result, _ = fast(_backward_scalars(config), arrays, None)
    if result is MISS:
        result = call_public(_public_backward, {
            "qkv": qkv, "grad": grad, "q_weight": q_weight, "k_weight": k_weight,
            "positions": positions, "cos_sin_cache": cos_sin_cache}, _backward_options(config))
    dqkv, dq, dk = result
    if not qkv.is_cuda:  # NumPy results of the host path (bfloat16 as its bits)
        dqkv, dq, dk = from_host(dqkv, qkv), from_host(dq, q_weight), from_host(dk, k_weight)
    return dqkv, dq, dk


_FUSED_FUNCTIONAL = define(
    "fused_qknorm_rope_functional(Tensor qkv, Tensor q_weight, Tensor k_weight, "
    "Tensor positions, str config, Tensor? cos_sin_cache=None) -> Tensor",
    _fused_functional_kernel,
    lambda qkv, q_weight, k_weight, positions, config, cos_sin_cache=None: result_like(qkv))
_FUSED_BACKWARD = define(
    "fused_qknorm_rope_backward(Tensor qkv, Tensor grad, Tensor q_weight, Tensor k_weight, "
    "Tensor positions, str config, Tensor? cos_sin_cache=None) -> (Tensor, Tensor, Tensor)",
    _fused_backward_kernel,
    lambda qkv, grad, q_weight, k_weight, positions, config, cos_sin_cache=None: (
        result_like(qkv), result_like(q_weight), result_like(k_weight)))


class _FusedGrad(torch.autograd.Function):
    """The functional fused op under autograd: saves the input ``qkv`` and the weights, and its
    backward is ropelab's backward kernel.  ``below``: as for the rope op's ``_RopeGrad``
    (:mod:`ropelab.torch_ops.rope_op`)."""

    @staticmethod
    def forward(ctx, below, qkv, q_weight, k_weight, positions, config, cos_sin_cache):
        ctx.save_for_backward(qkv, q_weight, k_weight, positions, cos_sin_cache)
        ctx.config = config
        if below is None:
            return _fused_functional_kernel(qkv, q_weight, k_weight, positions, config,
                                            cos_sin_cache)
        return _FUSED_FUNCTIONAL.redispatch(below, qkv, q_weight, k_weight, positions, config,
                                            cos_sin_cache)

    @staticmethod
    def backward(ctx, grad):
        qkv, q_weight, k_weight, positions, cos_sin_cache = ctx.saved_tensors
        grad = grad.contiguous()
        if not torch.is_grad_enabled() and direct(qkv, grad, q_weight, k_weight, positions,
                                                   cos_sin_cache):
            dqkv, dq, dk = _fused_backward_kernel(qkv, grad, q_weight, k_weight, positions,
                                                  ctx.config, cos_sin_cache)
        else:  # traced (or create_graph=True, which the backward op refuses)
            dqkv, dq, dk = _FUSED_BACKWARD(qkv, grad, q_weight, k_weight, positions, ctx.config,
                                           cos_sin_cache)
        return None, dqkv, dq, dk, None, None, None


def _fused_functional_autograd(keyset, qkv, q_weight, k_weight, positions, config,
                               cos_sin_cache=None):
    # A cache that would need a gradient is refused before anything runs (no op computes one).
    refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    if recording(qkv, q_weight, k_weight):
        return _FusedGrad.apply(keyset & BELOW_AUTOGRAD, qkv, q_weight, k_weight, positions,
                                config, cos_sin_cache)
    return below_autograd(_FUSED_FUNCTIONAL, _fused_functional_kernel, keyset, qkv, q_weight,
                          k_weight, positions, config, cos_sin_cache)


def _fused_backward_autograd(keyset, qkv, grad, q_weight, k_weight, positions, config,
                             cos_sin_cache=None):
    if recording(qkv, grad, q_weight, k_weight, cos_sin_cache):
        raise RuntimeError("ropelab::fused_qknorm_rope_backward has no gradient of its own (no "
                           "double backward): call backward() without create_graph=True")
    return below_autograd(_FUSED_BACKWARD, _fused_backward_kernel, keyset, qkv, grad, q_weight,
                          k_weight, positions, config, cos_sin_cache)


add_autograd("fused_qknorm_rope_functional", _fused_functional_autograd)
add_autograd("fused_qknorm_rope_backward", _fused_backward_autograd)
# ex: end torch_fused_backward


def _fused_in_place(qkv, **options):
    # Inside torch.compile, ropelab.fused_qknorm_rope keeps its eager contract (in place, and a
    # tensor that requires grad is refused), not the wrapper's out-of-place autograd form.
    # out=qkv is the in-place call; a separate out has no op here (its schema would be another
    # one): a clear refusal instead of dynamo's TypeError.
    out = options.pop("out", None)
    if out is not None and out is not qkv:
        raise RopeInputError("inside torch.compile, ropelab.fused_qknorm_rope(..., out=) is not "
                             "supported; call ropelab.torch_ops.fused_qknorm_rope (a new tensor "
                             "when autograd needs one), or make the call outside the compiled "
                             "region")
    if torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad
            for t in (qkv, options.get("q_weight"), options.get("k_weight"))):
        raise RopeInputError("ropelab.fused_qknorm_rope is in place and has no gradient; for "
                             "training call ropelab.torch_ops.fused_qknorm_rope (a new, "
                             "differentiable tensor), or run under torch.no_grad()")
    return fused_qknorm_rope(qkv, **options)


in_graph(_public_fused, _fused_in_place)
