"""The public backward of the fused QK-RMSNorm + RoPE: ``ropelab.fused_qknorm_rope_backward``.

Checks everything on metadata and small host arrays first (the forward's checks, from
:mod:`ropelab.ops.fused`, plus ``grad``'s), then launches the kernels of
:mod:`ropelab.kernels.fused_qknorm_rope.backward`: the main kernel, and the fixed-order reduction of
the weight gradient's partial sums (``dw="two_stage"``, the default) unless ``dw="atomic"``.
Called by the autograd formula of :mod:`ropelab.torch_ops`; usable directly on NumPy arrays
(copied to the device and back) and on device arrays (PyTorch, CuPy, numba).

Device arrays go through the one call engine (:mod:`ropelab.ops.call`): the first call of a call
shape validates and plans; later ones hit the cache, make ``dqkv`` and one float32 buffer
(partial sums, then ``dw``) through the caller's library and fire the pre-bound launches, with no
host sync (capturable in a CUDA graph).  Host and simulator arrays always validate.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..kernels import fused_qknorm_rope as _forward
from ..kernels.fused_qknorm_rope import backward as _kernel, backward_host as _host
from ..target import SIMULATED
from ..validate import check_bool, check_int, fail
from . import call, memory
from .arrays import ArrayInfo, inspect_array
from .fused import build_problem, user_cache, weights
from .slots import OUT, POSITIONS, READ, SCRATCH, TABLE, Call, Slot


def _check_grad(info: ArrayInfo, qkv_info: ArrayInfo) -> None:
    if info.shape != qkv_info.shape or info.dtype != qkv_info.dtype:
        fail(f"grad must have qkv's shape {qkv_info.shape} and dtype {qkv_info.dtype}, got "
             f"{info.shape} {info.dtype}")
    if info.on_device != qkv_info.on_device:
        fail("grad and qkv must both be host arrays or both device arrays")
    if info.nbytes and not info.c_contiguous:
        fail("grad must be C-contiguous")


def fused_qknorm_rope_backward(qkv, grad, *, num_heads_q, num_heads_k, num_heads_v, head_dim,
                               q_weight, k_weight, positions, eps=1e-6, base=10000.0,
                               rotary_dim=None, interleave=True, yarn=None, fastmath=True,
                               cache=False, max_positions=None, cos_sin_cache=None,
                               dw="two_stage", warps_per_block=None, max_blocks=None,
                               stream=None, weight_grad_dtype="float32"):
    """Gradients of :func:`ropelab.fused_qknorm_rope`: ``(dqkv, dq_weight, dk_weight)``.

    ``qkv`` is the forward's **input** (what it read, before it wrote in place) and ``grad``
    the gradient of its output, both ``[tokens, (heads_q + heads_k + heads_v) * head_dim]`` in
    the same storage; every other argument is the forward's, with the same meaning and checks.
    ``dqkv`` is new, like ``qkv`` (its V columns are ``grad``'s); ``dq_weight`` and
    ``dk_weight`` are float32 ``[head_dim]``, whatever the storage, or with
    ``weight_grad_dtype="storage"`` in the weights' own dtype, each float32 sum rounded once
    (what autograd hands the weights: no cast launches after the backward; two-stage only).

    ``dw``: ``"two_stage"`` (default: per-block partial sums, then one reduction in a fixed
    order: the same bits on every run) or ``"atomic"`` (blocks add into the result with
    ``cuda.atomic.add``: one launch fewer, bits that vary with the blocks' order).
    ``warps_per_block`` (1 .. 32) and ``max_blocks`` override the geometry (the grid is at most
    ``max_blocks`` blocks, by default one wave of the GPU; each warp loops over (token, head)
    units).
    ``stream``: as for the forward; on NumPy arrays the call is synchronous.
    """
    # The fast path (see ropelab.ops.call): a call shape validated before launches again on
    # this call's pointers.  The key carries every pointer % 16 and every scalar's type, so a
    # misaligned array or a 4.0 for an int re-validates (and is refused there).
    scalars = fast_scalars(num_heads_q, num_heads_k, num_heads_v, head_dim, eps, base, rotary_dim,
                           interleave, yarn, fastmath, cache, max_positions, dw, warps_per_block,
                           max_blocks, weight_grad_dtype)
    arrays = (qkv, grad, q_weight, k_weight, positions)
    if cos_sin_cache is not None:  # a sixth caller array only when given
        arrays += (cos_sin_cache,)
    result, key = call.fast(scalars, arrays, stream)
    if result is not call.MISS:
        return result
    return call.run(describe(qkv, grad, num_heads_q, num_heads_k, num_heads_v, head_dim,
                             q_weight, k_weight, positions, eps, base, rotary_dim, interleave,
                             yarn, fastmath, cache, max_positions, cos_sin_cache, dw,
                             warps_per_block, max_blocks, stream, weight_grad_dtype), key)


# "float32": the exact float32 sums; "storage": rounded once to the weights' dtype.
WEIGHT_GRAD_DTYPES = ("float32", "storage")


def fast_scalars(num_heads_q, num_heads_k, num_heads_v, head_dim, eps, base, rotary_dim,
                 interleave, yarn, fastmath, cache, max_positions, dw, warps_per_block,
                 max_blocks, weight_grad_dtype) -> tuple:
    """The scalar part of the fast-path key of a :func:`fused_qknorm_rope_backward` call (its
    arrays: ``(qkv, grad, q_weight, k_weight, positions[, cos_sin_cache])``); see
    :func:`ropelab.ops.fused.fast_scalars` for who else computes it."""
    return call.typed(("fused_qknorm_rope_backward", num_heads_q, num_heads_k, num_heads_v,
                       head_dim, eps, base, rotary_dim, interleave, yarn, fastmath, cache,
                       max_positions, dw, warps_per_block, max_blocks, weight_grad_dtype))


def describe(qkv, grad, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight, k_weight,
             positions, eps, base, rotary_dim, interleave, yarn, fastmath, cache, max_positions,
             cos_sin_cache, dw, warps_per_block, max_blocks, stream,
             weight_grad_dtype="float32") -> Call:
    """Check everything the backward takes and plan its kernels; the engine runs what comes
    back: the main kernel into a new ``dqkv`` and one float32 buffer (the partial sums, then
    ``dw``), then the reduction of the partial sums (two-stage)."""
    if dw not in _host.DW_MODES:
        fail(f"dw must be one of {_host.DW_MODES}, got {dw!r}")
    if weight_grad_dtype not in WEIGHT_GRAD_DTYPES:
        fail(f"weight_grad_dtype must be one of {WEIGHT_GRAD_DTYPES}, got {weight_grad_dtype!r}")
    fastmath = check_bool("fastmath", fastmath)
    qkv_info = inspect_array(qkv, "qkv")
    problem = build_problem(qkv_info, num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                            num_heads_v=num_heads_v, head_dim=head_dim, eps=eps, base=base,
                            rotary_dim=rotary_dim, interleave=interleave, yarn=yarn)
    grad_info = inspect_array(grad, "grad")
    _check_grad(grad_info, qkv_info)
    qw, kw = weights(q_weight, k_weight, problem, qkv_info)
    pos_info = inspect_array(positions, "positions")
    wpb = _kernel.WARPS_PER_BLOCK if warps_per_block is None else check_int(
        "warps_per_block", warps_per_block, minimum=1, maximum=32)
    blocks = None if max_blocks is None else check_int("max_blocks", max_blocks, minimum=1)
    cache_info = user_cache(cos_sin_cache, problem.rotary_dim, qkv_info, cache, yarn, base)
    rows = _forward.cache_options(problem, {"cache": cache, "max_positions": max_positions})
    storage_arrays = (qkv_info, grad_info, qw, kw)
    if qkv_info.on_device and problem.tokens:
        for name, info in (("q_weight", qw), ("k_weight", kw), ("positions", pos_info)):
            if not info.on_device:
                fail(f"{name} must be on the device with a device qkv")
        if _kernel.KERNEL_VIEW[problem.storage] == np.uint32:  # 16-bit storage as 32-bit words
            for name, info in zip(("qkv", "grad", "q_weight", "k_weight"), storage_arrays):
                if info.ptr % 4:
                    fail(f"16-bit {name} must start at a 4-byte aligned address (the kernel "
                         f"moves two elements per 32-bit word); a fresh tensor is aligned")
    # Vector accesses need every storage array on a VECTOR_ALIGN boundary (host arrays are
    # copied to fresh device buffers, and dqkv is a fresh allocation: aligned).
    align = _kernel.VECTOR_ALIGN[problem.storage]
    aligned = not qkv_info.on_device or all(i.ptr % align == 0 for i in storage_arrays)
    if aligned and _device_route(qkv_info) and _fresh_pointer(qkv, qkv_info) % align:
        aligned = False  # an allocator that does not align dqkv: scalar accesses
    # dw in the weights' 16-bit dtype: the reduction rounds each sum (float32 needs no cast).
    typed = weight_grad_dtype == "storage" and problem.storage != "float32"
    if typed and dw == "atomic":
        fail("weight_grad_dtype='storage' needs dw='two_stage' (the atomic mode adds into a "
             "float32 dw)")
    main, reduce = _host.plans(replace(problem, tokens=max(problem.tokens, 1)), dw_mode=dw,
                               fastmath=fastmath, warps_per_block=wpb, max_blocks=blocks,
                               max_positions=rows, user_cache=cache_info is not None,
                               aligned=aligned,
                               dw_storage=problem.storage if typed else "float32")
    limit, reason = main.position_limit, main.limit_reason
    if cache_info is not None:
        limit = cache_info.shape[0]
        reason = f"cos_sin_cache has rows for positions 0 .. {limit - 1}"
    two = 2 * problem.head_dim
    partial = 0 if reduce is None else _host.partial_rows(main) * two
    slots = [Slot("qkv", READ, qkv, qkv_info), Slot("grad", READ, grad, grad_info),
             Slot("q_weight", READ, q_weight, qw), Slot("k_weight", READ, k_weight, kw),
             Slot("positions", POSITIONS, positions, pos_info)]
    if cache_info is not None:
        slots.append(Slot("cos_sin_cache", TABLE, cos_sin_cache, cache_info))
    callers = len(slots)
    d = callers
    slots.append(Slot("dqkv", OUT, source=0, align=align if aligned else 0))
    hd = problem.head_dim
    if typed:  # the float32 partial sums, and dw in the weights' dtype and library
        sums, dws = callers + 1, callers + 2
        slots += [Slot("partial", SCRATCH, size=partial),
                  Slot("dw", SCRATCH, size=two, source=2, source_dtype=True,
                       zero=not problem.tokens)]

        def result(values):  # dqkv, dq_weight, dk_weight (dw's halves: one allocation)
            return values[d], values[dws][:hd], values[dws][hd:]
    else:  # one float32 buffer: the partial sums (two-stage), then dw; atomic adds into dw
        buffer, sums, dws = callers + 1, callers + 2, callers + 3
        slots += [Slot("buffer", SCRATCH, size=partial + two,
                       zero=reduce is None or not problem.tokens),
                  Slot("partial", SCRATCH, size=partial or two, within=(buffer, 0)),
                  Slot("dw", SCRATCH, size=two, within=(buffer, partial))]

        def result(values):  # dqkv, dq_weight, dk_weight (the buffer's tail: one allocation)
            return values[d], values[buffer][partial:partial + hd], values[buffer][partial + hd:]
    table = (5,) if cache_info is not None else ()
    launches = [(main, (0, 1, d, 2, 3, 4, sums) + table)]
    if reduce is not None:
        launches.append((reduce, (sums, dws)))

    return Call(tuple(slots), tuple(launches), problem.tokens, result, callers, stream, limit,
                reason)


def _device_route(info: ArrayInfo) -> bool:
    return info.on_device and info.kind != "simulator" and not SIMULATED


def _fresh_pointer(qkv, info: ArrayInfo) -> int:
    """Where the caller's allocator puts a new array like ``qkv`` (dqkv's alignment)."""
    make, ptr_of = memory.maker(info)
    return ptr_of(make(qkv))
