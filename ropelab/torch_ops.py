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

import functools
import json

import torch

from . import fused_qknorm_rope as _public_fused
from .ops.fused_backward import fused_qknorm_rope_backward as _public_backward
from . import rope as _public_rope
from .errors import RopeInputError
from .kernels import VARIANTS
from .problem import INVERSE
from .torch_args import (call_public, config_of, decode, decoded, encode, from_host, options_for,
                         result_like)

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


# ---- how the ops are registered ------------------------------------------------------------------
# torch.library.define + impl rather than torch.library.custom_op: an eager custom_op call runs
# through several Python layers (backend_impl, its _disable_dynamo wrappers, its own Autograd and
# ADInplaceOrView kernels) that cost ~25 us of host time per call where a defined op's dispatch
# costs ~3 (scripts/host_cost_probe.py).  What custom_op gave is spelled out here: the
# schema with its mutation annotations, one Python kernel for CPU and CUDA, the fake kernel
# (torch.compile, meta tensors) and an Autograd kernel per op: a formula, or a refusal.

_LIBRARY = torch.library.Library("ropelab", "FRAGMENT")
_BELOW_AUTOGRAD = torch._C._after_autograd_keyset
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _define(schema: str, kernel, fake):
    """Define ``ropelab::<name>`` by ``schema``, run by ``kernel`` on CPU and CUDA tensors and by
    ``fake`` on fake and meta tensors; return its overload."""
    name = schema.split("(", 1)[0]
    _LIBRARY.define(schema)
    for key in ("CPU", "CUDA"):
        _LIBRARY.impl(name, kernel, key)
    torch.library.register_fake(f"ropelab::{name}", fake, lib=_LIBRARY)
    return getattr(torch.ops.ropelab, name).default


def _autograd(name: str, kernel) -> None:
    _LIBRARY.impl(name, kernel, "Autograd", with_keyset=True)


def _direct(*tensors) -> bool:
    """Whether an eager wrapper call may run the op's kernel function itself instead of going
    through torch's dispatcher to the same function: only when nothing could see the
    difference, i.e. plain CPU/CUDA tensors (no fake, functional or other subclass), no torch
    function or dispatch mode, no functorch transform, no profiler (whose trace names the op)
    and no JIT tracer.  The caller checks ``torch.compiler.is_compiling()`` first (so dynamo
    never traces this).  Saves the dispatch (~3 us) and any Autograd kernel's Python frame."""
    if (torch._C._len_torch_dispatch_stack() or torch._C._is_torch_function_mode_enabled()
            or torch._C._autograd._profiler_enabled()
            or torch._C._functorch.peek_interpreter_stack() is not None
            or torch._C._get_tracing_state() is not None):
        return False
    for t in tensors:
        if t is not None and (type(t) not in _PLAIN or not (t.is_cuda or t.is_cpu)):
            return False
    return True


_bump_versions = getattr(torch._C, "_increment_version", torch.autograd.graph.increment_version)


def _wrote(t: torch.Tensor) -> None:
    # What the ADInplaceOrView kernel of an op that writes ``t`` does: bump its version, so a
    # backward that saved it before the write fails loudly instead of using the new values.
    # (Inference tensors have no version counter and are skipped.)  The C function behind
    # torch.autograd.graph.increment_version, without its Python frame.
    if type(t) in _PLAIN:
        _bump_versions((t,))


def _recording(*tensors) -> bool:
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False


# ---- ropelab::rope -------------------------------------------------------------------------------

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


_ROPE = _define("rope(Tensor x, Tensor? positions, str config, Tensor? cos_sin_cache=None) "
                "-> Tensor", _rope_kernel,
                lambda x, positions, config, cos_sin_cache=None: result_like(x))
