"""The sweep's rows of plain RoPE the way a model calls it (the rope_rows kernel), on the
shapes of group ``rows`` (:data:`.shapes.ROWS_SHAPES`; ``python -m ropelab bench --shapes rows
--kind bench_rows``), each described as Q and K heads of a packed ``qkv`` so that the copy roof
is the bytes of Q and K:

* ``rope16_32768x32x128``: bfloat16 ``[32768, 32, 128]``, the single-tensor target (>= 95% of
  the copy through the public call);
* ``flux_1024_rows``: 4096 tokens, 24 Q + 24 K heads of 128 (+ 24 V), bfloat16;
* ``qwen3_8b_4096``: 4096 tokens, 32 Q + 8 K heads of 128 (+ 8 V), bfloat16 (GQA).

The entries (pick them with ``--variant rope_rows``):

* ``rope_rows:rope``: ``ropelab.rope(x, positions=pos, out=out)`` on a contiguous
  ``[tokens, heads_q + heads_k, head_dim]`` x (the public single-tensor call);
* ``rope_rows:rope_qk``: ``ropelab.rope_qk(q, k, ...)`` in place on column slices of a packed
  ``qkv`` (one launch);
* ``rope_rows:two_calls``: the same q and k rotated by two ``ropelab.rope(..., out=...)`` calls
  in place (two launches), for comparison;
* ``rope_rows:rope_qk:kernel``: the q+k launch alone (pre-bound, fixed pointers);
* ``rope_rows:rope:h1`` / ``:h4`` / ``:run8``: the single-tensor call with another mapping
  (heads per thread, 128-bit accesses), to check the defaults;
* ``rope_rows:rope:neox`` / ``:neox_h4`` / ``:neox_cache`` / ``:neox_cache_h4``: the
  single-tensor call in the NeoX layout (default mapping, four heads a thread, cos/sin from a
  float32 cache built with ``cache=True``), beside ``rope_rows:torch_compile_cached``:
  torch.compile of the NeoX rotation with a float32 cos/sin cache gathered by position;
* ``rope_rows:pair_sincos`` / ``rope_rows:pack4``: the same single-tensor call with
  ``variant="pair_sincos"`` / ``"pack4"``, which run 16-bit storage in their own 16-bit builds
  (pack4 on ``[tokens, heads * head_dim]``, one wide head per token: its scope, same bytes).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ...freqs import inv_freq
from ...target import SIMULATED
from .entries import Entry, device_ptr, remembered_call

NAME = "rope_rows"


def _arrays(shape, seed: int = 0):
    """(qkv, positions) on the device: a PyTorch tensor (``torch.bfloat16`` for bfloat16) when
    PyTorch with CUDA is there, else numba arrays (bfloat16 as uint16 bits)."""
    hv = shape.heads_v or 0
    width = (shape.heads_q + shape.heads_k + hv) * shape.head_dim
    rng = np.random.default_rng(seed)
    host = rng.standard_normal((shape.tokens, width), dtype=np.float32)
    pos = np.arange(shape.tokens, dtype=np.int32)
    if shape.dtype == "bfloat16":
        from ...bf16 import from_float32

        host = from_float32(host)
    else:
        host = host.astype(shape.dtype)
    if not SIMULATED:
        try:
            import torch

            if torch.cuda.is_available():
                t = torch.from_numpy(host).cuda()
                if shape.dtype == "bfloat16":
                    t = t.view(torch.bfloat16)
                return t, torch.from_numpy(pos).cuda()
        except ImportError:
            pass
    return cuda.to_device(host), cuda.to_device(pos)


def _split(qkv, shape):
    """q and k as column slices of qkv, ``[tokens, heads, head_dim]`` views (no copy)."""
    hd, hq, hk = shape.head_dim, shape.heads_q, shape.heads_k
    return (_heads(qkv[:, :hq * hd], shape.tokens, hq, hd),
            _heads(qkv[:, hq * hd:(hq + hk) * hd], shape.tokens, hk, hd))


def _heads(a, tokens, heads, head_dim):
    try:  # torch, NumPy and the simulator split the last dimension as a view
        return a.reshape(tokens, heads, head_dim)
    except (NotImplementedError, ValueError, TypeError):  # a numba slice: build the view
        return _view3(a, tokens, heads, head_dim)


def _view3(a, tokens, heads, head_dim):
    """A numba device slice viewed as [tokens, heads, head_dim] (same memory)."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    item = a.dtype.itemsize
    return DeviceNDArray((tokens, heads, head_dim), (a.strides[0], head_dim * item, item),
                         a.dtype, gpu_data=a.gpu_data)


def _rope_maker(buf, one_head=False, **options):
    """``ropelab.rope(x, positions=pos, out=out, **options)`` on a contiguous x of the Q and K
    heads; ``one_head``: x as ``[tokens, heads * head_dim]`` (one wide head, the same bytes) for
    variants without multi-head support (pack4)."""
    import ropelab

    s = buf.shape
    if options.get("cache"):  # a cos/sin row for every position the bench passes
        options = dict(options, max_positions=s.tokens)
    qkv, pos = _arrays(s)
    hd, heads = s.head_dim, s.heads_q + s.heads_k
    shape = (s.tokens, heads * hd) if one_head else (s.tokens, heads, hd)
    if hasattr(qkv, "contiguous"):  # torch
        x = qkv[:, :heads * hd].reshape(shape).contiguous()
        out = x.clone()
    else:
        host = np.ascontiguousarray(qkv.copy_to_host()[:, :heads * hd])
        x = cuda.to_device(host.reshape(shape))
        out = cuda.device_array_like(x)
    call = lambda: ropelab.rope(x, positions=pos, out=out, **options)  # noqa: E731
    call()  # validates and compiles once
    return call


