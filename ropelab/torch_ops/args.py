"""How ropelab's torch ops (:mod:`ropelab.torch_ops`) carry their arguments: every non-tensor
option as one canonical JSON ``config`` string, and the tensors handed to the public functions
(CUDA tensors as they are, CPU tensors as NumPy views of their memory) and back.

Adding an op to :mod:`ropelab.torch_ops` (e.g. for ``ropelab.rope_qk(q, k, ...)`` in place) is
one module of the package: one :func:`~ropelab.torch_ops.registry.define` with a schema marking what it writes (``Tensor(a!) q, Tensor(b!) k``)
and a kernel whose body is ``call_public(public, {"q": q, "k": k, "positions": positions},
options_for(public, config))``, a fake kernel returning None, an Autograd kernel (a formula, or
a refusal when a tensor requires grad: ``registry.refusing_autograd``), a wrapper that turns the keywords into the config
(:func:`config_of` eagerly, :func:`encode` while compiling), and ``registry.in_graph(public,
wrapper)``.  A new tensor option becomes one more ``Tensor?`` argument of the op and one more
entry of the dict given to :func:`call_public` (as the fused ops' ``cos_sin_cache``: last,
defaulting to None, so older positional calls still fit the schema); new dtypes and strides
need no change here.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json

import numpy as np
import torch

from .. import scaling as _scaling


# ---- the config string: every non-tensor argument, as canonical JSON -----------------------------
# An op schema holds only tensors, numbers, strings and bools; ropelab's options include scaling
# objects and per-variant keywords.  One JSON string carries them all: it is a plain constant to
# torch.compile, hashable, and readable in a printed graph.

def plain(name: str, value):
    """``value`` as JSON-able plain data, or a TypeError naming the argument."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return value.item()
    if dataclasses.is_dataclass(value) and isinstance(value, _scaling.SCHEMES):
        return {"scheme": type(value).__name__, "fields": dataclasses.asdict(value)}
    if isinstance(value, dict):
        return {"mapping": {str(k): plain(f"{name}[{k!r}]", v) for k, v in value.items()}}
    raise TypeError(f"{name}: ropelab's torch ops take numbers, strings, bools, None, dicts and "
                    f"ropelab.scaling objects as options; got {type(value).__name__}")


def restore(value):
    """The inverse of :func:`plain` for a scaling or yarn argument."""
    if isinstance(value, dict) and "scheme" in value:
        cls = {c.__name__: c for c in _scaling.SCHEMES}[value["scheme"]]
        return cls(**value["fields"])
    if isinstance(value, dict) and "mapping" in value:
        return {k: restore(v) for k, v in value["mapping"].items()}
    return value


@torch.compiler.assume_constant_result
def encode(**options) -> str:
    """The ``config`` string of the ops (dynamo evaluates it once per trace, as a constant)."""
    return json.dumps({k: plain(k, v) for k, v in options.items()}, sort_keys=True)


def decode(config: str) -> dict:
    """Keyword arguments for the public function from an op's ``config`` string (a new dict:
    the caller may change it)."""
    return dict(decoded(config))


# An op runs with the same few config strings over and over: parsing JSON and rebuilding the
# scaling objects on every call was a measurable part of its host time
# (scripts/host_cost_probe.py).  Bounded, so a program that cycles through many configs keeps
# only the recent ones.
MAX_CONFIGS = 1024


@functools.lru_cache(maxsize=MAX_CONFIGS)
def decoded(config: str) -> dict:
    """:func:`decode`, remembered per string: the same dict every time, to be read, never
    changed (the public functions take it as ``**options``)."""
    return {k: restore(v) for k, v in json.loads(config).items()}


@functools.lru_cache(maxsize=MAX_CONFIGS)
def options_for(public, config: str) -> dict:
    """The keywords ``public`` gets for ``config``: :func:`decoded` less the options equal to
    ``public``'s own defaults, same type included (it would take the same value anyway, and
    each keyword passed costs the call host time).  Remembered; read, never changed."""
    try:
        defaults = {n: p.default for n, p in inspect.signature(public).parameters.items()
                    if p.default is not inspect.Parameter.empty}
    except (TypeError, ValueError):  # no signature to read: pass everything
        return decoded(config)
    sentinel = object()
    return {k: v for k, v in decoded(config).items()
            if not (type(v) is type(d := defaults.get(k, sentinel)) and v == d)}


