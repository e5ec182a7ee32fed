"""ropelab's operations as PyTorch custom operators: ``torch.compile``, autograd, CUDA graphs.

``import ropelab`` never imports torch.  ``import ropelab.torch_ops`` does, and registers:

* ``torch.ops.ropelab.rope(x, positions, config) -> Tensor`` -- plain RoPE into a new tensor;
  differentiable (its backward is the inverse rotation, run by a ropelab kernel);
* ``torch.ops.ropelab.rope_out(x, positions, out!, config)`` -- the same into ``out`` (which may
  be ``x`` itself: in place); declares that it mutates ``out``;
* ``torch.ops.ropelab.fused_qknorm_rope(qkv!, q_weight, k_weight, positions, config,
  cos_sin_cache=None)`` -- the fused QK-RMSNorm + RoPE, in place on ``qkv``; declares that it
  mutates ``qkv``;
* ``torch.ops.ropelab.fused_qknorm_rope_functional(qkv, q_weight, k_weight, positions, config,
  cos_sin_cache=None) -> Tensor`` -- the same into a new tensor, differentiable in ``qkv`` and
  both weights through ``torch.ops.ropelab.fused_qknorm_rope_backward`` (ropelab's backward
  kernel); a user ``cos_sin_cache`` is read, never differentiated.

Users call this module's :func:`rope` and :func:`fused_qknorm_rope`, with the keywords of
``ropelab.rope`` / ``ropelab.fused_qknorm_rope`` (the way FlashInfer exposes its ops).  They
turn the keywords into the op's ``config`` string and pick the functional or the mutating op.
Torch dynamo cannot trace into ropelab's public functions (it hands the numba kernel 0-d
arrays), while these ops are opaque to it, so a model compiled with
``torch.compile(fullgraph=True)`` has no graph break.  Importing this module also teaches
dynamo to replace a call to ``ropelab.rope`` / ``ropelab.fused_qknorm_rope`` that it meets
while tracing by the op (torch >= 2.5), so code written against the public functions compiles
too; their eager calls are unchanged (and do not record a gradient: use this module's
:func:`rope` for training).

Non-tensor options are plain values, dicts, or ``ropelab.scaling`` objects.  Inside a compiled
function, build scaling objects outside it (a module attribute, or in a model's ``__init__``)
or pass Hugging Face style dicts: dynamo cannot rebuild a frozen dataclass constructed while
it traces.  Before torch 2.12 it cannot take one built outside either (seen on torch 2.11 on
the H200: "can't reconstruct arbitrary frozen dataclass instances"): there, pass the dict form
(``{"rope_type": "linear", "factor": 2.0}``) inside compiled code.

Where the op runs follows the tensors:

* CUDA tensors: the device path of ``ropelab.rope`` / ``fused_qknorm_rope``, on the tensors where
  they lie, on PyTorch's current stream (``with torch.cuda.stream(s):`` picks another), with no
  synchronization, so the op can be captured in a ``torch.cuda.CUDAGraph`` (after one warm-up
  call outside the capture, which compiles the kernel and uploads its tables).
* CPU tensors: the host path (NumPy views of the tensors' memory; on a machine without a GPU the
  kernel runs on the Numba CUDA simulator).  That is slow, and it exists so that registration,
  compilation and autograd are tested in CI without a GPU.

Tensors are passed through unchanged: dtypes (``torch.bfloat16`` as its 16-bit patterns on the
host path), strides and positions' dtype are ropelab's to accept or refuse, with its own errors.
How the ops carry their arguments, and how to add one: :mod:`ropelab.torch_args`.
"""

from __future__ import annotations

import json

import torch

from . import fused_qknorm_rope as _public_fused
from .ops.fused_backward import fused_qknorm_rope_backward as _public_backward
from . import rope as _public_rope
from .errors import RopeInputError
from .kernels import VARIANTS
from .problem import INVERSE
from .torch_args import call_public, decode, encode, from_host, result_like

# The variant that runs the backward of a variant without an inverse rotation (the seed's
# kernels: flat, block2d, pack4): freq_table computes the same float32 frequencies
# ``base ** (-2i / rotary_dim)`` and rotates by ``-angle`` with ``inverse=True``.
BACKWARD_FALLBACK = "freq_table"

_NO_GRAD_FUSED = ("the in-place op ropelab::fused_qknorm_rope has no gradient (autograd cannot "
                  "differentiate an op that overwrites its input); call "
                  "ropelab.torch_ops.fused_qknorm_rope, which returns a new differentiable "
                  "tensor when autograd needs one, or run under torch.no_grad()")


