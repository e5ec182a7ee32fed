"""``ropelab.rope`` on the rope_rows kernel: float16 / bfloat16 ``x``, a row-strided ``x`` or a
``cos_sin_cache``.  :mod:`ropelab.ops.rope` routes such calls here after its fast path missed;
the checks are this module's, the launch and the cache of validated call shapes the engine's
(:mod:`ropelab.ops.call`).  See :mod:`ropelab.ops.qk` for the layouts and the cache convention.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..kernels import rope_rows as _kernel
from ..target import SIMULATED
from ..validate import check_bool, check_position_values, check_rotary_dim, fail
from . import call, streams
from .arrays import ArrayInfo, inspect_array
from .rows_checks import (ROWS_VARIANTS, byte_span, check_cache, check_positions_info,
                          frequencies, options_of, rows_aligned, rows_of, span_elements,
                          spans_overlap, storage_of)
from .rows_host import host_copy, host_side, launch_host

OPTIONS = ("cache", "max_positions", "heads_per_thread", "run")


def check_variant(variant, options) -> None:
    """Refuse a variant or an option the rope_rows kernel does not take, naming what does."""
    if variant not in ROWS_VARIANTS:
        fail(f"variant '{variant}' is float32 and contiguous only; 16-bit storage, row strides "
             f"and cos_sin_cache run on the rope_rows kernel: leave variant at its default, or "
             f"pass variant='rope_rows' or 'freq_table' (its table and cache modes); "
             f"'pair_sincos' and 'pack4' also take contiguous float16 / bfloat16 x")
    unknown = set(options) - set(OPTIONS)
    if "reduce_angle" in unknown:
        fail("reduce_angle=True is float32 and contiguous only; for 16-bit or strided x use "
             "cache=True, max_positions=N (cos/sin built in float64) for long contexts")
    if unknown:
        raise TypeError(f"unknown option(s) for the rope_rows path: {', '.join(sorted(unknown))}"
                        f"; it takes {', '.join(sorted(OPTIONS))}")


def _alloc_contiguous(info: ArrayInfo):
    """``(x -> new contiguous device array of x's shape and dtype, array -> pointer)``: the
    plan was made for a contiguous ``out`` (``empty_like`` would copy a strided x's layout in
    some libraries)."""
    if info.kind == "torch":
        import torch

        return (lambda x: torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device),
                lambda t: t.data_ptr())
    if info.kind == "cupy":
        import cupy

        return (lambda x: cupy.empty(x.shape, dtype=x.dtype), lambda a: a.data.ptr)
    shape, dtype = info.shape, info.dtype
    return (lambda x: cuda.device_array(shape, dtype),
            lambda a: int(a.__cuda_array_interface__["data"][0]))


def rope_rows_call(x, x_info: ArrayInfo, *, variant, positions, base, rotary_dim, interleave,
                   inverse, scaling, out, fastmath, threads_per_block, stream, check_positions,
                   cos_sin_cache, options, key):
    """Validate a rope_rows call of ``ropelab.rope`` and run it (device arrays: remembered
    under ``key``, the public function's fast-path key)."""
    if threads_per_block is not None:
        fail("threads_per_block does not apply to the rope_rows kernel (blocks of 256 threads); "
             "its mapping options are heads_per_thread and run")
    check_variant(variant, options)
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
    check_positions = check_bool("check_positions", check_positions)
    handle = streams.resolve(stream) if stream is not None else None
    storage = storage_of(x_info, "x")
    head_dim = None if len(x_info.shape) != 3 else x_info.shape[2]
    tokens, heads, head_dim, x_row = rows_of(x_info, "x", head_dim)
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    x_span = span_elements(tokens, heads, head_dim, x_row)
    # The kernel never skips the pass-through copy here (in_place=False below): a call shape
    # validated with out=x is reused for a separate out of the same layout.
    out_info, out_row = None, heads * head_dim
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
        if not same and spans_overlap(byte_span(x_info, x_span), byte_span(
                out_info, span_elements(tokens, heads, head_dim, out_row))):
            fail("out partially overlaps x; pass out=x for in place, or a separate array")
    out_span = span_elements(tokens, heads, head_dim, out_row)
    item = x_info.dtype.itemsize
    pi = None
    if positions is not None:
        pi = inspect_array(positions, "positions")
        check_positions_info(pi, tokens)
        if out_info is not None and out_info.on_device and pi.on_device and tokens and \
                spans_overlap(byte_span(pi, tokens), byte_span(out_info, out_span)):
            fail("out overlaps positions; the kernel would overwrite positions it still reads")
    ci = inspect_array(cos_sin_cache, "cos_sin_cache") if cos_sin_cache is not None else None
    rows = check_cache(ci, rotary_dim, x_info.on_device) if ci is not None else None
    if ci is not None and out_info is not None and ci.on_device and tokens and spans_overlap(
            byte_span(ci, ci.size), byte_span(out_info, out_span)):
        fail("out overlaps cos_sin_cache; the kernel would overwrite the cache it still reads")
    freqs, af = frequencies(rotary_dim, base, scaling, cos_sin_cache)
    opts = options_of(options.get("heads_per_thread"), options.get("run"),
                      options.get("cache", False), options.get("max_positions"), rows)
    problem = _kernel.RowsProblem(max(tokens, 1), heads, 0, head_dim, rotary_dim, interleave,
                                  storage, x_row, out_row, x_row, out_row, inverse, af, False,
                                  False, freqs)
    aligned = rows_aligned(x_info, x_row) and (out_info is None
                                               or rows_aligned(out_info, out_row))
    plan = _kernel.VARIANT.plan(problem, opts, fastmath=fastmath, aligned=aligned)
    if tokens == 0:  # checked like any call; nothing to launch
        return out if out is not None else _alloc_contiguous(x_info)[0](x) if x_info.on_device \
            and x_info.kind != "simulator" else _empty_host(x, x_info)
    if pi is None:
        if plan.position_limit is not None and tokens > plan.position_limit:
            fail(f"position {tokens - 1} is out of range: {plan.limit_reason}")
    elif not pi.on_device:
        check_position_values(np.asarray(positions), plan.position_limit, plan.limit_reason)
    elif check_positions:  # the opt-in synchronous read of device positions
        call.check_device_positions(positions, plan)
    if not x_info.on_device or x_info.kind == "simulator" or SIMULATED:
        return _rope_host(x, x_info, out, out_info, x_span, out_span, positions, pi, plan,
                          host_copy(cos_sin_cache, ci), tokens)
    slots = [call.Slot("x", x, x_info), call.Slot("out", out, out_info),
             call.Slot("positions", positions, pi, host_dtype=np.int32)]
    sizes = [(x_span, item), (out_span, item), (tokens, 4)]
    extents = [x_span * item, out_span * item, 4 * tokens]
    same_layout = out_info is None or (out_info.shape, out_info.strides) == (x_info.shape,
                                                                             x_info.strides)
    pairs = [(1, 0, same_layout, "out overlaps x without being x itself; pass out=x for in "
                                 "place, or a separate array"),
             (1, 2, False, "out overlaps positions; the kernel would overwrite positions it "
                           "still reads")]
    if ci is not None:
        slots.append(call.Slot("cos_sin_cache", cos_sin_cache, ci, host_dtype=np.float32))
        sizes.append((ci.size, 4))
        extents.append(ci.nbytes)
        pairs.append((1, 3, False, "out overlaps cos_sin_cache; the kernel would overwrite the "
                                   "cache it still reads"))
    defaults = ()
    if positions is None:
        arange = call.arange_positions(tokens)  # kept alive by the engine
        defaults = ((2, int(arange.__cuda_array_interface__["data"][0])),)
    return call.launch_device(
        key, plan, slots, tuple(sizes), handle=handle, extents=extents, pairs=pairs,
        defaults=defaults, alloc=(1, *_alloc_contiguous(x_info)), result=1,
        before=(lambda arrays: arrays[2] is not None and call.check_device_positions(arrays[2],
                                                                                     plan))
        if check_positions else None)


def _empty_host(x, x_info: ArrayInfo):
    host = np.empty(x_info.shape, host_side(x, x_info).dtype)
    return cuda.to_device(host) if x_info.kind == "simulator" else host


def _rope_host(x, x_info, out, out_info, x_span, out_span, positions, pi, plan, cache_host,
               tokens):
    """NumPy or simulated arrays: the result goes to ``out`` (or a new contiguous array)."""
    positions = np.arange(tokens, dtype=np.int32) if positions is None else host_copy(positions,
                                                                                      pi)
    if out is None:
        out = _empty_host(x, x_info)
        out_info = inspect_array(out, "out")
    spans = {(x_info.ptr, x_info.shape, x_info.strides): x_span,
             (out_info.ptr, out_info.shape, out_info.strides): out_span}
    same = (x_info.ptr, x_info.shape, x_info.strides) == (out_info.ptr, out_info.shape,
                                                          out_info.strides)
    launch_host(plan, [(x, x_info, same), (out, out_info, True)], spans, positions, cache_host)
    return out


__all__ = ["check_variant", "rope_rows_call"]
