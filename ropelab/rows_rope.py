"""``ropelab.rope`` for float16 / bfloat16, row-strided or ``cos_sin_cache`` calls: validated
here, run on :mod:`ropelab.kernels.rope_rows` (the float32 contiguous calls keep the course's
variants in :mod:`ropelab.api`).  See :mod:`ropelab.qk` for the layouts and the cache convention.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from . import calls, streams
from .arrays import ArrayInfo, inspect_array, register_fast_types
from .kernels import rope_rows as _kernel
from .kernels._launch import bind
from .problem import check_position_values, check_rotary_dim
from .rows_checks import (ROWS_VARIANTS, byte_span, check_cache, check_positions_info,
                          frequencies, keyed_safely, options_of, rows_aligned, rows_of,
                          span_elements, spans_overlap, storage_of, wants_rows)
from .rows_launch import _RowsCall, alloc_like, fast_meta, host_side, launch_host, ptr_of
from .target import SIMULATED
from .validate import check_bool, fail


def rope_rows_call(x, x_info: ArrayInfo, *, variant, positions, base, rotary_dim, interleave,
                   inverse, scaling, out, fastmath, stream, check_positions, cos_sin_cache,
                   options, threads_per_block=None, key=None, key_has_strides=False):
    """``ropelab.rope`` for 16-bit, strided or cos_sin_cache calls, on the rope_rows kernel.

    ``key``: the caller's cache key for this call shape (see :mod:`ropelab.calls`); on device
    arrays the validated call is remembered under it, with the ``run`` method the public
    function's fast path calls.  ``key_has_strides``: the key holds the arrays' strides (else a
    strided PyTorch tensor is not remembered; see :func:`keyed_safely`).
    """
    if not isinstance(variant, str):
        raise TypeError(f"variant must be a string, got {type(variant).__name__} {variant!r}")
    if threads_per_block is not None:
        fail("threads_per_block does not apply to the rope_rows kernel (blocks of 256 threads); "
             "its mapping options are heads_per_thread and run")
    if variant not in ROWS_VARIANTS:
        fail(f"variant '{variant}' is float32 and contiguous only; 16-bit storage, row strides "
             f"and cos_sin_cache run on the rope_rows kernel (variant='rope_rows', or "
             f"'freq_table' with its table and cache modes)")
    allowed = {"cache", "max_positions", "heads_per_thread", "run"}
    unknown = set(options) - allowed
    if "reduce_angle" in unknown:
        fail("reduce_angle=True is float32 and contiguous only; for 16-bit or strided x use "
             "cache=True, max_positions=N (cos/sin built in float64) for long contexts")
    if unknown:
        raise TypeError(f"unknown option(s) for the rope_rows path: {', '.join(sorted(unknown))}"
                        f"; it takes {', '.join(sorted(allowed))}")
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
    check_positions = check_bool("check_positions", check_positions)
    handle = streams.resolve(stream) if stream is not None else None
    storage = storage_of(x_info, "x")
    head_dim = None if len(x_info.shape) != 3 else x_info.shape[2]
    tokens, heads, head_dim, x_row = rows_of(x_info, "x", head_dim)
    if tokens == 0:
        fail(f"x must not be empty, got shape {x_info.shape}")
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    width = heads * head_dim
    # The kernel never skips the pass-through copy here (in_place=False below): a call shape
    # validated with out=x is reused for a separate out of the same layout.
    out_info = None
    if out is not None:
        out_info = inspect_array(out, "out")
        if out_info.shape != x_info.shape or storage_of(out_info, "out") != storage:
            fail(f"out must have the shape and dtype of x ({x_info.shape}, {storage}), got "
                 f"{out_info.shape}, {out_info.dtype}")
        if out_info.on_device != x_info.on_device:
            fail("x and out must both be host (NumPy) arrays or both be device arrays")
        if out_info.readonly:
            fail("out is read-only; the kernel would write into it")
        _, _, _, out_row = rows_of(out_info, "out", head_dim)
        same = (out_info.ptr, out_info.strides) == (x_info.ptr, x_info.strides)
        if not same and spans_overlap(
                byte_span(x_info, span_elements(tokens, heads, head_dim, x_row)),
                byte_span(out_info, span_elements(tokens, heads, head_dim, out_row))):
            fail("out partially overlaps x; pass out=x for in place, or a separate array")
    else:
        out_row = width
    pi = None
    if positions is not None:
        pi = inspect_array(positions, "positions")
        check_positions_info(pi, tokens)
    ci = inspect_array(cos_sin_cache, "cos_sin_cache") if cos_sin_cache is not None else None
    rows = check_cache(ci, rotary_dim, x_info.on_device) if ci is not None else None
    freqs, af = frequencies(rotary_dim, base, scaling, cos_sin_cache)
    opts = options_of(options.get("heads_per_thread"), options.get("run"),
                      options.get("cache", False), options.get("max_positions"), rows)
    problem = _kernel.RowsProblem(tokens, heads, 0, head_dim, rotary_dim, interleave, storage,
                                  x_row, out_row, x_row, out_row, inverse, af, False, False,
                                  freqs)
    aligned = rows_aligned(x_info, x_row) and (out_info is None
                                               or rows_aligned(out_info, out_row))
    plan = _kernel.VARIANT.plan(problem, opts, fastmath=fastmath, aligned=aligned)
    if pi is None:
        if plan.position_limit is not None and tokens > plan.position_limit:
            fail(f"position {tokens - 1} is out of range: {plan.limit_reason}")
    elif not pi.on_device:
        check_position_values(np.asarray(positions), plan.position_limit, plan.limit_reason)
    elif check_positions:  # the opt-in synchronous read of device positions
        host = positions.copy_to_host() if pi.kind == "simulator" else \
            np.asarray(cuda.as_cuda_array(positions).copy_to_host())
        check_position_values(host, plan.position_limit, plan.limit_reason)
    item = x_info.dtype.itemsize
    x_span = span_elements(tokens, heads, head_dim, x_row)
    if not x_info.on_device or x_info.kind == "simulator" or SIMULATED:
        return _rope_host(x, x_info, out, out_info, x_span, positions, pi, plan, ci,
                          cos_sin_cache, tokens, head_dim)
    register_fast_types()
    out_given = out is not None
    if out is None:
        out = alloc_like(x, x_info)
        out_info = inspect_array(out, "out")
    out_span = span_elements(tokens, heads, head_dim, out_row)
    if key is not None and (pi is None or pi.on_device) and (
            key_has_strides or keyed_safely(x_info, out_info)):
        call = _RowsCall()
        call.bound = bind(plan, ((x_span, item), (out_span, item), (tokens, 4))
                          + (((rows * rotary_dim, 4),) if rows else ()))
        call.x_span, call.out_span, call.pos_nbytes = x_span * item, out_span * item, 4 * tokens
        call.alloc = lambda a: alloc_like(a, x_info)
        call.ptr_of = ptr_of
        call.same_layout = not out_given or (out_info.shape, out_info.strides) == (
            x_info.shape, x_info.strides)
        call.arange = int(calls.arange_positions(tokens).__cuda_array_interface__["data"][0])
        call.current = streams.current_for(x_info.kind, x)
        call.check = check_positions
        calls.remember(key, call)
    if pi is None:
        pos_ptr = int(calls.arange_positions(tokens).__cuda_array_interface__["data"][0])
    elif not pi.on_device:
        dev = cuda.to_device(np.ascontiguousarray(positions, dtype=np.int32))
        pos_ptr = int(dev.__cuda_array_interface__["data"][0])
    else:
        pos_ptr = pi.ptr
    sizes = ((x_span, item), (out_span, item), (tokens, 4))
    sizes += ((rows * rotary_dim, 4),) if rows else ()
    bound = bind(plan, sizes)
    ptrs = (x_info.ptr, out_info.ptr, pos_ptr) + ((ci.ptr,) if ci is not None else ())
    bound.fire(ptrs, handle if handle is not None else streams.current_for(x_info.kind, x)())
    if pi is not None and not pi.on_device:
        cuda.synchronize()  # the uploaded positions must outlive the kernel
    return out


def rope_with_cache(x, *, variant, positions, base, rotary_dim, interleave, inverse, scaling, out,
                    fastmath, threads_per_block, stream, check_positions, cos_sin_cache, options):
    """``ropelab.rope(..., cos_sin_cache=...)``: a fast path keyed on the cache too, else
    :func:`rope_rows_call`."""
    key = None
    mx, mc = fast_meta(x), fast_meta(cos_sin_cache)
    mo = fast_meta(out) if out is not None else (0, None)
    mp = fast_meta(positions) if positions is not None else (0, None)
    if mx is not None and mc is not None and mo is not None and mp is not None:
        key = ("rope_cache", type(x), mx[1], mo[1], mp[1], mc[1], (mx[0] | mo[0]) % 16 == 0,
               variant, calls.typed((base, rotary_dim, interleave, inverse, fastmath,
                                     threads_per_block, check_positions)), scaling,
               tuple((k, v, type(v)) for k, v in options.items()))
        entry = calls.lookup(key)
        if entry is not None:
            return entry.run(x, mx[0], out, mo[0] if out is not None else 0, positions,
                             mp[0] if positions is not None else 0, stream, mc[0])
    return rope_rows_call(x, inspect_array(x, "x"), variant=variant, positions=positions,
                          base=base, rotary_dim=rotary_dim, interleave=interleave,
                          inverse=inverse, scaling=scaling, out=out, fastmath=fastmath,
                          stream=stream, check_positions=check_positions,
                          cos_sin_cache=cos_sin_cache, options=options,
                          threads_per_block=threads_per_block, key=key, key_has_strides=True)


def _rope_host(x, x_info, out, out_info, x_span, positions, pi, plan, ci, cos_sin_cache, tokens,
               head_dim):
    """NumPy or simulated arrays: the result goes to ``out`` (or a new contiguous array)."""
    if positions is None:
        positions = np.arange(tokens, dtype=np.int32)
    elif pi.on_device and pi.kind == "simulator":
        positions = positions.copy_to_host()
    cache_host = None
    if ci is not None:
        cache_host = cos_sin_cache.copy_to_host() if ci.kind == "simulator" else cos_sin_cache
    if out is None:
        host = host_side(x, x_info)
        out = np.empty(x_info.shape, host.dtype)
        if x_info.kind == "simulator":
            out = cuda.to_device(out)
        out_info = inspect_array(out, "out")
    out_span = span_elements(tokens, *(_heads_dim(out_info, head_dim)), _row_of(out_info))
    spans = {(x_info.ptr, x_info.shape, x_info.strides): x_span,
             (out_info.ptr, out_info.shape, out_info.strides): out_span}
    same = (x_info.ptr, x_info.shape, x_info.strides) == (out_info.ptr, out_info.shape,
                                                          out_info.strides)
    arrays = [(x, x_info, same), (out, out_info, True)]
    launch_host(plan, arrays, spans, positions, cache_host)
    return out


def _heads_dim(info: ArrayInfo, head_dim: int) -> tuple[int, int]:
    width = info.shape[1] if len(info.shape) == 2 else info.shape[1] * info.shape[2]
    return width // head_dim, head_dim


def _row_of(info: ArrayInfo) -> int:
    width = info.shape[1] if len(info.shape) == 2 else info.shape[1] * info.shape[2]
    return width if info.shape[0] <= 1 else info.strides[0] // info.dtype.itemsize


__all__ = ["rope_rows_call", "rope_with_cache", "wants_rows"]
