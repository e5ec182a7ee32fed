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
one device route, one stream choice, one overlap rule (q and k are both written: they may be
column slices of one qkv, whose byte ranges interleave without sharing a byte, but no more).

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

from ..kernels import rope_rows_host as _kernel
from ..validate import check_bool, check_int, check_rotary_dim, fail
from . import call
from .arrays import inspect_array
from .rows_checks import (check_cache, frequencies, options_of, rows_aligned, rows_of,
                          storage_of)
from .slots import POSITIONS, TABLE, WRITE, Call, Slot


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
    if result is call.MISS:
        call.run(describe(q, k, positions, head_dim, rotary_dim, interleave, inverse, base,
                          scaling, cos_sin_cache, cache, max_positions, fastmath,
                          heads_per_thread, run, stream), key)
    return q, k  # rotated in place


def describe(q, k, positions, head_dim, rotary_dim, interleave, inverse, base, scaling,
             cos_sin_cache, cache, max_positions, fastmath, heads_per_thread, run,
             stream) -> Call:
    """Check everything ``ropelab.rope_qk`` takes and plan it; the engine runs what comes back."""
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
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
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    ci = inspect_array(cos_sin_cache, "cos_sin_cache") if cos_sin_cache is not None else None
    cache_rows = check_cache(ci, rotary_dim, qi.on_device) if ci is not None else None
    freqs, af = frequencies(rotary_dim, base, scaling, cos_sin_cache)
    options = options_of(heads_per_thread, run, cache, max_positions, cache_rows)
    problem = _kernel.RowsProblem(max(tq, 1), hq, hk, head_dim, rotary_dim, interleave, sq, q_row,
                                  q_row, k_row, k_row, inverse, af, True, True, freqs)
    aligned = rows_aligned(qi, q_row) and rows_aligned(ki, k_row)
    plan = _kernel.VARIANT.plan(problem, options, fastmath=fastmath, aligned=aligned)
    item = qi.dtype.itemsize
    slots = [Slot("q", WRITE, q, qi, rows=(q_row * item, hq * head_dim * item)),
             Slot("k", WRITE, k, ki, rows=(k_row * item, hk * head_dim * item)),
             Slot("positions", POSITIONS, positions, inspect_array(positions, "positions"))]
    if ci is not None:
        slots.append(Slot("cos_sin_cache", TABLE, cos_sin_cache, ci))
    # The engine's result is q (slot 0); rope_qk returns (q, k) itself.
    return Call(tuple(slots), ((plan, tuple(range(len(slots)))),), tq, 0, len(slots),
                stream, plan.position_limit, plan.limit_reason)


__all__ = ["describe", "rope_qk"]
