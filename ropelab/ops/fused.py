"""The public fused QK-RMSNorm + RoPE: ``ropelab.fused_qknorm_rope``, its problem and its checks.

What only the fused op checks is checked here, on metadata, before any data moves or any
kernel runs; a bad call raises :class:`ropelab.RopeInputError` (a ``ValueError``) or
``TypeError`` and leaves ``qkv`` untouched.  The kernel itself lives in
:mod:`ropelab.kernels.fused_qknorm_rope`; positions, overlaps, the routes, the cache of
validated call shapes and the stream are the shared engine's (:mod:`ropelab.ops.call`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import scaling
from ..kernels import fused_qknorm_rope as _kernel
from ..kernels.plan import MAX_ELEMENTS
from ..problem import FusedProblem
from ..validate import (check_base, check_bool, check_eps, check_frequencies, check_int,
                        check_rotary_dim as check_rope_rotary_dim, fail)
from . import call
from .arrays import ArrayInfo, inspect_array
from .rows_checks import check_cache
from .slots import OUT, POSITIONS, READ, TABLE, WRITE, Call, Slot, check_out


# ---- validation --------------------------------------------------------------------------------

def _storage_of(dtype: np.dtype) -> str | None:
    for name, dt in _kernel.STORAGES.items():
        if dtype == dt:
            return name
    return None


def check_qkv(info: ArrayInfo, heads: tuple[int, int, int], head_dim: int) -> tuple[int, str]:
    """(tokens, storage) of a valid ``qkv`` or raise."""
    storage = _storage_of(info.dtype)
    if storage is None:
        fail(f"qkv must be float32, float16, or uint16 holding bfloat16 bits; got {info.dtype}")
    if len(info.shape) != 2:
        fail(f"qkv must be 2-D [tokens, (heads_q + heads_k + heads_v) * head_dim], got shape "
              f"{info.shape}")
    if info.nbytes and not info.c_contiguous:  # NumPy gives empty arrays zero strides
        fail("qkv must be C-contiguous (rows [Q | K | V] back to back); pass a contiguous array")
    tokens, width = info.shape
    hq, hk, hv = heads
    if width != (hq + hk + hv) * head_dim:
        fail(f"qkv rows have {width} elements but (num_heads_q + num_heads_k + num_heads_v) * "
              f"head_dim = ({hq} + {hk} + {hv}) * {head_dim} = {(hq + hk + hv) * head_dim}")
    if storage == "bfloat16" and info.ptr % 4 and info.on_device:
        fail("bfloat16 qkv must start at a 4-byte aligned address (the kernel moves two "
              "elements per 32-bit word); a fresh tensor is aligned, an odd-offset slice is not")
    if tokens * width > MAX_ELEMENTS:
        fail(f"qkv has {tokens * width} elements; the kernel's 32-bit indexing allows "
              f"{MAX_ELEMENTS}")
    return tokens, storage


def check_weight(name: str, info: ArrayInfo, head_dim: int, dtype: np.dtype) -> None:
    if info.shape != (head_dim,):
        fail(f"{name} must have shape ({head_dim},) (one weight per dim of a head), got {info.shape}")
    if info.dtype != dtype:
        fail(f"{name} must have the dtype of qkv ({dtype}), got {info.dtype}")
    if not info.c_contiguous:
        fail(f"{name} must be contiguous")


def check_rotary_dim(rotary_dim, head_dim: int, interleave: bool) -> int:
    rotary_dim = check_rope_rotary_dim(rotary_dim, head_dim)  # the checks plain RoPE makes
    per_lane = head_dim // _kernel.WARP
    if not interleave and rotary_dim % (2 * per_lane):
        fail(f"with interleave=False (NeoX) rotary_dim must be a multiple of 2 * head_dim / 32 = "
              f"{2 * per_lane} so that each half of the rotated dims fills whole lanes; got "
              f"{rotary_dim}")
    return rotary_dim


def build_problem(qkv_info: ArrayInfo, *, num_heads_q, num_heads_k, num_heads_v, head_dim,
                  eps=1e-6, base=10000.0, rotary_dim=None, interleave=True, yarn=None) -> FusedProblem:
    """Check every scalar argument and ``qkv``'s metadata; return the problem."""
    head_dim = check_int("head_dim", head_dim, minimum=1)
    if head_dim not in _kernel.HEAD_DIMS:
        fail(f"head_dim {head_dim} is not supported: the kernel gives each of a warp's 32 lanes "
              f"head_dim / 32 elements and keeps interleaved pairs inside a lane, so head_dim must "
              f"be one of {', '.join(map(str, _kernel.HEAD_DIMS))}")
    hq = check_int("num_heads_q", num_heads_q, minimum=0)
    hk = check_int("num_heads_k", num_heads_k, minimum=0)
    hv = check_int("num_heads_v", num_heads_v, minimum=0)
    if hq + hk == 0:
        fail("num_heads_q + num_heads_k must be at least 1: there is nothing to normalize")
    interleave = check_bool("interleave", interleave)
    tokens, storage = check_qkv(qkv_info, (hq, hk, hv), head_dim)
    rotary_dim = check_rotary_dim(rotary_dim, head_dim, bool(interleave))
    eps = check_eps(eps)
    base = check_base(base)
    inv_freq, att = scaling.resolve(scaling.as_fused_yarn(yarn), rotary_dim=rotary_dim, base=base)
    check_frequencies(inv_freq, att)
    return FusedProblem(tokens, hq, hk, hv, head_dim, rotary_dim, bool(interleave), storage, eps,
                        base, att, inv_freq)


