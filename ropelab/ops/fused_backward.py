"""The public backward of the fused QK-RMSNorm + RoPE: ``ropelab.fused_qknorm_rope_backward``.

Checks everything on metadata and small host arrays first (the forward's checks, from
:mod:`ropelab.ops.fused`, plus ``grad``'s), then launches the kernels of
:mod:`ropelab.kernels.fused_qknorm_rope.backward`: the main kernel, and the fixed-order reduction of
the weight gradient's partial sums (``dw="two_stage"``, the default) unless ``dw="atomic"``.
Called by the autograd formula of :mod:`ropelab.torch_ops`; usable directly on NumPy arrays
(copied to the device and back) and on device arrays (PyTorch, CuPy, numba).

Device arrays go through the one call engine (:mod:`ropelab.ops.call`): the first call of a call
shape validates and plans; later ones hit the cache, allocate ``dqkv`` and one float32 buffer
(partial sums, then ``dw``) through the caller's library and fire the pre-bound launches, with no
host sync (capturable in a CUDA graph).  Host and simulator arrays always validate.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..kernels import fused_qknorm_rope as _forward
from ..kernels.fused_qknorm_rope import backward as _kernel
from ..kernels.launch import launch
from ..target import SIMULATED
from ..validate import check_bool, check_int, check_position_values, check_positions_array, fail
from . import streams
from .arrays import ArrayInfo, device_view, inspect_array
from . import call
from .call import alloc_like
from .fused import build_problem, check_weight


def _check_grad(info: ArrayInfo, qkv_info: ArrayInfo) -> None:
    if info.shape != qkv_info.shape or info.dtype != qkv_info.dtype:
        fail(f"grad must have qkv's shape {qkv_info.shape} and dtype {qkv_info.dtype}, got "
             f"{info.shape} {info.dtype}")
    if info.on_device != qkv_info.on_device:
        fail("grad and qkv must both be host arrays or both device arrays")
    if info.nbytes and not info.c_contiguous:
        fail("grad must be C-contiguous")


def _check_user_cache(cos_sin_cache, qkv_info: ArrayInfo, rotary_dim: int) -> ArrayInfo:
    info = inspect_array(cos_sin_cache, "cos_sin_cache")
    if info.dtype != np.float32 or len(info.shape) != 2 or info.shape[1] != rotary_dim:
        fail(f"cos_sin_cache must be float32 [max_pos, rotary_dim={rotary_dim}] (cos half, then "
             f"sin half), got {info.dtype} {info.shape}")
    if info.shape[0] < 1 or (info.nbytes and not info.c_contiguous):
        fail("cos_sin_cache must be C-contiguous with at least one row")
    if info.on_device != qkv_info.on_device:
        fail("cos_sin_cache and qkv must both be host arrays or both device arrays")
    return info


def fused_qknorm_rope_backward(qkv, grad, *, num_heads_q, num_heads_k, num_heads_v, head_dim,
                               q_weight, k_weight, positions, eps=1e-6, base=10000.0,
                               rotary_dim=None, interleave=True, yarn=None, fastmath=True,
                               cache=False, max_positions=None, cos_sin_cache=None,
                               dw="two_stage", warps_per_block=None, max_blocks=None,
                               stream=None):
    """Gradients of :func:`ropelab.fused_qknorm_rope`: ``(dqkv, dq_weight, dk_weight)``.

    ``qkv`` is the forward's **input** (what it read, before it wrote in place) and ``grad``
    the gradient of its output, both ``[tokens, (heads_q + heads_k + heads_v) * head_dim]`` in
    the same storage; every other argument is the forward's, with the same meaning and checks.
    ``dqkv`` is new, like ``qkv`` (its V columns are ``grad``'s); ``dq_weight`` and
    ``dk_weight`` are float32 ``[head_dim]``, whatever the storage (cast them as you need).

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
    scalars = call.typed(("fused_qknorm_rope_backward", num_heads_q, num_heads_k, num_heads_v,
                          head_dim, eps, base, rotary_dim, interleave, yarn, fastmath, cache,
                          max_positions, dw, warps_per_block, max_blocks))
    arrays = (qkv, grad, q_weight, k_weight, positions)
    if cos_sin_cache is not None:  # a sixth caller array only when given
        arrays += (cos_sin_cache,)
    result, key = call.fast(scalars, arrays, stream)
    if result is not call.MISS:
        return result
    if dw not in _kernel.DW_MODES:
        fail(f"dw must be one of {_kernel.DW_MODES}, got {dw!r}")
    fastmath = check_bool("fastmath", fastmath)
    handle = streams.resolve(stream) if stream is not None else None
    qkv_info = inspect_array(qkv, "qkv")
    problem = build_problem(qkv_info, num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                            num_heads_v=num_heads_v, head_dim=head_dim, eps=eps, base=base,
                            rotary_dim=rotary_dim, interleave=interleave, yarn=yarn)
    grad_info = inspect_array(grad, "grad")
    _check_grad(grad_info, qkv_info)
    infos = {"qkv": qkv_info, "grad": grad_info}
    for name, obj in (("q_weight", q_weight), ("k_weight", k_weight)):
        infos[name] = inspect_array(obj, name)
        check_weight(name, infos[name], problem.head_dim, qkv_info.dtype)
    infos["positions"] = inspect_array(positions, "positions")
    check_positions_array(infos["positions"], problem.tokens)
    wpb = _kernel.WARPS_PER_BLOCK if warps_per_block is None else check_int(
        "warps_per_block", warps_per_block, minimum=1, maximum=32)
    blocks = None if max_blocks is None else check_int("max_blocks", max_blocks, minimum=1)
    if cos_sin_cache is not None:
        if cache is not False or yarn is not None or base != 10000.0:
            fail("cos_sin_cache holds its own cos and sin: it excludes cache=True, yarn and base")
        infos["cos_sin_cache"] = _check_user_cache(cos_sin_cache, qkv_info, problem.rotary_dim)
    rows = _forward.cache_options(problem, {"cache": cache, "max_positions": max_positions})
    # Vector accesses need every storage array on a VECTOR_ALIGN boundary (host arrays are
    # copied to fresh device buffers, and dqkv is a fresh allocation: both aligned).
    align = _kernel.VECTOR_ALIGN[problem.storage]
    aligned = not qkv_info.on_device or all(
        infos[n].ptr % align == 0 for n in ("qkv", "grad", "q_weight", "k_weight"))
    main, reduce = _kernel.plans(problem, dw_mode=dw, fastmath=fastmath, warps_per_block=wpb,
                                 max_blocks=blocks, max_positions=rows,
                                 user_cache=cos_sin_cache is not None, aligned=aligned)
    limit = infos["cos_sin_cache"].shape[0] if cos_sin_cache is not None else main.position_limit
    if not infos["positions"].on_device:
        check_position_values(np.asarray(positions), limit,
                              f"cos_sin_cache has rows for positions 0 .. {limit - 1}"
                              if cos_sin_cache is not None else main.limit_reason)
    two = 2 * problem.head_dim
    if not qkv_info.on_device:
        return _host_call(problem, main, reduce, qkv, grad, q_weight, k_weight, positions,
                          cos_sin_cache, two)
    for name in ("q_weight", "k_weight", "positions"):
        if problem.tokens and not infos[name].on_device:
            fail(f"{name} must be on the device with a device qkv")
    words = _kernel.KERNEL_VIEW[problem.storage]
    if problem.tokens and words == np.uint32:  # 16-bit storage moves as 32-bit words
        for name in ("qkv", "grad", "q_weight", "k_weight"):
            if infos[name].ptr % 4:
                fail(f"16-bit {name} must start at a 4-byte aligned address (the kernel moves "
                     f"two elements per 32-bit word); a fresh tensor is aligned")
    make, ptr_of = alloc_like(qkv_info)
    if problem.tokens == 0:
        dw_all = _float32_buffer(qkv, qkv_info, two, zero=True)
        return make(qkv), dw_all[:problem.head_dim], dw_all[problem.head_dim:]
    if qkv_info.kind == "simulator" or SIMULATED:
        return _simulated_call(problem, main, reduce, qkv, grad, q_weight, k_weight, positions,
                               cos_sin_cache, infos, words, two, aligned, align,
                               lambda flag: _kernel.plans(
                                   problem, dw_mode=dw, fastmath=fastmath, warps_per_block=wpb,
                                   max_blocks=blocks, max_positions=rows,
                                   user_cache=cos_sin_cache is not None, aligned=flag))
    if aligned and ptr_of(make(qkv)) % align:  # an allocator that does not align: scalar accesses
        aligned = False
        main, reduce = _kernel.plans(problem, dw_mode=dw, fastmath=fastmath,
                                     warps_per_block=wpb, max_blocks=blocks, max_positions=rows,
                                     user_cache=cos_sin_cache is not None, aligned=False)
    return _engine_call(key, problem, main, reduce, arrays, infos, words, handle,
                        align if aligned else 0)


def _engine_call(key, problem, main, reduce, arrays, infos, words, handle, align):
    """The device route: allocate the outputs, fire main (then reduce), remember the call."""
    names = ("qkv", "grad", "q_weight", "k_weight", "positions", "cos_sin_cache")[:len(arrays)]
    slots = [call.Slot(n, a, infos[n]) for n, a in zip(names, arrays)]
    two, rows, n = 2 * problem.head_dim, main.grid[0], len(arrays)
    atomic = reduce is None
    w = words.itemsize
    storage = (infos["qkv"].nbytes // w, w)
    main_sizes = (storage, storage, storage, (infos["q_weight"].nbytes // w, w),
                  (infos["k_weight"].nbytes // w, w), (problem.tokens, 4),
                  (two if atomic else rows * two, 4))
    main_indices = (0, 1, n, 2, 3, 4, n + 1)
    if n == 6:
        main_sizes += ((infos["cos_sin_cache"].size, 4),)
        main_indices += (5,)
    launches = [(main, main_sizes, main_indices)]
    if not atomic:
        launches.append((reduce, ((rows * two, 4), (two, 4)), (n + 1, n + 2)))
    outputs = _outputs(infos["qkv"], problem.head_dim, 0 if atomic else rows, align)
    return call.launch_sequence(key, slots, launches, outputs, handle=handle,
                                extents=[infos[m].nbytes for m in names])


def _outputs(qkv_info: ArrayInfo, head_dim: int, rows: int, align: int):
    """The engine's output maker: ``dqkv`` like ``qkv``, and one float32 buffer holding the
    partial sums (``rows`` blocks; none in atomic mode) and ``dw`` after them, both from the
    caller's library.  Atomic mode adds into ``dw``: zeroed on the launch stream first."""
    make, ptr_of = alloc_like(qkv_info)
    two = 2 * head_dim
    total = (rows + 1) * two if rows else two

    def outputs(arrays, handle):
        qkv = arrays[0]
        dqkv = make(qkv)
        p = ptr_of(dqkv)
        if align and p % align:
            fail(f"the allocator returned dqkv at an address not {align}-byte aligned, which "
                 f"this call shape's vector accesses need; call ropelab.ops.call.clear()")
        buffer = _float32_buffer(qkv, qkv_info, total, zero=False)
        sums = ptr_of(buffer)
        if not rows:
            call.zero_fill(sums, two, handle)
        dw_all = buffer[total - two:]
        return ((dqkv, dw_all[:head_dim], dw_all[head_dim:]),
                (p, sums, sums + (total - two) * 4))

    return outputs


def _simulated_call(problem, main, reduce, qkv, grad, q_weight, k_weight, positions,
                    cos_sin_cache, infos, words, two, aligned, align, replan):
    """Simulator arrays: numba's dispatcher, no cache (nothing is fast under the simulator)."""
    qkv_info = infos["qkv"]
    make, _ = alloc_like(qkv_info)
    dqkv = make(qkv)
    dqkv_info = inspect_array(dqkv, "dqkv")
    if aligned and dqkv_info.ptr % align:
        main, reduce = replan(False)
    sums = _float32_buffer(qkv, qkv_info, two if reduce is None else main.grid[0] * two,
                           zero=reduce is None)
    dw_all = sums if reduce is None else _float32_buffer(qkv, qkv_info, two, zero=False)
    views = [device_view(a, infos[n], words) for a, n in ((qkv, "qkv"), (grad, "grad"))]
    views.append(device_view(dqkv, dqkv_info, words))
    views += [device_view(a, infos[n], words) for a, n in ((q_weight, "q_weight"),
                                                           (k_weight, "k_weight"))]
    views.append(device_view(positions, infos["positions"]))
    views.append(_view32(sums))
    if cos_sin_cache is not None:
        views.append(device_view(cos_sin_cache, infos["cos_sin_cache"]))
    launch(main, views)
    if reduce is not None:
        launch(reduce, [_view32(sums), _view32(dw_all)])
    return dqkv, dw_all[:problem.head_dim], dw_all[problem.head_dim:]


def _float32_buffer(like, info: ArrayInfo, n: int, *, zero: bool):
    """A float32 ``[n]`` device buffer from the library ``like`` came from."""
    if info.kind == "torch":
        import torch

        return (torch.zeros if zero else torch.empty)(n, dtype=torch.float32, device=like.device)
    if info.kind == "cupy":
        import cupy

        return (cupy.zeros if zero else cupy.empty)(n, dtype=cupy.float32)
    return cuda.to_device(np.zeros(n, np.float32)) if zero else cuda.device_array(n, np.float32)


def _view32(buffer):
    return device_view(buffer, inspect_array(buffer, "buffer"))


def _host_call(problem, main, reduce, qkv, grad, q_weight, k_weight, positions, cos_sin_cache,
               two):
    """NumPy in: copy in, launch, copy ``dx`` and the weight gradients back."""
    dqkv = np.empty_like(np.asarray(qkv))
    if problem.tokens == 0:
        return dqkv, np.zeros(problem.head_dim, np.float32), np.zeros(problem.head_dim, np.float32)
    words = _kernel.KERNEL_VIEW[problem.storage]
    host = [np.ascontiguousarray(a).reshape(-1).view(words) for a in (qkv, grad)]
    views = [cuda.to_device(h) for h in host]
    views.append(cuda.device_array(host[0].shape[0], words))
    views += [cuda.to_device(np.ascontiguousarray(a).view(words)) for a in (q_weight, k_weight)]
    views.append(cuda.to_device(np.ascontiguousarray(positions, dtype=np.int32)))
    sums = (cuda.to_device(np.zeros(two, np.float32)) if reduce is None
            else cuda.device_array(main.grid[0] * two, np.float32))
    views.append(sums)
    if cos_sin_cache is not None:
        views.append(cuda.to_device(np.ascontiguousarray(cos_sin_cache).reshape(-1)))
    launch(main, views)
    dw_all = sums
    if reduce is not None:
        dw_all = cuda.device_array(two, np.float32)
        launch(reduce, [sums, dw_all])
    dqkv[...] = views[2].copy_to_host().view(dqkv.dtype).reshape(dqkv.shape)
    dw_host = dw_all.copy_to_host()
    return dqkv, dw_host[:problem.head_dim].copy(), dw_host[problem.head_dim:].copy()
