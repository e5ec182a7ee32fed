"""``ropelab::rope`` and ``ropelab::rope_out``: plain RoPE as torch ops, and its gradient (the
inverse rotation of the incoming gradient, by a ropelab kernel)."""

from __future__ import annotations

import functools
import json

import torch

from .. import rope as _public_rope
from ..kernels import VARIANTS
from ..problem import INVERSE
from .args import call_public, config_of, encode, options_for, result_like
from .registry import (BELOW_AUTOGRAD, add_autograd, below_autograd, define, direct, in_graph,
                       recording, refuse_cache_grad, wrote)

# The variant that runs the backward of a variant without an inverse rotation (the seed's
# kernels: flat, block2d, pack4): freq_table computes the same float32 frequencies
# ``base ** (-2i / rotary_dim)`` and rotates by ``-angle`` with ``inverse=True``.
BACKWARD_FALLBACK = "freq_table"


def _run_rope(x, positions, out, config, cos_sin_cache):
    """``ropelab.rope`` into ``out``.  A CUDA ``x`` that autograd does not track goes straight
    to the public function with only the keywords it needs (the host time of every eager call);
    anything else through :func:`call_public` (NumPy views on the CPU, detached tensors)."""
    options = options_for(_public_rope, config)
    if x.is_cuda and not (x.requires_grad and torch.is_grad_enabled()):
        if cos_sin_cache is None:
            return _public_rope(x=x, positions=positions, out=out, **options)
        return _public_rope(x=x, positions=positions, out=out, cos_sin_cache=cos_sin_cache,
                            **options)
    return call_public(_public_rope, {"x": x, "positions": positions, "out": out,
                                      "cos_sin_cache": cos_sin_cache}, options)


def _rope_kernel(x, positions, config, cos_sin_cache=None):
    out = result_like(x)
    _run_rope(x, positions, out, config, cos_sin_cache)
    return out


def _rope_out_kernel(x, positions, out, config, cos_sin_cache=None):
    _run_rope(x, positions, out, config, cos_sin_cache)


_ROPE = define("rope(Tensor x, Tensor? positions, str config, Tensor? cos_sin_cache=None) "
               "-> Tensor", _rope_kernel,
               lambda x, positions, config, cos_sin_cache=None: result_like(x))
_ROPE_OUT = define("rope_out(Tensor x, Tensor? positions, Tensor(a!) out, str config, "
                   "Tensor? cos_sin_cache=None) -> ()", _rope_out_kernel,
                   lambda x, positions, out, config, cos_sin_cache=None: None)


# ex: begin torch_rope_backward
@functools.lru_cache(maxsize=1024)  # one JSON round trip per forward config, not per call
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


class _RopeGrad(torch.autograd.Function):
    """y = R(p) x with R orthogonal (times YaRN's attention factor m), so dL/dx = m R(p)^T dL/dy:
    the inverse rotation of the incoming gradient, by the same kernel family.  ``below`` is the
    keyset to redispatch to (the op's Autograd kernel), or None: run the kernel function (an
    eager wrapper call, see :func:`ropelab.torch_ops.registry.direct`)."""

    @staticmethod
    def forward(ctx, below, x, positions, config, cos_sin_cache):
        ctx.save_for_backward(positions, cos_sin_cache)
        ctx.backward = backward_config(config)
        if below is None:
            return _rope_kernel(x, positions, config, cos_sin_cache)
        return _ROPE.redispatch(below, x, positions, config, cos_sin_cache)

    @staticmethod
    def backward(ctx, grad):
        positions, cos_sin_cache = ctx.saved_tensors
        # The gradient may arrive expanded or strided (from a sum, a slice): the kernel wants it
        # dense.  A user cos/sin table is read again (it has no gradient: refused at forward).
        grad = grad.contiguous()
        if not torch.is_grad_enabled() and direct(grad, positions, cos_sin_cache):
            dx = _rope_kernel(grad, positions, ctx.backward, cos_sin_cache)
        else:  # traced, or create_graph=True: through the op (differentiable again)
            dx = _ROPE(grad, positions, ctx.backward, cos_sin_cache)
        return None, dx, None, None, None
# ex: end torch_rope_backward