def _refuse_cache_grad(cos_sin_cache, recording: bool) -> None:
    """A cos_sin_cache that would need a gradient (``recording``: autograd is on): refused, as
    no op computes one and a gradient is never dropped silently."""
    if recording and cos_sin_cache is not None and cos_sin_cache.requires_grad:
        raise RopeInputError("cos_sin_cache requires grad, but ropelab's fused ops read the cache "
                             "and give it no gradient; pass cos_sin_cache.detach() (a fixed "
                             "table), or compute a learned rotation in torch")


# ---- ropelab::rope -------------------------------------------------------------------------------

@torch.library.custom_op("ropelab::rope", mutates_args=(), device_types=("cpu", "cuda"))
def _rope_op(x: torch.Tensor, positions: torch.Tensor | None, config: str) -> torch.Tensor:
    out = result_like(x)
    call_public(_public_rope, {"x": x, "positions": positions, "out": out}, decode(config))
    return out


@_rope_op.register_fake
def _(x, positions, config):
    return result_like(x)


@torch.library.custom_op("ropelab::rope_out", mutates_args=("out",), device_types=("cpu", "cuda"))
def _rope_out_op(x: torch.Tensor, positions: torch.Tensor | None, out: torch.Tensor,
                 config: str) -> None:
    call_public(_public_rope, {"x": x, "positions": positions, "out": out}, decode(config))


@_rope_out_op.register_fake
def _(x, positions, out, config):
    return None


# ex: begin torch_rope_backward
def backward_config(config: str) -> str:
    """The config of the call that undoes ``config``'s rotation: ``inverse`` flipped, on the same
    variant when it has an inverse rotation, else on :data:`BACKWARD_FALLBACK` with the same
    base, rotary_dim, layout, scaling and fastmath (variant-specific options dropped)."""
    options = json.loads(config)
    options["inverse"] = not options.get("inverse", False)
    name = options.get("variant")  # None: ropelab's default choice (flat, or rope_rows)
    has_inverse = name == "rope_rows" or (name in VARIANTS and INVERSE in VARIANTS[name].features)
    if not has_inverse:
        keep = ("base", "rotary_dim", "interleave", "inverse", "scaling", "fastmath")
        options = {k: v for k, v in options.items() if k in keep}
        options["variant"] = BACKWARD_FALLBACK
    return json.dumps(options, sort_keys=True)


def _rope_setup_context(ctx, inputs, output):
    x, positions, config = inputs
    ctx.save_for_backward(positions)
    ctx.backward = backward_config(config)


def _rope_backward(ctx, grad):
    # y = R(p) x with R orthogonal (times YaRN's attention factor m), so dL/dx = m R(p)^T dL/dy:
    # the inverse rotation of the incoming gradient, by the same kernel family.  The gradient
    # may arrive expanded or strided (from a sum, a slice): the kernel wants it dense.
    (positions,) = ctx.saved_tensors
    return torch.ops.ropelab.rope(grad.contiguous(), positions, ctx.backward), None, None


torch.library.register_autograd("ropelab::rope", _rope_backward, setup_context=_rope_setup_context)
# ex: end torch_rope_backward


def rope(x: torch.Tensor, *, variant: str | None = None, positions: torch.Tensor | None = None,
         base: float = 10000.0, rotary_dim: int | None = None, interleave: bool = True,
         inverse: bool = False, scaling=None, out: torch.Tensor | None = None,
         fastmath: bool = True, threads_per_block: int | None = None,
         check_positions: bool = False, **variant_options) -> torch.Tensor:
    """Rotary position embedding of a tensor, as the custom op ``ropelab::rope``.

    The arguments are those of :func:`ropelab.rope` (see it for each one), except ``stream``:
    the op runs on PyTorch's current stream.  ``x`` and ``positions`` are torch tensors, on the
    CPU (host path; the simulator without a GPU) or on a CUDA device (device path).

    Without ``out``, returns a new C-contiguous tensor and is differentiable in ``x``: the
    backward pass is the inverse rotation of the gradient by a ropelab kernel (the same variant
    with ``inverse`` flipped; the seed variants without an inverse rotation use ``freq_table``).
    With ``out`` (``out=x`` for in place), writes ``out`` and returns it; that form has no
    gradient, so an ``x`` or ``out`` that requires grad raises a RuntimeError.

    Works inside ``torch.compile(fullgraph=True)`` (no graph break) and inside CUDA graphs.

    Raises
    ------
    TypeError, ropelab.RopeInputError
        As :func:`ropelab.rope`, from the op's implementation, before any kernel runs.
    RuntimeError
        ``out=`` given while autograd would need the gradient.

    Examples
    --------
    >>> import torch, ropelab.torch_ops as rt
    >>> x = torch.ones(3, 8, requires_grad=True)
    >>> y = rt.rope(x, positions=torch.arange(3, dtype=torch.int32))
    >>> y.sum().backward()          # the gradient comes from the inverse rotation kernel
    >>> bool(torch.allclose(x.grad[0], torch.ones(8)))  # position 0 does not rotate
    True
    """
    config = encode(variant=variant, base=base, rotary_dim=rotary_dim, interleave=interleave,
                    inverse=inverse, scaling=scaling, fastmath=fastmath,
                    threads_per_block=threads_per_block, check_positions=check_positions,
                    **variant_options)
    if out is None:
        return torch.ops.ropelab.rope(x, positions, config)
    if torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
        raise RuntimeError("ropelab.torch_ops.rope(..., out=...) writes out in place and has no "
                           "gradient; call it without out= (a new tensor, differentiable), or "
                           "under torch.no_grad()")
    torch.ops.ropelab.rope_out(x, positions, out, config)
    return out


