"""The public serving op: ``ropelab.fused_qknorm_rope_kv`` (QK-RMSNorm + RoPE, and K and V
written into a paged KV cache), its checks and the description of its call.

Everything the fused op checks is checked the same way (its functions, :mod:`ropelab.ops.fused`);
what the caches add is in :mod:`ropelab.ops.kv_checks`.  A bad call raises before any data
moves, every buffer unchanged.  Overlaps (a cache inside qkv, K and V caches that share bytes,
``q_out`` over anything), the position policy, zero tokens, the routes and the cache of
validated call shapes are the engine's (:mod:`ropelab.ops.call`), from the roles below.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..kernels import fused_qknorm_rope as _fused_kernel
from ..kernels import fused_qknorm_rope_kv as _kernel
from ..target import SIMULATED
from ..validate import check_bool, check_int, fail
from . import call
from .arrays import inspect_array
from .fused import build_problem, user_cache, weights
from .kv_checks import (check_aligned, check_caches, check_q_out, check_scale, check_slot_array,
                        check_slot_values)
from .slots import OUT, POSITIONS, READ, TABLE, WRITE, Call, Slot

NORMS = ("rms", "gemma")
Q_OUT = 7  # the slot of q_out in the op's array tuple (what the op returns when given)


def fused_qknorm_rope_kv(qkv, *, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight,
                         k_weight, positions, slot_mapping, k_cache, v_cache, k_scale=None,
                         v_scale=None, q_out=None, norm="rms", eps=1e-6, base=10000.0,
                         rotary_dim=None, interleave=True, yarn=None, fastmath=True,
                         warps_per_block=None, cache=False, max_positions=None, stream=None,
                         cos_sin_cache=None, check_slots=False):
    """Normalize and rotate every Q and K head of ``qkv``, write Q in place (or into
    ``q_out``), and write K and V into the paged caches at each token's slot; one launch.
    Returns the array holding Q (``qkv``, or ``q_out``).

    Parameters
    ----------
    qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight, k_weight, positions :
        As for :func:`ropelab.fused_qknorm_rope`: a ragged batch is its tokens flattened, one
        position per token.  ``num_heads_k`` and ``num_heads_v`` must be at least 1.  Only the
        Q columns of ``qkv`` are written (none with ``q_out``); K and V are read.
    slot_mapping : int ``[tokens]``
        Each token's cache slot, vLLM's meaning: ``block * block_size + offset``; a negative
        slot skips the token (padding).  NumPy slots are checked before anything runs: each
        below ``num_blocks * block_size``, no slot given to two tokens.  Device slots (int32
        or int64) are never read on the host unless ``check_slots=True`` (a synchronization
        each call); a device slot past the cache writes nothing for its token and is recorded
        for :func:`ropelab.check_errors`; two tokens with one device slot leave it undefined.
    k_cache, v_cache : ``[num_blocks, block_size, num_heads_k (num_heads_v), head_dim]``
        vLLM's flash layout, C-contiguous, where qkv lives (both NumPy or both device).  Their
        dtype is qkv's (K as ``fused_qknorm_rope`` stores it, V's bits unchanged) or FP8
        e4m3: ``uint8`` bits or ``torch.float8_e4m3fn`` (:mod:`ropelab.fp8`).  Slots no token
        names are left untouched.
    k_scale, v_scale : float, optional
        FP8 only (default 1.0): a cache entry is ``e4m3(x * float32(1 / scale))``, round to
        nearest even, saturating at +-448, as torch rounds; K is rounded to qkv's dtype first
        (the value the unfused chain would convert).  Positive, finite.
    q_out : ``[tokens, num_heads_q * head_dim]`` or ``[tokens, num_heads_q, head_dim]``, optional
        Where Q goes instead of back into qkv (qkv is then only read); qkv's dtype.
    norm : ``"rms"`` or ``"gemma"``
        ``x / rms(x) * w``, or the Gemma / Qwen3-Next form ``x / rms(x) * (1 + w)``.
    eps, base, rotary_dim, interleave, yarn, fastmath :
        As for :func:`ropelab.fused_qknorm_rope`.
    cache, max_positions, cos_sin_cache, warps_per_block, stream :
        As for :func:`ropelab.fused_qknorm_rope` (a device position without a row in the
        cos/sin cache writes NaN for its token's Q and K, in the cache too).
    check_slots : bool
        Read device slots on the host before the launch and check them as NumPy slots are
        (a synchronization, every call; for debugging).

    Raises
    ------
    TypeError, RopeInputError
        As :func:`ropelab.fused_qknorm_rope`, and for the caches, slots, scales and ``q_out``;
        nothing has run and every buffer is unchanged.
    """
    check_bool("check_slots", check_slots)
    if check_slots:
        _check_slots_now(slot_mapping, k_cache)
    scalars = call.typed(("fused_qknorm_rope_kv", num_heads_q, num_heads_k, num_heads_v,
                          head_dim, k_scale, v_scale, norm, eps, base, rotary_dim, interleave,
                          yarn, fastmath, warps_per_block, cache, max_positions))
    # Always nine entries (None where not given), so that q_out and cos_sin_cache never take
    # each other's place in a cache key.
    arrays = (qkv, q_weight, k_weight, positions, slot_mapping, k_cache, v_cache, q_out,
              cos_sin_cache)
    result, key = call.fast(scalars, arrays, stream)
    if result is not call.MISS:
        return result
    return call.run(describe(qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight,
                             k_weight, positions, slot_mapping, k_cache, v_cache, k_scale,
                             v_scale, q_out, norm, eps, base, rotary_dim, interleave, yarn,
                             fastmath, warps_per_block, cache, max_positions, stream,
                             cos_sin_cache), key)


def _check_slots_now(slot_mapping, k_cache) -> None:
    """``check_slots=True``: read the slots on the host (device slots after a synchronization
    of the whole context) and check them as NumPy slots are checked."""
    info = inspect_array(slot_mapping, "slot_mapping")
    cache = inspect_array(k_cache, "k_cache")
    if not info.on_device:
        return  # checked on every call anyway
    if SIMULATED or info.kind == "simulator":
        host = slot_mapping._ary if hasattr(slot_mapping, "_ary") else np.asarray(slot_mapping)
    else:
        from numba import cuda

        cuda.synchronize()
        host = np.asarray(cuda.as_cuda_array(slot_mapping).copy_to_host())
    if len(cache.shape) >= 2:
        check_slot_values(host, cache.shape[0] * cache.shape[1])


def describe(qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight, k_weight,
             positions, slot_mapping, k_cache, v_cache, k_scale, v_scale, q_out, norm, eps, base,
             rotary_dim, interleave, yarn, fastmath, warps_per_block, cache, max_positions,
             stream, cos_sin_cache) -> Call:
    """Check everything ``ropelab.fused_qknorm_rope_kv`` takes and plan it; the engine runs
    what comes back."""
    fastmath = check_bool("fastmath", fastmath)
    if not isinstance(norm, str):
        raise TypeError(f"norm must be a string, one of {NORMS}; got {norm!r}")
    if norm not in NORMS:
        fail(f"norm must be one of {', '.join(map(repr, NORMS))}, got {norm!r}")
    for name, heads in (("num_heads_k", num_heads_k), ("num_heads_v", num_heads_v)):
        if check_int(name, heads) < 1:
            fail(f"{name} must be at least 1: the op writes a cache of those heads")
    qkv_info = inspect_array(qkv, "qkv")
    problem = build_problem(qkv_info, num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                            num_heads_v=num_heads_v, head_dim=head_dim, eps=eps, base=base,
                            rotary_dim=rotary_dim, interleave=interleave, yarn=yarn)
    qw, kw = weights(q_weight, k_weight, problem, qkv_info)
    k_info, v_info = inspect_array(k_cache, "k_cache"), inspect_array(v_cache, "v_cache")
    capacity, fp8 = check_caches(k_info, v_info, qkv_info, problem)
    k_scale, v_scale = check_scale("k_scale", k_scale, fp8), check_scale("v_scale", v_scale, fp8)
    q_info = None
    if q_out is not None:
        q_info = inspect_array(q_out, "q_out")
        check_q_out(q_info, qkv_info, problem)
    check_aligned({"qkv": qkv_info, "q_weight": qw, "k_weight": kw, "q_out": q_info})
    s_info = inspect_array(slot_mapping, "slot_mapping")
    check_slot_array(s_info, problem.tokens)
    if not s_info.on_device:  # host slots: checked now, handed over as contiguous int64
        slot_mapping = check_slot_values(np.asarray(slot_mapping), capacity)
        s_info = inspect_array(slot_mapping, "slot_mapping")
    options = {}
    if warps_per_block is not None:
        options["warps_per_block"] = check_int("warps_per_block", warps_per_block, minimum=1,
                                               maximum=32)
    if cache is not False or max_positions is not None:
        options.update(cache=cache, max_positions=max_positions)
        _fused_kernel.cache_options(problem, options)
    cache_info = user_cache(cos_sin_cache, problem.rotary_dim, qkv_info, cache, yarn, base)
    if cache_info is not None:
        options["user_cache_rows"] = cache_info.shape[0]
    row = (problem.heads_q + problem.heads_k + problem.heads_v) * problem.head_dim
    kv_problem = _kernel.KVProblem(replace(problem, tokens=max(problem.tokens, 1)), capacity,
                                   fp8, norm == "gemma",
                                   problem.heads_q * problem.head_dim if q_out is not None else row,
                                   str(s_info.dtype), k_scale, v_scale)
    plan = _kernel.VARIANT.plan(kv_problem, options, fastmath=fastmath)
    q_cols = problem.heads_q * problem.head_dim
    slots = (
        # qkv: Q columns written in place (the only part the host route copies back), or read.
        Slot("qkv", WRITE, qkv, qkv_info, region=np.s_[:, :q_cols]) if q_out is None
        else Slot("qkv", READ, qkv, qkv_info),
        Slot("q_weight", READ, q_weight, qw), Slot("k_weight", READ, k_weight, kw),
        Slot("positions", POSITIONS, positions, inspect_array(positions, "positions")),
        Slot("slot_mapping", READ, slot_mapping, s_info),
        Slot("k_cache", WRITE, k_cache, k_info), Slot("v_cache", WRITE, v_cache, v_info),
        Slot("q_out", OUT, q_out, q_info) if q_out is not None else Slot("q_out", READ),
        Slot("cos_sin_cache", TABLE, cos_sin_cache, cache_info) if cache_info is not None
        else Slot("cos_sin_cache", READ))
    q_dest = Q_OUT if q_out is not None else 0
    kernel_arrays = (0, q_dest, 1, 2, 3, 4, 5, 6) + ((8,) if cache_info is not None else ())
    return Call(slots, ((plan, kernel_arrays),), problem.tokens, q_dest, len(slots), stream,
                plan.position_limit, plan.limit_reason)