def _rope_autograd(keyset, x, positions, config, cos_sin_cache=None):
    refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    if recording(x):
        return _RopeGrad.apply(keyset & BELOW_AUTOGRAD, x, positions, config, cos_sin_cache)
    return below_autograd(_ROPE, _rope_kernel, keyset, x, positions, config, cos_sin_cache)


def _rope_out_autograd(keyset, x, positions, out, config, cos_sin_cache=None):
    if recording(x, out):
        raise RuntimeError(_NO_GRAD_ROPE_OUT)
    refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    _ROPE_OUT.redispatch(keyset & BELOW_AUTOGRAD, x, positions, out, config, cos_sin_cache)
    wrote(out)


add_autograd("rope", _rope_autograd)
add_autograd("rope_out", _rope_out_autograd)

_NO_GRAD_ROPE_OUT = ("ropelab.torch_ops.rope(..., out=...) writes out in place and has no "
                     "gradient; call it without out= (a new tensor, differentiable), or under "
                     "torch.no_grad()")

# The wrapper's options in order, the key of its remembered config strings.
_ROPE_OPTIONS = ("variant", "base", "rotary_dim", "interleave", "inverse", "scaling", "fastmath",
                 "threads_per_block", "check_positions")


def rope(x: torch.Tensor, *, variant: str | None = None, positions: torch.Tensor | None = None,
         base: float = 10000.0, rotary_dim: int | None = None, interleave: bool = True,
         inverse: bool = False, scaling=None, out: torch.Tensor | None = None,
         fastmath: bool = True, threads_per_block: int | None = None,
         check_positions: bool = False, cos_sin_cache: torch.Tensor | None = None,
         **variant_options) -> torch.Tensor:
    """Rotary position embedding of a tensor, as the custom op ``ropelab::rope``.

    The arguments are those of :func:`ropelab.rope` (see it for each one), except ``stream``:
    the op runs on PyTorch's current stream.  ``x``, ``positions`` and ``cos_sin_cache`` are
    torch tensors, on the CPU (host path; the simulator without a GPU) or on a CUDA device
    (device path).

    Without ``out``, returns a new C-contiguous tensor and is differentiable in ``x``: the
    backward pass is the inverse rotation of the gradient by a ropelab kernel (the same variant
    with ``inverse`` flipped; the seed variants without an inverse rotation use ``freq_table``;
    with ``cos_sin_cache``, the same table read again).  With ``out`` (``out=x`` for in place),
    writes ``out`` and returns it; that form has no gradient, so an ``x`` or ``out`` that
    requires grad raises a RuntimeError.  A ``cos_sin_cache`` gets no gradient: one that
    requires grad (under grad mode) is refused with :class:`ropelab.RopeInputError`.

    Works inside ``torch.compile(fullgraph=True)`` (no graph break) and inside CUDA graphs.
    An eager call with nothing watching (see :func:`ropelab.torch_ops.registry.direct`) runs
    the op's kernel function without torch's dispatcher: the same code, less host time.

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
    if torch.compiler.is_compiling():  # dynamo: encode is evaluated once, as a constant
        config = encode(variant=variant, base=base, rotary_dim=rotary_dim, interleave=interleave,
                        inverse=inverse, scaling=scaling, fastmath=fastmath,
                        threads_per_block=threads_per_block, check_positions=check_positions,
                        **variant_options)
        plain = False
    else:
        values = (variant, base, rotary_dim, interleave, inverse, scaling, fastmath,
                  threads_per_block, check_positions)
        if variant_options:
            config = config_of(_ROPE_OPTIONS + tuple(variant_options),
                               values + tuple(variant_options.values()))
        else:
            config = config_of(_ROPE_OPTIONS, values)
        plain = direct(x, positions, out, cos_sin_cache)
    if out is None:
        if not plain:
            return _ROPE(x, positions, config, cos_sin_cache)
        refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
        if recording(x):
            return _RopeGrad.apply(None, x, positions, config, cos_sin_cache)
        return _rope_kernel(x, positions, config, cos_sin_cache)
    if recording(x, out):
        raise RuntimeError(_NO_GRAD_ROPE_OUT)
    if not plain:
        _ROPE_OUT(x, positions, out, config, cos_sin_cache)
        return out
    refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    _rope_out_kernel(x, positions, out, config, cos_sin_cache)
    wrote(out)
    return out



in_graph(_public_rope, rope)