_COMPILED = {}


def _torch_compile_cached(buf):
    """The peer of ``rope_rows:rope:neox_cache``: torch.compile of the NeoX rotation of the same
    contiguous x with a float32 cos/sin cache ``[positions, head_dim]`` (cos half | sin half, the
    vLLM layout) gathered by position, math in float32, a new tensor out; None without torch."""
    import torch

    s = buf.shape
    qkv, pos = _arrays(s)
    if not hasattr(qkv, "contiguous"):
        return None
    hd, heads = s.head_dim, s.heads_q + s.heads_k
    x = qkv[:, :heads * hd].reshape(s.tokens, heads, hd).contiguous()
    inv = torch.from_numpy(inv_freq(hd)).to(x.device)  # float64, the default base
    angle = torch.arange(s.tokens, dtype=torch.float64, device=x.device)[:, None] * inv[None]
    cache = torch.cat([angle.cos(), angle.sin()], dim=-1).float()

    def rotate(x, cache, pos):
        half = x.shape[-1] // 2
        cs = cache[pos]
        cos, sin = cs[:, None, :half], cs[:, None, half:]
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)

    if "rotate" not in _COMPILED:
        _COMPILED["rotate"] = torch.compile(rotate, dynamic=False, fullgraph=True)
    fn = _COMPILED["rotate"]
    call = lambda: fn(x, cache, pos)  # noqa: E731
    call()  # compiles once, outside the timed region
    return call


def _qk_maker(buf, two_calls: bool = False):
    """``ropelab.rope_qk`` in place on column slices of a packed qkv; ``two_calls``: the same q
    and k rotated by two in-place ``ropelab.rope`` calls instead."""
    import ropelab

    s = buf.shape
    if not s.heads_k:
        return None
    qkv, pos = _arrays(s)
    q, k = _split(qkv, s)

    def both():
        ropelab.rope(q, positions=pos, out=q)
        ropelab.rope(k, positions=pos, out=k)

    call = both if two_calls else lambda: ropelab.rope_qk(q, k, positions=pos, head_dim=s.head_dim)
    call()  # validates and compiles once
    return call


def _qk_kernel_maker(buf):
    """The q+k launch alone: the public call's plan, bound once, fired on fixed pointers."""
    import ropelab
    from ...ops import call as engine

    s = buf.shape
    if not s.heads_k or SIMULATED:
        return None
    qkv, pos = _arrays(s)
    q, k = _split(qkv, s)
    engine.clear()
    ropelab.rope_qk(q, k, positions=pos, head_dim=s.head_dim)  # validates, remembers the call
    _, entry = remembered_call()
    ptrs = tuple(device_ptr(a) for a in (q, k, pos))
    return lambda: entry.bounds[0].fire(ptrs, 0)


def entries(names=None) -> list[Entry]:
    """The rows above; with ``names`` (``--variant``), only when one of them starts with
    ``rope_rows``."""
    if names and not any(n.startswith(NAME) for n in names):
        return []
    out = [Entry(f"{NAME}:rope", "ropelab_rows", _rope_maker, fastmath=True, fused=True),
           Entry(f"{NAME}:rope_qk", "ropelab_rows", _qk_maker, fastmath=True, fused=True),
           Entry(f"{NAME}:two_calls", "ropelab_rows", lambda buf: _qk_maker(buf, two_calls=True),
                 fastmath=True, fused=True),
           Entry(f"{NAME}:rope_qk:kernel", "kernel_rows", _qk_kernel_maker, fastmath=True,
                 fused=True)]
    # Controlled rows of the single-tensor call: heads a thread loads before computing (1, 4;
    # default 2 for 16-bit) and runs of 8 elements (128-bit accesses) instead of 4 (64-bit, the
    # 16-bit default).
    for label, opts in (("h1", {"heads_per_thread": 1}), ("h4", {"heads_per_thread": 4}),
                        ("run8", {"run": 8})):
        out.append(Entry(f"{NAME}:rope:{label}", "ropelab_rows",
                         lambda buf, o=opts: _rope_maker(buf, **o), fastmath=True, fused=True))
    # NeoX (half-split pairs), the layout of the peer below, with the default mapping, four heads
    # a thread, and cos/sin read from a float32 cache (cache=True) instead of computed.
    for label, opts in (("neox", {"interleave": False}),
                        ("neox_h4", {"interleave": False, "heads_per_thread": 4}),
                        ("neox_cache", {"interleave": False, "cache": True}),
                        ("neox_cache_h4", {"interleave": False, "cache": True,
                                           "heads_per_thread": 4})):
        out.append(Entry(f"{NAME}:rope:{label}", "ropelab_rows",
                         lambda buf, o=opts: _rope_maker(buf, **o), fastmath=True, fused=True))
    out.append(Entry(f"{NAME}:torch_compile_cached", "torch", _torch_compile_cached, fused=True,
                     group=2))
    # The course's variants that take 16-bit storage themselves, on the same bytes: pair_sincos
    # per head; pack4 as one wide head per token (its scope; other frequencies, same traffic).
    for label, opts in (("pair_sincos", {"variant": "pair_sincos"}),
                        ("pack4", {"variant": "pack4", "one_head": True})):
        out.append(Entry(f"{NAME}:{label}", "ropelab_rows",
                         lambda buf, o=opts: _rope_maker(buf, **o), fastmath=True, fused=True))
    if names and NAME not in names:
        out = [e for e in out if e.name in names]
    return out
