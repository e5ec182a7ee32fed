"""How ropelab's torch ops are registered, and the checks every op wrapper shares.

torch.library.define + impl rather than torch.library.custom_op: an eager custom_op call runs
through several Python layers (backend_impl, its _disable_dynamo wrappers, its own Autograd and
ADInplaceOrView kernels) that cost ~25 us of host time per call where a defined op's dispatch
costs ~3 (scripts/host_cost_probe.py).  What custom_op gave is spelled out here: the schema
with its mutation annotations, one Python kernel for CPU and CUDA, the fake kernel
(torch.compile, meta tensors) and an Autograd kernel per op: a formula, or a refusal.
"""

from __future__ import annotations

import torch

from ..errors import RopeInputError

LIBRARY = torch.library.Library("ropelab", "FRAGMENT")
# The keys below Autograd: where an Autograd kernel hands a call on (torch-internal keyset API).
BELOW_AUTOGRAD = torch._C._after_autograd_keyset
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def define(schema: str, kernel, fake):
    """Define ``ropelab::<name>`` by ``schema``, run by ``kernel`` on CPU and CUDA tensors and by
    ``fake`` on fake and meta tensors; return its overload."""
    name = schema.split("(", 1)[0]
    LIBRARY.define(schema)
    for key in ("CPU", "CUDA"):
        LIBRARY.impl(name, kernel, key)
    torch.library.register_fake(f"ropelab::{name}", fake, lib=LIBRARY)
    return getattr(torch.ops.ropelab, name).default


def add_autograd(name: str, kernel) -> None:
    """``kernel(keyset, *args)`` as the Autograd kernel of ``ropelab::<name>``."""
    LIBRARY.impl(name, kernel, "Autograd", with_keyset=True)


def below_autograd(op, kernel, keyset, *args):
    """What a non-mutating op's Autograd kernel does once no gradient is to be recorded: hand
    the call on below autograd.  On plain tensors with nothing watching (:func:`direct`) no key
    below Autograd has anything to do (they serve fake, functional and subclass tensors,
    in-place views, Python modes), so ``kernel``, the op's own CPU/CUDA kernel function, runs
    at once; otherwise the dispatcher takes it on.  Saves the redispatch: a second boxed call
    into Python (on this 2-core machine, a stub backward op: 18.6 us through the dispatcher,
    of which this second hop is about 6)."""
    if direct(*(a for a in args if isinstance(a, torch.Tensor))):
        return kernel(*args)
    return op.redispatch(keyset & BELOW_AUTOGRAD, *args)


def refusing_autograd(name: str, message: str) -> None:
    """An Autograd kernel for an op without a gradient: a tensor argument that requires grad
    while autograd records raises ``RuntimeError(message)`` before anything runs; otherwise the
    call goes on below autograd, and then the arguments the op's schema marks as written
    (``Tensor(a!)``) have their versions bumped (:func:`wrote`), as a native in-place op's
    ADInplaceOrView kernel does: a backward that saved one of them fails loudly."""
    op = getattr(torch.ops.ropelab, name).default
    writes = [i for i, a in enumerate(op._schema.arguments)
              if a.alias_info is not None and a.alias_info.is_write]

    def autograd(keyset, *args):
        if recording(*(a for a in args if isinstance(a, torch.Tensor))):
            raise RuntimeError(message)
        result = op.redispatch(keyset & BELOW_AUTOGRAD, *args)
        for i in writes:
            if i < len(args) and isinstance(args[i], torch.Tensor):
                wrote(args[i])
        return result

    add_autograd(name, autograd)


def direct(*tensors) -> bool:
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


def wrote(t: torch.Tensor) -> None:
    """What the ADInplaceOrView kernel of an op that writes ``t`` does: bump its version, so a
    backward that saved it before the write fails loudly instead of using the new values.
    (Inference tensors have no version counter and are skipped.)  The C function behind
    torch.autograd.graph.increment_version, without its Python frame."""
    if type(t) in _PLAIN:
        _bump_versions((t,))


def recording(*tensors) -> bool:
    """Whether autograd would record a call on ``tensors`` (grad mode on, one requires grad)."""
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False


def refuse_cache_grad(cos_sin_cache, recording: bool) -> None:
    """A cos_sin_cache that would need a gradient (``recording``: autograd is on): refused, as
    no op computes one and a gradient is never dropped silently."""
    if recording and cos_sin_cache is not None and cos_sin_cache.requires_grad:
        raise RopeInputError("cos_sin_cache requires grad, but ropelab's fused ops read the cache "
                             "and give it no gradient; pass cos_sin_cache.detach() (a fixed "
                             "table), or compute a learned rotation in torch")


def no_stream(stream) -> None:
    """Inside torch.compile the ops run on PyTorch's current stream: a ``stream=`` is refused."""
    if stream is not None:
        raise TypeError("inside torch.compile ropelab runs on PyTorch's current stream; "
                        "instead of stream=, call it under `with torch.cuda.stream(s):`")


def in_graph(public, wrapper) -> None:
    """Teach Dynamo to replace a call to the public function ``public`` that it meets while
    tracing by ``wrapper`` (it cannot trace ropelab's public functions: numba would get 0-d
    arrays), so a model calling them compiles with fullgraph=True too; eager calls are the same.
    Signatures are not compared (the functions grow keywords): an unknown one fails loudly."""
    def polyfill(*tensors, stream=None, **options):
        no_stream(stream)
        return wrapper(*tensors, **options)

    polyfill.__name__ = f"{public.__name__}_in_graph"
    substitute = getattr(torch.compiler, "substitute_in_graph", None)  # torch >= 2.5
    if substitute is not None:
        substitute(public, skip_signature_check=True)(polyfill)