@functools.lru_cache(maxsize=MAX_CONFIGS)
def fast_scalars(public, make, config: str, *leading) -> tuple:
    """The scalar part of ``public``'s fast-path key for ``config``: ``make(*leading, **kw)``
    (the op's own ``fast_scalars``, e.g. :func:`ropelab.ops.fused.fast_scalars`), each keyword
    the config's value or else ``public``'s default.  Remembered per config, so an op's
    kernel calls :func:`ropelab.ops.call.fast` with it directly: the key the public function
    would build, without binding its keywords on every call."""
    values = {n: p.default for n, p in inspect.signature(public).parameters.items()
              if p.default is not inspect.Parameter.empty}
    values.update(decoded(config))
    names = list(inspect.signature(make).parameters)[len(leading):]
    return make(*leading, **{n: values[n] for n in names})


_configs: dict = {}


def config_of(names: tuple, values: tuple) -> str:
    """``encode(**dict(zip(names, values)))``, remembered per (names, values, their types): the
    wrappers' eager calls look it up instead of writing JSON (types are in the key: ``True ==
    1`` and ``2.0 == 2`` in Python, but they encode, and validate, differently).  An unhashable
    value (a dict ``scaling``) is encoded every call.  Not for traced code: a compiled wrapper
    calls :func:`encode`, which dynamo evaluates once as a constant."""
    key = (names, values, tuple(map(type, values)))
    try:
        hit = _configs.get(key)
    except TypeError:
        return encode(**dict(zip(names, values)))
    if hit is None:
        hit = encode(**dict(zip(names, values)))
        if len(_configs) >= MAX_CONFIGS:
            _configs.clear()
        _configs[key] = hit
    return hit


# ---- running the public function on tensors ------------------------------------------------------

def host_view(t: torch.Tensor | None):
    """A NumPy view of a CPU tensor's memory (writes go through); bfloat16 as uint16 bits."""
    if t is None:
        return None
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.uint16)
    return t.numpy()


def _named_host_view(name: str, t):
    """:func:`host_view`, with a dtype NumPy has no type for (torch.float8_e5m2, say) refused
    in ropelab's words, naming the argument, instead of torch's bare TypeError."""
    try:
        return host_view(t)
    except TypeError as exc:
        from ..errors import RopeInputError

        raise RopeInputError(f"{name} has dtype {t.dtype}, which ropelab does not take") from exc


def call_public(public, tensors: dict, options: dict):
    """Run ``public(**tensors, **options)`` on the tensors' device: CUDA tensors as they are (the
    device path, torch's current stream), CPU tensors through NumPy views (the host path)."""
    # Every op call comes through here: one pass over the tensors, no temporary generators.
    on_device = needs_grad = False
    for t in tensors.values():
        if t is not None:
            on_device = on_device or t.is_cuda
            needs_grad = needs_grad or t.requires_grad
    if not on_device:
        return public(**{k: _named_host_view(k, t) for k, t in tensors.items()}, **options)
    if needs_grad and torch.is_grad_enabled():
        # The op's autograd formula is registered around this call; the public function refuses
        # a tensor that requires grad (its launch is invisible to autograd), so hand it a
        # detached view of the same memory.
        tensors = {k: t.detach() if t is not None and t.requires_grad else t
                   for k, t in tensors.items()}
    return public(**tensors, **options)


def on_rows(t: torch.Tensor | None, run, *written: torch.Tensor | None, read_only: bool = False):
    """``run(rows)`` on ``t`` itself when it is C-contiguous (or None); on a strided view, on a
    C-contiguous copy of it, then written back, as torch's own in-place ops take any view (a
    slice of a wider projection): the kernels take rows back to back.  The copy is made and
    checked before ``t`` changes, so a refused call leaves ``t`` as it was.  ``written``: the
    other tensors the call writes, refused when they share ``t``'s storage (the copy would hide
    that overlap from the engine's checks).  ``read_only``: the call only reads ``t``, so
    nothing is written back."""
    if t is None or t.is_contiguous():
        return run(t)
    storage = t.untyped_storage().data_ptr()
    for w in written:
        if w is not None and w.untyped_storage().data_ptr() == storage:
            from ..errors import RopeInputError

            raise RopeInputError("a tensor the op writes shares memory with a strided view it is "
                                 "given (the view is run through a contiguous copy); pass "
                                 "separate tensors")
    rows = t.contiguous()
    result = run(rows)
    if not read_only:
        t.copy_(rows)
    return result


def result_like(x: torch.Tensor) -> torch.Tensor:
    # Always C-contiguous, whatever x's strides: the real and the fake implementation must agree.
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def from_host(a, like: torch.Tensor) -> torch.Tensor:
    """A result of the host path (NumPy; bfloat16 as uint16 bits) as a tensor like ``like``."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.view(torch.bfloat16) if like.dtype == torch.bfloat16 else t
