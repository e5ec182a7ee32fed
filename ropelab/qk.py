"""Plain RoPE the way a model calls it: ``ropelab.rope_qk`` and the 16-bit / strided / cached
path of ``ropelab.rope``.

Both run :mod:`ropelab.kernels.rope_rows`:

* ``rope_qk(q, k, positions=..., head_dim=...)`` rotates q and k **in place, in one launch**, each
  with its own head count (GQA) and its own row stride, so q and k may be column slices of a
  packed ``qkv`` (``qkv[:, :q_size]``, ``qkv[:, q_size:q_size + k_size]``) without a copy.  It
  is FlashInfer's ``apply_rope_pos_ids_inplace`` / vLLM's ``rotary_embedding(positions, query,
  key, head_size, cos_sin_cache, is_neox)`` with ropelab's checks.
* ``ropelab.rope(x, ...)`` with float16 / bfloat16 ``x``, a row-strided ``x`` or a
  ``cos_sin_cache`` comes here (:func:`rope_rows_call`); float32 contiguous calls keep the
  course's variants.

Layouts accepted for q, k and x: ``[tokens, heads * head_dim]`` or ``[tokens, heads, head_dim]``,
the last dimension contiguous, heads back to back inside a row, any row (token) stride at least
the row's width.  Storage: float32, float16, bfloat16 (a ``torch.bfloat16`` tensor, or ``uint16``
bit patterns from any other library; see :mod:`ropelab.bf16`); the math is float32.

``cos_sin_cache``: float32 ``[max_pos, rotary_dim]``, row ``p`` = ``cos(p * f)`` for the
``rotary_dim / 2`` pairs, then ``sin(p * f)`` (the vLLM / SGLang / FlashInfer convention).
``positions`` index its rows, so multi-axis schemes (FLUX's 3-axis ids, Qwen2-VL's M-RoPE) pass
a per-token table and ``positions = arange(tokens)``; :mod:`ropelab.tables` builds both.
Out-of-range positions follow ropelab's policy: NumPy positions are refused before launch,
device positions write NaN into the token's rotated pairs and set the error word that
:func:`ropelab.check_errors` reads.
"""

from __future__ import annotations

import numpy as np

from . import calls, streams
from .arrays import inspect_array, register_fast_types
from .errors import RopeInputError
from .kernels import rope_rows as _kernel
from .kernels._launch import bind
from .problem import check_position_values, check_rotary_dim
from .rows_checks import (check_cache, check_positions_info, columns_disjoint, frequencies,
                          options_of, rows_of, span_elements, spans_overlap, byte_span,
                          storage_of, rows_aligned)
from .rows_launch import _QKCall, fast_meta, launch_host
from .target import SIMULATED
from .validate import check_bool, check_int, fail


def rope_qk(q, k, *, positions, head_dim, rotary_dim=None, interleave=True, inverse=False,
            base=10000.0, scaling=None, cos_sin_cache=None, cache=False, max_positions=None,
            fastmath=True, heads_per_thread=None, run=None, stream=None):
    """Rotate ``q`` and ``k`` in place, in one launch; return ``(q, k)``.

    Parameters
    ----------
    q, k : ``[tokens, heads * head_dim]`` or ``[tokens, heads, head_dim]``
        float32, float16 or bfloat16 (both the same), each with its own head count (GQA) and
        its own row stride (column slices of a packed ``qkv`` are fine; the last dimension must
        be contiguous).  NumPy arrays (copied to the device and back) or device arrays
        (PyTorch, CuPy, numba, ``__cuda_array_interface__``), modified where they lie.
    positions : int ``[tokens]``
        Position of each token (int32 on the device).  See :func:`ropelab.rope` for the host /
        device checking policy.
    head_dim : int
        Elements per head (even).
    rotary_dim, interleave, inverse, base, scaling, fastmath, stream
        As for :func:`ropelab.rope` (``scaling``: linear, NTK, YaRN, Llama 3.1, ...).
    cos_sin_cache : float32 ``[max_pos, rotary_dim]``, optional
        Your cos/sin table (cos half, then sin half); ``positions`` index its rows.  Excludes
        ``scaling``.  See :mod:`ropelab.tables` for FLUX and M-RoPE tables.
    cache, max_positions : bool, int
        Let ropelab build the cos/sin cache in float64 (accurate at every position below
        ``max_positions``) instead of computing sin/cos of a float32 angle.
    heads_per_thread, run : int, optional
        Mapping overrides (heads a thread loads before computing: 1, 2, 4; elements per run).

    Raises ``TypeError`` / :class:`ropelab.RopeInputError` before anything runs on bad input.
    """
    mq, mk, mp = fast_meta(q), fast_meta(k), fast_meta(positions)
    mc = fast_meta(cos_sin_cache) if cos_sin_cache is not None else (0, None)
    key = None
    if mq is not None and mk is not None and mp is not None and mc is not None:
        key = ("rope_qk", type(q), mq[1], mk[1], mp[1], mc[1],
               (mq[0] | mk[0] | mc[0]) % 16 == 0,
               calls.typed((head_dim, rotary_dim, interleave, inverse, base, scaling, cache,
                            max_positions, fastmath, heads_per_thread, run)))
        entry = calls.lookup(key)
        if entry is not None:
            entry.fire(mq[0], mk[0], mp[0], mc[0] if cos_sin_cache is not None else None, stream)
            return q, k
    return _rope_qk_validated(q, k, positions, head_dim, rotary_dim, interleave, inverse, base,
                              scaling, cos_sin_cache, cache, max_positions, fastmath,
                              heads_per_thread, run, stream, key)