def fused_qknorm_rope(qkv, *, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight, k_weight,
                      positions, eps=1e-6, base=10000.0, rotary_dim=None, interleave=True,
                      yarn=None, fastmath=True, warps_per_block=None, heads_per_warp=None,
                      cache=False, max_positions=None, stream=None, cos_sin_cache=None,
                      out=None):
    """RMSNorm every Q and K head of ``qkv``, then rotate it (RoPE), in place (or into
    ``out``); return ``qkv`` (or ``out``).

    Parameters
    ----------
    qkv : ``[tokens, (num_heads_q + num_heads_k + num_heads_v) * head_dim]``, C-contiguous
        Each row is ``[Q heads | K heads | V heads]``.  float32, float16 or bfloat16: a PyTorch
        ``torch.bfloat16`` tensor as it is, or ``uint16`` bit patterns from any other library
        (see :mod:`ropelab.bf16`).  A NumPy array (copied to the GPU, and its Q and K columns
        copied back) or a device array (PyTorch, CuPy, numba, ``__cuda_array_interface__``),
        modified where it lies.  V is neither changed nor written.  With ``out``, only read.
    num_heads_q, num_heads_k, num_heads_v, head_dim : int
        ``head_dim`` one of 64, 128, ..., 512 (multiples of 64).
    q_weight, k_weight : ``[head_dim]``, same dtype as ``qkv``
        RMSNorm weights, one vector for all Q heads and one for all K heads.
    positions : int ``[tokens]``
        SGLang's ``position_ids``, under the position policy of every ropelab op (see
        :func:`ropelab.rope`): int32 values (a NumPy array of any integer dtype whose values fit);
        any int32 without ``cache`` (a negative one rotates backwards); with ``cache=True``
        they must lie in ``[0, max_positions)``: NumPy positions outside are refused before
        anything runs; a device position outside makes the kernel write that token's Q and K
        heads as NaN and record the position for :func:`ropelab.check_errors`.  Device
        positions are int32 and never read on the host.
    eps : float
        Added to ``mean(x**2)`` inside the square root (>= 0; a positive value that float32
        rounds to 0 is refused).
    base : float
        RoPE base (theta), > 1.
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` dims of each head (default all); the rest are
        normalized only.  Even; with ``interleave=False`` a multiple of ``head_dim / 16``.
    interleave : bool
        True: pairs ``(2i, 2i+1)`` (GPT-J); False: ``(i, i + rotary_dim/2)`` (NeoX).
    yarn : :class:`ropelab.scaling.YaRN` or dict(factor, low, high[, attention_factor]), optional
        YaRN's frequency blend; the dict is SGLang's form (``YaRN.from_ramp``);
        ``attention_factor`` scales the rotated dims.
    fastmath : bool
        Approximate sin/cos/sqrt/division (SGLang uses ``__sincosf`` too).
    warps_per_block : int, optional
        Override the block size in warps (1 .. 32).
    heads_per_warp : int, optional
        1 (the course's mapping: one warp per token and head), 2 or 4 (a warp loads that many
        heads before computing).  Default: ``kernels.fused_qknorm_rope.HEADS_PER_WARP[storage]``:
        two for 16-bit storage, each head on half a warp with 128-bit accesses.
    cache, max_positions : bool, int
        The long-context path: ``cache=True`` reads cos/sin from float32 tables
        ``[max_positions, rotary_dim / 2]`` computed in float64 on the host (YaRN included) and
        kept on the device across calls, instead of computing ``sin``/``cos`` of a float32
        angle (whose error grows with the position).  Accurate to float32 rounding at every
        position below ``max_positions``.
    cos_sin_cache : float32 ``[max_pos, rotary_dim]``, optional
        Your own cos/sin table (cos half, then sin half: the vLLM / SGLang / FlashInfer layout;
        see :mod:`ropelab.tables` for FLUX and M-RoPE): ``positions`` index its rows, with the
        ``cache=True`` position policy.  Excludes ``cache``, ``yarn`` and ``base`` other than
        the default (the table holds its own frequencies).
    stream : optional
        As for :func:`ropelab.rope`: default PyTorch's / CuPy's current stream for their arrays,
        else stream 0.  No synchronization on device arrays; capturable in a CUDA graph after a
        warm-up call.
    out : array like ``qkv``, optional
        Write the result here instead of into ``qkv``, in one pass: Q and K heads normalized
        and rotated, V heads copied, ``qkv`` only read (what autograd's functional forward
        needs: no copy of ``qkv`` first).  Same shape and dtype as ``qkv``, C-contiguous, on
        the same side (both NumPy or both device arrays), writable, sharing no byte with
        ``qkv`` or any other argument; ``out=qkv`` (the same memory in the same layout) is the
        in-place call.  Q and K come out bit for bit as the in-place call writes them.

    Returns
    -------
    ``qkv``, modified in place; or ``out``, when given.

    Raises
    ------
    TypeError
        An argument of the wrong type (a string for ``eps``, a float for ``head_dim``).
    RopeInputError (a ValueError)
        A bad value: shapes, dtypes, alignment, overlaps, a read-only ``qkv`` or ``out``,
        out-of-range host positions, an ``eps`` or scaling float32 cannot honour, an unknown
        raw stream handle.  Nothing has run and ``qkv`` (and ``out``) are untouched when
        either is raised.

    Examples
    --------
    >>> import numpy as np, ropelab
    >>> qkv = np.ones((1, 3 * 64), np.float32)
    >>> w = np.ones(64, np.float32)
    >>> out = ropelab.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1,
    ...     head_dim=64, q_weight=w, k_weight=w, positions=np.zeros(1, np.int32))
    >>> bool(np.allclose(out, 1.0, atol=1e-3))  # RMS of ones is 1, position 0 does not rotate
    True
    """
    # The fast path (see ropelab.ops.call); the key carries every pointer % 16, so a bfloat16
    # qkv two bytes off a word boundary never replays the launch of an aligned one.  A
    # separate out is another op name in the key (its arrays are qkv, out, the weights, ...).
    separate = out is not None and out is not qkv
    scalars = fast_scalars(separate, num_heads_q, num_heads_k, num_heads_v, head_dim, eps, base,
                           rotary_dim, interleave, yarn, fastmath, warps_per_block,
                           heads_per_warp, cache, max_positions)
    arrays = ((qkv, out, q_weight, k_weight, positions) if separate else
              (qkv, q_weight, k_weight, positions))
    if cos_sin_cache is not None:  # the last kernel array only when given
        arrays += (cos_sin_cache,)
    result, key = call.fast(scalars, arrays, stream)
    if result is not call.MISS:
        return result
    return call.run(describe(qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight,
                             k_weight, positions, eps, base, rotary_dim, interleave, yarn,
                             fastmath, warps_per_block, heads_per_warp, cache, max_positions,
                             stream, cos_sin_cache, out if separate else None), key)