# ---- ropelab::fused_qknorm_rope ------------------------------------------------------------------

@torch.library.custom_op("ropelab::fused_qknorm_rope", mutates_args=("qkv",),
                         device_types=("cpu", "cuda"))
def _fused_op(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
              positions: torch.Tensor, config: str,
              cos_sin_cache: torch.Tensor | None = None) -> None:
    call_public(_public_fused, {"qkv": qkv, "q_weight": q_weight, "k_weight": k_weight,
                                "positions": positions, "cos_sin_cache": cos_sin_cache},
                decode(config))


@_fused_op.register_fake
def _(qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    return None


# A mutating op cannot have an autograd formula (torch.library refuses one), and custom_op's
# default autograd kernel lets a gradient pass silently (an in-place op on a tracked tensor keeps
# the old grad_fn).  This kernel at the Autograd key refuses instead, in eager mode and while
# torch.compile traces, and otherwise hands the call on to the CPU/CUDA implementation.  (The
# keyset arithmetic is torch-internal API, the one way to redispatch below autograd here.)
_LIBRARY = torch.library.Library("ropelab", "FRAGMENT")


def _fused_autograd(keyset, qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    if torch.is_grad_enabled() and any(t.requires_grad for t in (qkv, q_weight, k_weight)):
        raise RuntimeError(_NO_GRAD_FUSED)
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    below = keyset & torch._C._after_autograd_keyset
    return torch.ops.ropelab.fused_qknorm_rope.default.redispatch(
        below, qkv, q_weight, k_weight, positions, config, cos_sin_cache)


def _override_autograd(name: str, fn) -> None:
    # custom_op registered its own Autograd kernel through the same Python registry; torch 2.8 to
    # 2.12 refuse a second one unless asked (allow_override, default True from 2.13 on), and
    # torch before 2.8 has no such argument (nor the check).
    try:
        _LIBRARY.impl(name, fn, "Autograd", with_keyset=True, allow_override=True)
    except TypeError:
        _LIBRARY.impl(name, fn, "Autograd", with_keyset=True)


_override_autograd("fused_qknorm_rope", _fused_autograd)


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
    config = encode(num_heads_q=num_heads_q, num_heads_k=num_heads_k, num_heads_v=num_heads_v,
                    head_dim=head_dim, eps=eps, base=base, rotary_dim=rotary_dim,
                    interleave=interleave, yarn=yarn, fastmath=fastmath,
                    warps_per_block=warps_per_block, heads_per_warp=heads_per_warp, cache=cache,
                    max_positions=max_positions)
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    if torch.is_grad_enabled() and any(t.requires_grad for t in (qkv, q_weight, k_weight)):
        return torch.ops.ropelab.fused_qknorm_rope_functional(qkv, q_weight, k_weight, positions,
                                                              config, cos_sin_cache)
    torch.ops.ropelab.fused_qknorm_rope(qkv, q_weight, k_weight, positions, config, cos_sin_cache)
    return qkv


# ex: begin torch_fused_backward
# ---- the fused op's gradient: an out-of-place op and its backward op ---------------------------
# The forward saves its input qkv (autograd keeps it; nothing extra is written) and the backward
# recomputes each head's RMS from it: see ropelab.kernels.fused_qknorm_rope.backward for why.

# The forward's options that the backward takes (warps_per_block / heads_per_warp are the
# forward kernel's geometry).
_BACKWARD_OPTIONS = ("num_heads_q", "num_heads_k", "num_heads_v", "head_dim", "eps", "base",
                     "rotary_dim", "interleave", "yarn", "fastmath", "cache", "max_positions")


@torch.library.custom_op("ropelab::fused_qknorm_rope_functional", mutates_args=(),
                         device_types=("cpu", "cuda"))
def _fused_functional_op(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                         positions: torch.Tensor, config: str,
                         cos_sin_cache: torch.Tensor | None = None) -> torch.Tensor:
    out = result_like(qkv)
    out.copy_(qkv)
    call_public(_public_fused, {"qkv": out, "q_weight": q_weight, "k_weight": k_weight,
                                "positions": positions, "cos_sin_cache": cos_sin_cache},
                decode(config))
    return out


@_fused_functional_op.register_fake
def _(qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    return result_like(qkv)


@torch.library.custom_op("ropelab::fused_qknorm_rope_backward", mutates_args=(),
                         device_types=("cpu", "cuda"))
def _fused_backward_op(qkv: torch.Tensor, grad: torch.Tensor, q_weight: torch.Tensor,
                       k_weight: torch.Tensor, positions: torch.Tensor, config: str,
                       cos_sin_cache: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    options = {k: v for k, v in decode(config).items() if k in _BACKWARD_OPTIONS}
    dqkv, dq, dk = call_public(_public_backward, {
        "qkv": qkv, "grad": grad, "q_weight": q_weight, "k_weight": k_weight,
        "positions": positions, "cos_sin_cache": cos_sin_cache}, options)
    if not qkv.is_cuda:
        dqkv, dq, dk = from_host(dqkv, qkv), torch.from_numpy(dq), torch.from_numpy(dk)
    # The weight gradients are float32 sums; the weights' own dtype is what autograd expects.
    return dqkv, dq.to(q_weight.dtype, copy=True), dk.to(k_weight.dtype, copy=True)


@_fused_backward_op.register_fake
def _(qkv, grad, q_weight, k_weight, positions, config, cos_sin_cache=None):
    return result_like(qkv), result_like(q_weight), result_like(k_weight)


def _fused_setup_context(ctx, inputs, output):
    qkv, q_weight, k_weight, positions, config, cos_sin_cache = inputs
    # The wrapper refuses a cache that requires grad before anything runs; a direct call of the
    # op is refused here, at the forward, rather than losing the cache's gradient in backward.
    # (Autograd calls this only while it records, from its Function's forward: grad mode off.)
    _refuse_cache_grad(cos_sin_cache, True)
    ctx.save_for_backward(qkv, q_weight, k_weight, positions, cos_sin_cache)
    ctx.config = config


def _fused_backward(ctx, grad):
    qkv, q_weight, k_weight, positions, cos_sin_cache = ctx.saved_tensors
    dqkv, dq, dk = torch.ops.ropelab.fused_qknorm_rope_backward(
        qkv, grad.contiguous(), q_weight, k_weight, positions, ctx.config, cos_sin_cache)
    return dqkv, dq, dk, None, None, None


torch.library.register_autograd("ropelab::fused_qknorm_rope_functional", _fused_backward,
                                setup_context=_fused_setup_context)
# ex: end torch_fused_backward


# ---- the public functions inside torch.compile ---------------------------------------------------
# Once this module is imported, Dynamo replaces a call to ropelab.rope / fused_qknorm_rope met
# while tracing with the op wrapper above (it cannot trace them: numba would get 0-d arrays), so
# a model calling the public functions compiles with fullgraph=True too; eager calls are the
# same.  Signatures are not compared (the functions grow keywords): an unknown one fails loudly.

def _in_graph(public, wrapper):
    def polyfill(*tensors, stream=None, **options):
        if stream is not None:
            raise TypeError("inside torch.compile ropelab runs on PyTorch's current stream; "
                            "instead of stream=, call it under `with torch.cuda.stream(s):`")
        return wrapper(*tensors, **options)

    polyfill.__name__ = f"{public.__name__}_in_graph"
    substitute = getattr(torch.compiler, "substitute_in_graph", None)  # torch >= 2.5
    if substitute is not None:
        substitute(public, skip_signature_check=True)(polyfill)


_in_graph(_public_rope, rope)
def _fused_in_place(qkv, **options):
    # The public function is in place and refuses a tensor that requires grad (eager); compiled
    # code gets the same contract, not the wrapper's out-of-place autograd form.
    if torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad
            for t in (qkv, options.get("q_weight"), options.get("k_weight"))):
        raise RopeInputError("ropelab.fused_qknorm_rope is in place and has no gradient; for "
                             "training call ropelab.torch_ops.fused_qknorm_rope (a new, "
                             "differentiable tensor), or run under torch.no_grad()")
    return fused_qknorm_rope(qkv, **options)


_in_graph(_public_fused, _fused_in_place)


__all__ = ["BACKWARD_FALLBACK", "backward_config", "decode", "encode", "fused_qknorm_rope", "rope"]
from . import torch_kv  # noqa: E402,F401  (registers the serving op: ropelab::fused_qknorm_rope_kv)
