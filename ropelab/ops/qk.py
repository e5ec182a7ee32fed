"""Plain RoPE the way a model calls it: ``ropelab.rope_qk`` and the 16-bit / strided / cached
path of ``ropelab.rope``.

Both run :mod:`ropelab.kernels.rope_rows`:

* ``rope_qk(q, k, positions=..., head_dim=...)`` rotates q and k **in place, in one launch**, each
  with its own head count (GQA) and its own row stride, so q and k may be column slices of a
  packed ``qkv`` (``qkv[:, :q_size]``, ``qkv[:, q_size:q_size + k_size]``) without a copy.  It
  is FlashInfer's ``apply_rope_pos_ids_inplace`` / vLLM's ``rotary_embedding(positions, query,
  key, head_size, cos_sin_cache, is_neox)`` with ropelab's checks.
* ``ropelab.rope(x, ...)`` with float16 / bfloat16 ``x``, a row-strided ``x`` or a
  ``cos_sin_cache`` runs it too (:mod:`ropelab.ops.rows`); float32 contiguous calls keep the
  course's variants.

Both are ops of the one call engine (:mod:`ropelab.ops.call`): one cache key, one fast path,
one device route, one stream choice.  The overlap rule for q and k (column slices of one qkv
interleave without touching) is one ``pairs`` entry with a function.

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

from ..kernels import rope_rows as _kernel
from ..target import SIMULATED
from ..validate import check_bool, check_int, check_position_values, check_rotary_dim, fail
from . import call, streams
from .arrays import inspect_array
from .rows_checks import (byte_span, check_cache, check_positions_info, columns_disjoint,
                          frequencies, options_of, rows_aligned, rows_of, span_elements,
                          spans_overlap, storage_of)
from .rows_host import host_copy, launch_host


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
    scalars = call.typed(("rope_qk", head_dim, rotary_dim, interleave, inverse, base, scaling,
                          cache, max_positions, fastmath, heads_per_thread, run))
    arrays = (q, k, positions) if cos_sin_cache is None else (q, k, positions, cos_sin_cache)
    result, key = call.fast(scalars, arrays, stream)
    if result is not call.MISS:
        return q, k
    return _validated(q, k, positions, head_dim, rotary_dim, interleave, inverse, base, scaling,
                      cos_sin_cache, cache, max_positions, fastmath, heads_per_thread, run, stream,
                      key)


def columns_rule(rows_bytes: tuple[int, int, int, int]):
    """The q/k overlap rule: ``(q pointer, k pointer) -> True`` when their interleaved spans
    touch no common byte (column slices of one qkv).  ``rows_bytes``: q's row stride and width,
    k's row stride and width, in bytes."""
    q_row, q_width, k_row, k_width = rows_bytes

    def disjoint(qp, kp):
        return columns_disjoint(qp, q_row, q_width, kp, k_row, k_width)

    return disjoint


def overlap_rules(disjoint, with_cache: bool) -> list:
    """The engine's ``pairs`` for slots (q, k, positions[, cos_sin_cache]): q and k are both
    written, positions and the cache read."""
    pairs = [(0, 1, disjoint, "q and k overlap; they must be disjoint (column slices of one qkv "
                              "are fine)")]
    for slot, name in ((0, "q"), (1, "k")):
        pairs.append((slot, 2, False, f"positions overlap {name}; the kernel writes {name} "
                                      f"while it reads positions"))
        if with_cache:
            pairs.append((slot, 3, False, f"cos_sin_cache overlaps {name}; the kernel writes "
                                          f"{name} while it reads the cache"))
    return pairs


def _validated(q, k, positions, head_dim, rotary_dim, interleave, inverse, base, scaling,
               cos_sin_cache, cache, max_positions, fastmath, heads_per_thread, run, stream, key):
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
    item = qi.dtype.itemsize
    q_span, k_span = span_elements(tq, hq, head_dim, q_row), span_elements(tk, hk, head_dim, k_row)
    rows_b = (q_row * item, hq * head_dim * item, k_row * item, hk * head_dim * item)
    disjoint = columns_rule(rows_b)
    if qi.on_device and tq and spans_overlap(byte_span(qi, q_span), byte_span(ki, k_span)) \
            and not disjoint(qi.ptr, ki.ptr):
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
        if ci is not None and ci.on_device and tq and spans_overlap(
                byte_span(ci, ci.size), byte_span(info, span)):
            fail(f"cos_sin_cache overlaps {name}; the kernel writes {name} while it reads the "
                 f"cache")
    problem = _kernel.RowsProblem(tq, hq, hk, head_dim, rotary_dim, interleave, sq, q_row, q_row,
                                  k_row, k_row, inverse, af, True, True, freqs)
    aligned = rows_aligned(qi, q_row) and rows_aligned(ki, k_row)
    plan = _kernel.VARIANT.plan(problem, options, fastmath=fastmath, aligned=aligned)
    if not pi.on_device:
        check_position_values(np.asarray(positions), plan.position_limit, plan.limit_reason)
    if tq == 0:
        return q, k
    if not qi.on_device or qi.kind == "simulator" or SIMULATED:
        spans = {(qi.ptr, qi.shape, qi.strides): q_span, (ki.ptr, ki.shape, ki.strides): k_span}
        launch_host(plan, [(q, qi, True), (k, ki, True)], spans, host_copy(positions, pi),
                    host_copy(cos_sin_cache, ci))
        return q, k
    slots = [call.Slot("q", q, qi), call.Slot("k", k, ki),
             call.Slot("positions", positions, pi, host_dtype=np.int32)]
    sizes = [(q_span, item), (k_span, item), (tq, 4)]
    extents = [q_span * item, k_span * item, 4 * tq]
    if ci is not None:
        slots.append(call.Slot("cos_sin_cache", cos_sin_cache, ci, host_dtype=np.float32))
        sizes.append((ci.size, 4))
        extents.append(ci.nbytes)
    pairs = overlap_rules(disjoint, ci is not None)
    call.launch_device(key, plan, slots, tuple(sizes), handle=handle, extents=extents,
                       pairs=pairs, result=0)
    return q, k


__all__ = ["rope_qk"]
