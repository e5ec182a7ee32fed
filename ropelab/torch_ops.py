"""ropelab's operations as PyTorch custom operators: ``torch.compile``, autograd, CUDA graphs.

``import ropelab`` never imports torch.  ``import ropelab.torch_ops`` does, and registers:

* ``torch.ops.ropelab.rope(x, positions, config) -> Tensor`` -- plain RoPE into a new tensor;
  differentiable (its backward is the inverse rotation, run by a ropelab kernel);
* ``torch.ops.ropelab.rope_out(x, positions, out!, config)`` -- the same into ``out`` (which may
  be ``x`` itself: in place); declares that it mutates ``out``;
* ``torch.ops.ropelab.fused_qknorm_rope(qkv!, q_weight, k_weight, positions, config)`` -- the fused
  QK-RMSNorm + RoPE, in place on ``qkv``; declares that it mutates ``qkv``.

Users call the Python functions of this module, :func:`rope` and :func:`fused_qknorm_rope`, one
per operation and with the keywords of ``ropelab.rope`` / ``ropelab.fused_qknorm_rope`` (the way
FlashInfer exposes its ops).  They turn the keywords into the op's ``config`` string and pick
the functional or the mutating op.  Torch dynamo cannot trace into ropelab's public functions
(it hands the numba kernel 0-d arrays), while these ops are opaque to it, so a model compiled
with ``torch.compile(fullgraph=True)`` has no graph break.  Importing this module also teaches
dynamo to replace a call to ``ropelab.rope`` / ``ropelab.fused_qknorm_rope`` that it meets
while tracing by the op (torch >= 2.5), so code written against the public functions compiles
too; their eager calls are unchanged (and do not record a gradient: use this module's
:func:`rope` for training).

Non-tensor options are plain values, dicts, or ``ropelab.scaling`` objects.  Inside a compiled
function, build scaling objects outside it (a module attribute, or in a model's ``__init__``)
or pass Hugging Face style dicts: dynamo cannot rebuild a frozen dataclass constructed while
it traces.

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

Adding an op (e.g. for a future ``ropelab.rope_qk(q, k, ...)`` in place) is local: one
``custom_op`` with ``mutates_args=("q", "k")`` whose body is ``_call(public, {"q": q, "k": k,
"positions": positions}, decode(config))``, a fake implementation returning None, a wrapper
that encodes the keywords, and ``_in_graph(public, wrapper)``.  A new tensor option (a user
``cos_sin_cache``) becomes one more ``Tensor?`` argument of the op and one more entry of the
dict given to :func:`_call`; new dtypes and strides need no change here.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import torch

from . import fused_qknorm_rope as _public_fused
from . import rope as _public_rope
from . import scaling as _scaling
from .kernels import VARIANTS
from .problem import INVERSE

# The variant that runs the backward of a variant without an inverse rotation (the seed's
# kernels: flat, block2d, pack4): freq_table computes the same float32 frequencies
# ``base ** (-2i / rotary_dim)`` and rotates by ``-angle`` with ``inverse=True``.
BACKWARD_FALLBACK = "freq_table"

_NO_GRAD_FUSED = ("fused_qknorm_rope has no backward kernel yet (issue 20), so gradients cannot "
                  "flow through it; call it under torch.no_grad(), or on tensors that do not "
                  "require grad")


# ---- the config string: every non-tensor argument, as canonical JSON -----------------------------
# An op schema holds only tensors, numbers, strings and bools; ropelab's options include scaling
# objects and per-variant keywords.  One JSON string carries them all: it is a plain constant to
# torch.compile, hashable, and readable in a printed graph.

def _plain(name: str, value):
    """``value`` as JSON-able plain data, or a TypeError naming the argument."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return value.item()
    if dataclasses.is_dataclass(value) and isinstance(value, _scaling.SCHEMES):
        return {"scheme": type(value).__name__, "fields": dataclasses.asdict(value)}
    if isinstance(value, dict):
        return {"mapping": {str(k): _plain(f"{name}[{k!r}]", v) for k, v in value.items()}}
    raise TypeError(f"{name}: ropelab's torch ops take numbers, strings, bools, None, dicts and "
                    f"ropelab.scaling objects as options; got {type(value).__name__}")


def _restore(value):
    """The inverse of :func:`_plain` for a scaling or yarn argument."""
    if isinstance(value, dict) and "scheme" in value:
        cls = {c.__name__: c for c in _scaling.SCHEMES}[value["scheme"]]
        return cls(**value["fields"])
    if isinstance(value, dict) and "mapping" in value:
        return {k: _restore(v) for k, v in value["mapping"].items()}
    return value


@torch.compiler.assume_constant_result
def encode(**options) -> str:
    """The ``config`` string of the ops (dynamo evaluates it once per trace, as a constant)."""
    return json.dumps({k: _plain(k, v) for k, v in options.items()}, sort_keys=True)


def decode(config: str) -> dict:
    """Keyword arguments for the public function from an op's ``config`` string."""
    return {k: _restore(v) for k, v in json.loads(config).items()}


# ---- running the public function on tensors ------------------------------------------------------