_ROPE_OUT = _define("rope_out(Tensor x, Tensor? positions, Tensor(a!) out, str config, "
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
    eager wrapper call, see :func:`_direct`)."""

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
        if not torch.is_grad_enabled() and _direct(grad, positions, cos_sin_cache):
            dx = _rope_kernel(grad, positions, ctx.backward, cos_sin_cache)
        else:  # traced, or create_graph=True: through the op (differentiable again)
            dx = _ROPE(grad, positions, ctx.backward, cos_sin_cache)
        return None, dx, None, None, None
# ex: end torch_rope_backward


def _rope_autograd(keyset, x, positions, config, cos_sin_cache=None):
    below = keyset & _BELOW_AUTOGRAD
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    if _recording(x):
        return _RopeGrad.apply(below, x, positions, config, cos_sin_cache)
    return _ROPE.redispatch(below, x, positions, config, cos_sin_cache)


def _rope_out_autograd(keyset, x, positions, out, config, cos_sin_cache=None):
    if _recording(x, out):
        raise RuntimeError(_NO_GRAD_ROPE_OUT)
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    _ROPE_OUT.redispatch(keyset & _BELOW_AUTOGRAD, x, positions, out, config, cos_sin_cache)
    _wrote(out)


_autograd("rope", _rope_autograd)
_autograd("rope_out", _rope_out_autograd)

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
    An eager call with nothing watching (see :func:`_direct`) runs the op's kernel function
    without torch's dispatcher: the same code, less host time.

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
        direct = False
    else:
        values = (variant, base, rotary_dim, interleave, inverse, scaling, fastmath,
                  threads_per_block, check_positions)
        if variant_options:
            config = config_of(_ROPE_OPTIONS + tuple(variant_options),
                               values + tuple(variant_options.values()))
        else:
            config = config_of(_ROPE_OPTIONS, values)
        direct = _direct(x, positions, out, cos_sin_cache)
    if out is None:
        if not direct:
            return _ROPE(x, positions, config, cos_sin_cache)
        _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
        if _recording(x):
            return _RopeGrad.apply(None, x, positions, config, cos_sin_cache)
        return _rope_kernel(x, positions, config, cos_sin_cache)
    if _recording(x, out):
        raise RuntimeError(_NO_GRAD_ROPE_OUT)
    if not direct:
        _ROPE_OUT(x, positions, out, config, cos_sin_cache)
        return out
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    _rope_out_kernel(x, positions, out, config, cos_sin_cache)
    _wrote(out)
    return out


# ---- ropelab::fused_qknorm_rope ------------------------------------------------------------------

def _run_fused(qkv, q_weight, k_weight, positions, config, cos_sin_cache):
    """``ropelab.fused_qknorm_rope`` in place on ``qkv``; the routes of :func:`_run_rope`."""
    options = options_for(_public_fused, config)
    if qkv.is_cuda and not (torch.is_grad_enabled() and (
            qkv.requires_grad or q_weight.requires_grad or k_weight.requires_grad)):
        if cos_sin_cache is None:
            return _public_fused(qkv=qkv, q_weight=q_weight, k_weight=k_weight,
                                 positions=positions, **options)
        return _public_fused(qkv=qkv, q_weight=q_weight, k_weight=k_weight, positions=positions,
                             cos_sin_cache=cos_sin_cache, **options)
    return call_public(_public_fused, {"qkv": qkv, "q_weight": q_weight, "k_weight": k_weight,
                                       "positions": positions, "cos_sin_cache": cos_sin_cache},
                       options)


def _fused_kernel(qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    _run_fused(qkv, q_weight, k_weight, positions, config, cos_sin_cache)


_FUSED = _define("fused_qknorm_rope(Tensor(a!) qkv, Tensor q_weight, Tensor k_weight, "
                 "Tensor positions, str config, Tensor? cos_sin_cache=None) -> ()",
                 _fused_kernel, lambda qkv, q_weight, k_weight, positions, config,
                 cos_sin_cache=None: None)


# A mutating op cannot have an autograd formula, and a gradient must never pass silently (an
# in-place write on a tracked tensor would keep its old grad_fn): this Autograd kernel refuses,
# in eager mode and while torch.compile traces, and otherwise hands the call on to the CPU/CUDA
# kernel.
def _fused_autograd(keyset, qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    if _recording(qkv, q_weight, k_weight):
        raise RuntimeError(_NO_GRAD_FUSED)
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    _FUSED.redispatch(keyset & _BELOW_AUTOGRAD, qkv, q_weight, k_weight, positions, config,
                      cos_sin_cache)
    _wrote(qkv)


_autograd("fused_qknorm_rope", _fused_autograd)

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
        direct = False
    else:
        config = config_of(_FUSED_OPTIONS, (num_heads_q, num_heads_k, num_heads_v, head_dim, eps,
                                            base, rotary_dim, interleave, yarn, fastmath,
                                            warps_per_block, heads_per_warp, cache,
                                            max_positions))
        direct = _direct(qkv, q_weight, k_weight, positions, cos_sin_cache)
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    if _recording(qkv, q_weight, k_weight):
        if direct:
            return _FusedGrad.apply(None, qkv, q_weight, k_weight, positions, config,
                                    cos_sin_cache)
        return _FUSED_FUNCTIONAL(qkv, q_weight, k_weight, positions, config, cos_sin_cache)
    if direct:
        _fused_kernel(qkv, q_weight, k_weight, positions, config, cos_sin_cache)
        _wrote(qkv)
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


@functools.lru_cache(maxsize=1024)
def _backward_options(config: str) -> dict:
    """The backward's keywords from the forward's config (remembered: read, never changed)."""
    return {k: v for k, v in decoded(config).items() if k in _BACKWARD_OPTIONS}


def _fused_functional_kernel(qkv, q_weight, k_weight, positions, config, cos_sin_cache=None):
    # The kernel is in place, so the result starts as a copy of qkv (V's columns are the
    # result's; Q's and K's are overwritten): one copy pass, then the kernel's pass over Q and K.
    out = qkv.clone(memory_format=torch.contiguous_format)
    _run_fused(out, q_weight, k_weight, positions, config, cos_sin_cache)
    return out


def _fused_backward_kernel(qkv, grad, q_weight, k_weight, positions, config, cos_sin_cache=None):
    dqkv, dq, dk = call_public(_public_backward, {
        "qkv": qkv, "grad": grad, "q_weight": q_weight, "k_weight": k_weight,
        "positions": positions, "cos_sin_cache": cos_sin_cache}, _backward_options(config))
    if not qkv.is_cuda:
        dqkv, dq, dk = from_host(dqkv, qkv), torch.from_numpy(dq), torch.from_numpy(dk)
    # The weight gradients are float32 sums; the weights' own dtype is what autograd expects.
    return dqkv, dq.to(q_weight.dtype, copy=True), dk.to(k_weight.dtype, copy=True)


_FUSED_FUNCTIONAL = _define(
    "fused_qknorm_rope_functional(Tensor qkv, Tensor q_weight, Tensor k_weight, "
    "Tensor positions, str config, Tensor? cos_sin_cache=None) -> Tensor",
    _fused_functional_kernel,
    lambda qkv, q_weight, k_weight, positions, config, cos_sin_cache=None: result_like(qkv))
_FUSED_BACKWARD = _define(
    "fused_qknorm_rope_backward(Tensor qkv, Tensor grad, Tensor q_weight, Tensor k_weight, "
    "Tensor positions, str config, Tensor? cos_sin_cache=None) -> (Tensor, Tensor, Tensor)",
    _fused_backward_kernel,
    lambda qkv, grad, q_weight, k_weight, positions, config, cos_sin_cache=None: (
        result_like(qkv), result_like(q_weight), result_like(k_weight)))


class _FusedGrad(torch.autograd.Function):
    """The functional fused op under autograd: saves the input ``qkv`` and the weights, and its
    backward is ropelab's backward kernel.  ``below``: as for :class:`_RopeGrad`."""

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
        if not torch.is_grad_enabled() and _direct(qkv, grad, q_weight, k_weight, positions,
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
    _refuse_cache_grad(cos_sin_cache, torch.is_grad_enabled())
    below = keyset & _BELOW_AUTOGRAD
    if _recording(qkv, q_weight, k_weight):
        return _FusedGrad.apply(below, qkv, q_weight, k_weight, positions, config, cos_sin_cache)
    return _FUSED_FUNCTIONAL.redispatch(below, qkv, q_weight, k_weight, positions, config,
                                        cos_sin_cache)


def _fused_backward_autograd(keyset, qkv, grad, q_weight, k_weight, positions, config,
                             cos_sin_cache=None):
    if _recording(qkv, grad, q_weight, k_weight, cos_sin_cache):
        raise RuntimeError("ropelab::fused_qknorm_rope_backward has no gradient of its own (no "
                           "double backward): call backward() without create_graph=True")
    return _FUSED_BACKWARD.redispatch(keyset & _BELOW_AUTOGRAD, qkv, grad, q_weight, k_weight,
                                      positions, config, cos_sin_cache)


_autograd("fused_qknorm_rope_functional", _fused_functional_autograd)
_autograd("fused_qknorm_rope_backward", _fused_backward_autograd)
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
