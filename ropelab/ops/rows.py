"""``ropelab.rope`` on the rope_rows kernel: float16 / bfloat16 ``x``, a row-strided ``x`` or a
``cos_sin_cache``.  :mod:`ropelab.ops.rope` routes such calls here after its fast path missed;
the checks and the plan are this module's, the rest the engine's (:mod:`ropelab.ops.call`).
See :mod:`ropelab.ops.qk` for the layouts and the cache convention.
"""

from __future__ import annotations

from ..kernels import rope_rows_host as _kernel
from ..validate import check_bool, check_rotary_dim, fail
from .arrays import ArrayInfo, inspect_array
from .rows_checks import (ROWS_VARIANTS, check_cache, frequencies, options_of, rows_aligned,
                          rows_of, storage_of)
from .slots import OUT, POSITIONS, READ, TABLE, Call, Slot

OPTIONS = ("cache", "max_positions", "heads_per_thread", "run")
ROPE_RESULT = 1  # what ropelab.rope returns, on either kernel: slot 1, out (given or made)


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


def describe(x, x_info: ArrayInfo, *, variant, positions, base, rotary_dim, interleave, inverse,
             scaling, out, fastmath, threads_per_block, stream, check_positions, cos_sin_cache,
             options) -> Call:
    """Check a rope_rows call of ``ropelab.rope`` and plan it; the engine runs what comes back."""
    if threads_per_block is not None:
        fail("threads_per_block does not apply to the rope_rows kernel (blocks of 256 threads); "
             "its mapping options are heads_per_thread and run")
    check_variant(variant, options)
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
    check_positions = check_bool("check_positions", check_positions)
    storage = storage_of(x_info, "x")
    head_dim = None if len(x_info.shape) != 3 else x_info.shape[2]
    tokens, heads, head_dim, x_row = rows_of(x_info, "x", head_dim)
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
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
        _, _, _, out_row = rows_of(out_info, "out", head_dim)
    ci = inspect_array(cos_sin_cache, "cos_sin_cache") if cos_sin_cache is not None else None
    cache_rows = check_cache(ci, rotary_dim, x_info.on_device) if ci is not None else None
    freqs, af = frequencies(rotary_dim, base, scaling, cos_sin_cache)
    opts = options_of(options.get("heads_per_thread"), options.get("run"),
                      options.get("cache", False), options.get("max_positions"), cache_rows)
    problem = _kernel.RowsProblem(max(tokens, 1), heads, 0, head_dim, rotary_dim, interleave,
                                  storage, x_row, out_row, x_row, out_row, inverse, af, False,
                                  False, freqs)
    aligned = rows_aligned(x_info, x_row) and (out_info is None
                                               or rows_aligned(out_info, out_row))
    plan = _kernel.VARIANT.plan(problem, opts, fastmath=fastmath, aligned=aligned)
    item, width = x_info.dtype.itemsize, heads * head_dim
    slots = [Slot("x", READ, x, x_info, rows=(x_row * item, width * item)),
             Slot("out", OUT, out, out_info, source=0, rows=(out_row * item, width * item)),
             Slot("positions", POSITIONS, positions,
                  None if positions is None else inspect_array(positions, "positions"))]
    if ci is not None:
        slots.append(Slot("cos_sin_cache", TABLE, cos_sin_cache, ci))
    kernel_arrays = tuple(range(len(slots)))
    return Call(tuple(slots), ((plan, kernel_arrays),), tokens, ROPE_RESULT, len(slots), stream,
                plan.position_limit, plan.limit_reason, check_positions)


__all__ = ["ROPE_RESULT", "check_variant", "describe"]