def _host_view(t: torch.Tensor | None):
    """A NumPy view of a CPU tensor's memory (writes go through); bfloat16 as uint16 bits."""
    if t is None:
        return None
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.uint16)
    return t.numpy()


def _call(public, tensors: dict, options: dict):
    """Run ``public(**tensors, **options)`` on the tensors' device: CUDA tensors as they are (the
    device path, torch's current stream), CPU tensors through NumPy views (the host path)."""
    if any(t is not None and t.is_cuda for t in tensors.values()):
        # The op's autograd formula is registered around this call; the public function refuses a
        # tensor that requires grad (its launch is invisible to autograd), so hand it a detached
        # view of the same memory.
        return public(**{k: t.detach() if t is not None and t.requires_grad else t
                         for k, t in tensors.items()}, **options)
    return public(**{k: _host_view(t) for k, t in tensors.items()}, **options)


def _result_like(x: torch.Tensor) -> torch.Tensor:
    # Always C-contiguous, whatever x's strides: the real and the fake implementation must agree.
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


# ---- ropelab::rope -------------------------------------------------------------------------------

@torch.library.custom_op("ropelab::rope", mutates_args=(), device_types=("cpu", "cuda"))
def _rope_op(x: torch.Tensor, positions: torch.Tensor | None, config: str) -> torch.Tensor:
    out = _result_like(x)
    _call(_public_rope, {"x": x, "positions": positions, "out": out}, decode(config))
    return out


@_rope_op.register_fake
def _(x, positions, config):
    return _result_like(x)


@torch.library.custom_op("ropelab::rope_out", mutates_args=("out",), device_types=("cpu", "cuda"))
def _rope_out_op(x: torch.Tensor, positions: torch.Tensor | None, out: torch.Tensor,
                 config: str) -> None:
    _call(_public_rope, {"x": x, "positions": positions, "out": out}, decode(config))


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
              positions: torch.Tensor, config: str) -> None:
    _call(_public_fused, {"qkv": qkv, "q_weight": q_weight, "k_weight": k_weight,
                          "positions": positions}, decode(config))


@_fused_op.register_fake
def _(qkv, q_weight, k_weight, positions, config):
    return None


# A mutating op cannot have an autograd formula (torch.library refuses one), and custom_op's
# default autograd kernel lets a gradient pass silently (an in-place op on a tracked tensor keeps
# the old grad_fn).  This kernel at the Autograd key refuses instead, in eager mode and while
# torch.compile traces, and otherwise hands the call on to the CPU/CUDA implementation.  (The
# keyset arithmetic is torch-internal API, the one way to redispatch below autograd here.)
_LIBRARY = torch.library.Library("ropelab", "FRAGMENT")


def _fused_autograd(keyset, qkv, q_weight, k_weight, positions, config):
    if torch.is_grad_enabled() and any(t.requires_grad for t in (qkv, q_weight, k_weight)):
        raise RuntimeError(_NO_GRAD_FUSED)
    below = keyset & torch._C._after_autograd_keyset
    return torch.ops.ropelab.fused_qknorm_rope.default.redispatch(below, qkv, q_weight, k_weight,
                                                                   positions, config)


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
                      max_positions: int | None = None) -> torch.Tensor:
    """QK-RMSNorm + RoPE in place on ``qkv``, as the custom op ``ropelab::fused_qknorm_rope``.

    The arguments are those of :func:`ropelab.fused_qknorm_rope`, except ``stream`` (the op runs
    on PyTorch's current stream); returns ``qkv``.  Works inside
    ``torch.compile(fullgraph=True)`` and CUDA graphs.

    There is no backward kernel yet: if autograd would need a gradient (grad mode on and
    ``qkv``, ``q_weight`` or ``k_weight`` requiring grad), this raises a RuntimeError instead of
    silently detaching.

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
    if torch.is_grad_enabled() and any(t.requires_grad for t in (qkv, q_weight, k_weight)):
        raise RuntimeError(_NO_GRAD_FUSED)
    config = encode(num_heads_q=num_heads_q, num_heads_k=num_heads_k, num_heads_v=num_heads_v,
                    head_dim=head_dim, eps=eps, base=base, rotary_dim=rotary_dim,
                    interleave=interleave, yarn=yarn, fastmath=fastmath,
                    warps_per_block=warps_per_block, heads_per_warp=heads_per_warp, cache=cache,
                    max_positions=max_positions)
    torch.ops.ropelab.fused_qknorm_rope(qkv, q_weight, k_weight, positions, config)
    return qkv


# ---- the public functions inside torch.compile ---------------------------------------------------
# Dynamo cannot trace ropelab.rope / ropelab.fused_qknorm_rope themselves (it would hand numba
# 0-d arrays).  Once this module is imported, Dynamo replaces a call to either, met while
# tracing, with the op wrapper above, so a model that calls the public functions compiles with
# fullgraph=True too.  Eager calls are unchanged.  The signatures are not compared (the public
# functions grow keywords); a keyword the op does not know fails loudly in encode().

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
_in_graph(_public_fused, fused_qknorm_rope)


__all__ = ["BACKWARD_FALLBACK", "backward_config", "decode", "encode", "fused_qknorm_rope", "rope"]