def _rope_qk_validated(q, k, positions, head_dim, rotary_dim, interleave, inverse, base, scaling,
                       cos_sin_cache, cache, max_positions, fastmath, heads_per_thread, run,
                       stream, key):
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
    handle = streams.resolve(stream) if stream is not None else None
    head_dim = check_int("head_dim", head_dim, minimum=2)
    qi, ki = inspect_array(q, "q"), inspect_array(k, "k")
    sq, sk = storage_of(qi, "q"), storage_of(ki, "k")
    if sq != sk:
        raise TypeError(f"q and k must have the same dtype, got {sq} and {sk}")
    if qi.on_device != ki.on_device:
        fail("q and k must both be NumPy arrays or both be device arrays")
    tq, hq, _, q_row = rows_of(qi, "q", head_dim)
    tk, hk, _, k_row = rows_of(ki, "k", head_dim)
    if tq != tk:
        fail(f"q and k must have the same number of tokens, got {tq} and {tk}")
    if qi.readonly or ki.readonly:
        fail("q and k are rotated in place; a read-only array cannot be")
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    q_span, k_span = span_elements(tq, hq, head_dim, q_row), span_elements(tk, hk, head_dim, k_row)
    if qi.on_device and tq and spans_overlap(byte_span(qi, q_span), byte_span(ki, k_span)):
        item = qi.dtype.itemsize
        if not columns_disjoint(qi.ptr, q_row * item, hq * head_dim * item, ki.ptr,
                                k_row * item, hk * head_dim * item):
            fail("q and k overlap; they must be disjoint (column slices of one qkv are fine)")
    pi = inspect_array(positions, "positions")
    check_positions_info(pi, tq)
    ci = inspect_array(cos_sin_cache, "cos_sin_cache") if cos_sin_cache is not None else None
    rows = check_cache(ci, rotary_dim, qi.on_device) if ci is not None else None
    freqs, af = frequencies(rotary_dim, base, scaling, cos_sin_cache)
    options = options_of(heads_per_thread, run, cache, max_positions, rows)
    for name, info, span in (("q", qi, q_span), ("k", ki, k_span)):
        if pi.on_device and tq and spans_overlap(byte_span(pi, tq), byte_span(info, span)):
            fail(f"positions overlap {name}; the kernel writes {name} while it reads positions")
    problem = _kernel.RowsProblem(tq, hq, hk, head_dim, rotary_dim, interleave, sq, q_row, q_row,
                                  k_row, k_row, inverse, af, True, True, freqs)
    aligned = rows_aligned(qi, q_row) and rows_aligned(ki, k_row)
    plan = _kernel.VARIANT.plan(problem, options, fastmath=fastmath, aligned=aligned)
    if not pi.on_device:
        check_position_values(np.asarray(positions), plan.position_limit, plan.limit_reason)
    if tq == 0:
        return q, k
    if not qi.on_device or qi.kind == "simulator" or SIMULATED:
        if pi.on_device and pi.kind == "simulator":
            positions = positions.copy_to_host()
        cache_host = None
        if ci is not None:
            cache_host = cos_sin_cache.copy_to_host() if ci.kind == "simulator" else cos_sin_cache
        spans = {(qi.ptr, qi.shape, qi.strides): q_span, (ki.ptr, ki.shape, ki.strides): k_span}
        launch_host(plan, [(q, qi, True), (k, ki, True)], spans, positions, cache_host)
        return q, k
    if not pi.on_device:
        fail("with device q and k, positions must be a device int32 array too")
    register_fast_types()
    item = qi.dtype.itemsize
    call = _QKCall()
    sizes = ((q_span, item), (k_span, item), (tq, 4)) + (((rows * rotary_dim, 4),) if rows else ())
    call.bound = bind(plan, sizes)
    call.current = streams.current_for(qi.kind, q)
    call.spans = (q_span * item, k_span * item, 4 * tq)
    call.rows = (q_row * item, hq * head_dim * item, k_row * item, hk * head_dim * item)
    if key is not None:  # fast_meta's keys hold strides: strided q and k are cached too
        calls.remember(key, call)
    ptrs = (qi.ptr, ki.ptr, pi.ptr) + ((ci.ptr,) if ci is not None else ())
    call.bound.fire(ptrs, handle if handle is not None else call.current())
    return q, k


__all__ = ["RopeInputError", "rope_qk"]