def fast_scalars(separate, num_heads_q, num_heads_k, num_heads_v, head_dim, eps, base,
                 rotary_dim, interleave, yarn, fastmath, warps_per_block, heads_per_warp, cache,
                 max_positions) -> tuple:
    """The scalar part of the fast-path key of a :func:`fused_qknorm_rope` call (``separate``:
    a separate ``out``, whose arrays are ``(qkv, out, q_weight, k_weight, positions)``).  The
    torch ops compute it once per config and call :func:`ropelab.ops.call.fast` themselves: the
    same key, so the same validated call, without this function's keyword binding."""
    return call.typed(("fused_qknorm_rope_out" if separate else "fused_qknorm_rope",
                       num_heads_q, num_heads_k, num_heads_v, head_dim, eps, base, rotary_dim,
                       interleave, yarn, fastmath, warps_per_block, heads_per_warp, cache,
                       max_positions))


def user_cache(cos_sin_cache, rotary_dim: int, qkv_info: ArrayInfo, cache, yarn,
               base) -> ArrayInfo | None:
    """The checked info of the ``cos_sin_cache`` argument of the fused op or its backward, or
    None."""
    if cos_sin_cache is None:
        return None
    if cache is not False or yarn is not None or base != 10000.0:
        fail("cos_sin_cache holds its own cos and sin: it excludes cache=True, yarn and base")
    info = inspect_array(cos_sin_cache, "cos_sin_cache")
    check_cache(info, rotary_dim, qkv_info.on_device)
    return info


def caller_sizes(problem: FusedProblem) -> tuple:
    """(elements, itemsize) of qkv, q_weight, k_weight, positions as the kernel sees them
    (bfloat16 qkv as uint32 words of two elements)."""
    item = 4 if problem.storage == "float32" else 2
    words = (problem.tokens * problem.row * item // 4, 4) if problem.storage == "bfloat16" else \
        (problem.tokens * problem.row, item)
    return (words, (problem.head_dim, item), (problem.head_dim, item), (problem.tokens, 4))


def weights(q_weight, k_weight, problem: FusedProblem, qkv_info: ArrayInfo) -> tuple:
    """The checked infos of both weights."""
    infos = []
    for name, obj in (("q_weight", q_weight), ("k_weight", k_weight)):
        infos.append(inspect_array(obj, name))
        check_weight(name, infos[-1], problem.head_dim, qkv_info.dtype)
    return tuple(infos)


def describe(qkv, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight, k_weight,
             positions, eps, base, rotary_dim, interleave, yarn, fastmath, warps_per_block,
             heads_per_warp, cache, max_positions, stream, cos_sin_cache=None, out=None) -> Call:
    """Check everything ``ropelab.fused_qknorm_rope`` takes and plan it; the engine runs what
    comes back (``out``: a separate output, not ``qkv``, for the out-of-place kernel)."""
    fastmath = check_bool("fastmath", fastmath)
    qkv_info = inspect_array(qkv, "qkv")
    problem = build_problem(qkv_info, num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                            num_heads_v=num_heads_v, head_dim=head_dim, eps=eps, base=base,
                            rotary_dim=rotary_dim, interleave=interleave, yarn=yarn)
    qw, kw = weights(q_weight, k_weight, problem, qkv_info)
    options = {}
    if warps_per_block is not None:
        options["warps_per_block"] = check_int("warps_per_block", warps_per_block, minimum=1,
                                               maximum=32)
    if heads_per_warp is not None:
        hpw = check_int("heads_per_warp", heads_per_warp)
        if hpw not in _kernel.HEADS_PER_WARP_CHOICES:
            fail(f"heads_per_warp must be one of {_kernel.HEADS_PER_WARP_CHOICES}, got {hpw}")
        options["heads_per_warp"] = hpw
    if cache is not False or max_positions is not None:
        options.update(cache=cache, max_positions=max_positions)
        _kernel.cache_options(problem, options)
    cache_info = user_cache(cos_sin_cache, problem.rotary_dim, qkv_info, cache, yarn, base)
    if cache_info is not None:
        options["user_cache_rows"] = cache_info.shape[0]
    infos = (qkv_info, qw, kw)
    if out is not None:
        out_info = inspect_array(out, "out")
        check_out(out_info, qkv_info, "qkv")
        if problem.storage == "bfloat16" and out_info.ptr % 4 and out_info.on_device:
            fail("bfloat16 out must start at a 4-byte aligned address (the kernel moves two "
                 "elements per 32-bit word)")
        options["out_of_place"] = True
        infos += (out_info,)
    # Vector accesses need qkv, both weights (and out) on 16-byte boundaries (host arrays are
    # copied to fresh, aligned device buffers).
    aligned = not qkv_info.on_device or all(i.ptr % 16 == 0 for i in infos)
    plan = _kernel.VARIANT.plan(replace(problem, tokens=max(problem.tokens, 1)), options,
                                fastmath=fastmath, aligned=aligned)
    qk = (problem.heads_q + problem.heads_k) * problem.head_dim
    if out is None:
        slots = [Slot("qkv", WRITE, qkv, qkv_info, region=np.s_[:, :qk])]  # V never written
    else:  # qkv only read; out written in full (V copied), or out=qkv's memory: in place
        slots = [Slot("qkv", READ, qkv, qkv_info), Slot("out", OUT, out, out_info, source=0)]
    slots += [Slot("q_weight", READ, q_weight, qw), Slot("k_weight", READ, k_weight, kw),
              Slot("positions", POSITIONS, positions, inspect_array(positions, "positions"))]
    if cache_info is not None:  # the kernel's last array
        slots.append(Slot("cos_sin_cache", TABLE, cos_sin_cache, cache_info))
    return Call(tuple(slots), ((plan, tuple(range(len(slots)))),), problem.tokens,
                QKV if out is None else OUT_SLOT, len(slots), stream, plan.position_limit,
                plan.limit_reason)


QKV = 0  # what ropelab.fused_qknorm_rope returns: slot 0, qkv, modified in place
OUT_SLOT = 1  # ... or, with out=, slot 1: out
