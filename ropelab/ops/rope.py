"""The public entry point for plain RoPE, ``ropelab.rope``: its signature, its checks, its plan.

A call is validated completely before any data moves or any kernel runs.  What is checked
here is what only plain RoPE checks; :func:`describe` returns the call's plan and arrays (a
:class:`~ropelab.ops.slots.Call`), and the shared engine (:mod:`ropelab.ops.call`) does the
rest: positions, overlaps, the routes, the cache of validated call shapes (a few microseconds
of host time for a repeated shape on device arrays) and the stream.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import kernels, scaling as _scaling
from ..kernels.plan import STORAGE_DTYPES
from ..problem import MAX_THREADS_PER_BLOCK, WORDING, RopeProblem
from ..validate import (check_base, check_bool, check_frequencies, check_int, check_options,
                        check_rotary_dim, fail)
from . import call, rows
from .arrays import ArrayInfo, inspect_array
from .rows_checks import ROWS_VARIANTS
from .slots import OUT, POSITIONS, READ, Call, Slot, check_out


# ---- the checks only plain RoPE makes --------------------------------------------------------------

def check_x(info: ArrayInfo, dtypes=(np.float32,)) -> tuple[int, int, int]:
    """Return (tokens, heads, head_dim) of a valid ``x`` or raise (0 tokens is valid)."""
    if info.dtype not in [np.dtype(d) for d in dtypes]:
        fail(f"x must have dtype {' or '.join(np.dtype(d).name for d in dtypes)}, got {info.dtype}")
    if len(info.shape) == 2:
        tokens, head_dim = info.shape
        heads = 1
    elif len(info.shape) == 3:
        tokens, heads, head_dim = info.shape
    else:
        fail(f"x must be [tokens, hidden] or [tokens, heads, head_dim], got ndim {len(info.shape)} "
             f"(shape {info.shape})")
    if heads == 0 or head_dim == 0:
        fail(f"x must have at least one head of at least one pair, got shape {info.shape}")
    if head_dim % 2:
        fail(f"the last dimension of x (head_dim or hidden) must be even to form pairs, got {head_dim}")
    if tokens and not info.c_contiguous:  # NumPy gives empty arrays any strides
        fail("x must be C-contiguous (the kernels index it as one flat row-major buffer); "
             "pass np.ascontiguousarray(x) or x.contiguous()")
    return tokens, heads, head_dim


def require_features(variant: str, supported: frozenset, problem: RopeProblem, alternatives) -> None:
    """Refuse a call that needs a feature ``variant`` lacks; ``alternatives(features)`` lists the
    variants that have them (for the message)."""
    missing = problem.features() - set(supported)
    if missing:
        alt = alternatives(problem.features())
        hint = f"; variants that do: {', '.join(alt)}" if alt else ""
        fail(f"variant '{variant}' does not support "
             f"{', '.join(WORDING[m] for m in sorted(missing))}{hint}")


def check_threads(threads) -> int:
    threads = check_int("threads_per_block", threads)
    if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
        fail(f"threads_per_block must be in 1..{MAX_THREADS_PER_BLOCK} (CUDA's per-block limit), "
             f"got {threads}")
    return threads


def build_problem(x_info, *, rotary_dim=None, interleave=True, inverse=False, base=10000.0,
                  scaling=None, storage="float32") -> RopeProblem:
    tokens, heads, head_dim = check_x(x_info, (STORAGE_DTYPES[storage],))
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    base = check_base(base)
    scheme = _scaling.parse(scaling)  # {"rope_type": "default"} is no scaling at all
    inv_freq, attention_factor = _scaling.resolve(scheme, rotary_dim=rotary_dim, base=base)
    check_frequencies(inv_freq, attention_factor)
    return RopeProblem(tokens, heads, head_dim, rotary_dim, interleave, inverse, base,
                       inv_freq if scheme is not None else None, attention_factor, scheme,
                       storage)


def storage_of(info: ArrayInfo) -> str:
    """The storage ``x`` claims: float16, bfloat16 (a torch.bfloat16 tensor or uint16 bits), else
    float32 (a wrong dtype is then refused by :func:`check_x` with the variant's dtypes)."""
    if info.storage is not None:
        return info.storage
    return {np.dtype(np.float16): "float16", np.dtype(np.uint16): "bfloat16"}.get(info.dtype,
                                                                                "float32")


def rope(
    x,
    *,
    variant: str | None = None,
    positions=None,
    base: float = 10000.0,
    rotary_dim: int | None = None,
    interleave: bool = True,
    inverse: bool = False,
    scaling=None,
    out=None,
    fastmath: bool = True,
    threads_per_block: int | None = None,
    stream=None,
    check_positions: bool = False,
    cos_sin_cache=None,
    **variant_options,
):
    """Apply rotary position embedding to ``x`` with one of ropelab's kernels.

    Parameters
    ----------
    x : array, ``[tokens, hidden]`` or ``[tokens, heads, head_dim]``
        float32 and C-contiguous for the course's variants; ``pair_sincos`` and ``pack4`` also
        take C-contiguous float16 / bfloat16 (a ``torch.bfloat16`` tensor or ``uint16`` bit
        patterns; math in float32, stores rounded to nearest even).  Other 16-bit or
        row-strided ``x`` (rows further apart than their width, e.g. a column slice of a packed
        qkv; the last dimension contiguous) runs on the ``rope_rows`` kernel (see ``variant``).
        ``tokens`` may be 0 (nothing runs; an empty result comes back).
        A NumPy array (copied to the GPU and back), or a device array: a PyTorch CUDA tensor, a
        CuPy array, a numba device array, or anything with ``__cuda_array_interface__`` (used
        where it lies, no host round trip).  A 2-D ``x`` is one head of ``head_dim = hidden``.
    variant : str, optional
        Kernel to run; see ``ropelab.kernels.VARIANTS``.  Default: ``"flat"`` for float32
        contiguous ``x``; for 16-bit or row-strided ``x``, or with ``cos_sin_cache``, the
        ``rope_rows`` kernel (``ropelab.kernels.ROWS``).  ``"freq_table"`` and ``"rope_rows"``
        also route such calls to ``rope_rows`` (its ``cache=True, max_positions=N`` mode is
        freq_table's); ``pair_sincos`` and ``pack4`` run contiguous 16-bit ``x`` themselves;
        the seed variants (``flat``, ``block2d``, ``pack4_scalar``) are float32 and contiguous
        only and refuse them with a RopeInputError rather than quietly running another kernel.
    positions : int array ``[tokens]``, optional
        Position of each token (default ``0 .. tokens-1``, kept on the device between calls).
        The position policy, the same for every ropelab op (see
        :func:`ropelab.validate.check_position_values`): int32 values; without a position limit
        any int32 works (a negative position rotates backwards); a variant with a limit (the
        cos/sin cache length, ``2**24`` for ``reduce_angle``) needs ``[0, limit)``.  NumPy
        positions (any integer dtype) are checked on the host before anything runs.  Device
        positions (int32) are **not** read on the host, since that would synchronize with the
        GPU: an out-of-range one makes the kernel write NaN for that token and record it in a
        device error word that :func:`check_errors` reads.  ``check_positions=True`` opts into
        the synchronous host check for device positions.
    base : float
        RoPE base ("theta"), 10000 by default.
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` dims of each head (default: all).
    interleave : bool
        True: pairs ``(x[2i], x[2i+1])`` (GPT-J, the seed).  False: ``(x[i], x[i + rotary_dim/2])``
        (GPT-NeoX / Llama).
    inverse : bool
        Rotate by ``-angle`` (the backward pass).
    scaling : scaling scheme, optional
        Context-extension scheme for the frequencies (see ``ropelab.scaling``).
    out : array like ``x``, optional
        Where to write the result; ``out`` may be ``x`` itself (in place) but must not
        partially overlap it, nor overlap ``positions``.
    fastmath : bool
        Compile with fast-math (approximate sin/cos/pow), as the seed's ``--use_fast_math``.
    threads_per_block : int, optional
        Override the variant's block size (at most 1024).
    stream : optional
        CUDA stream to launch on: a PyTorch, CuPy or numba stream, an object with
        ``__cuda_stream__``, a raw handle 0/1/2, or ``ropelab.RawStream(handle)`` for any other
        raw handle you vouch for (see :mod:`ropelab.ops.streams`; a bare unknown int is
        refused).  Default: PyTorch's current stream for tensors, CuPy's for CuPy arrays,
        stream 0 otherwise.  The call never synchronizes on device arrays, so it can be
        captured in a CUDA graph (after one warm-up call outside the capture, which compiles
        the kernel and uploads its tables).
    check_positions : bool
        Read device positions on the host and check them before launching (synchronizes).
    cos_sin_cache : float32 ``[max_pos, rotary_dim]``, optional
        Your own cos/sin table, cos half then sin half (the vLLM / SGLang / FlashInfer layout;
        :mod:`ropelab.tables` builds FLUX and M-RoPE tables): ``positions`` index its rows,
        which bound them.  Excludes ``scaling``.  Runs on the ``rope_rows`` kernel.
    **variant_options
        Keyword options of the chosen variant, e.g. ``freq_table``'s ``cache=True,
        max_positions=N`` or ``reduce_angle=True``, ``pair_sincos``'s ``pairs_per_thread=4``.

    Long contexts: every variant that forms ``float32(position) * inv_freq`` on the GPU loses
    about ``angle * 2**-23`` radians in that product alone (several 1e-3 at position 131072),
    with or without fast-math.  For accurate results there use ``variant="freq_table"`` with
    ``cache=True, max_positions=N`` (cos/sin built in float64 on the host) or
    ``reduce_angle=True`` (fma angle reduction, up to position 2**24); measured errors:
    :mod:`ropelab.measure.precision`.

    Returns
    -------
    The rotated array: ``out`` when given, else a new array of the same kind as ``x`` (NumPy
    in, NumPy out; a PyTorch tensor for a tensor, a CuPy array for a CuPy array, a numba
    device array otherwise).

    Raises
    ------
    TypeError
        An argument of the wrong type (a string for ``base``, ``None`` for ``interleave``, an
        unknown variant option).
    RopeInputError (a ValueError)
        A bad value: shape, dtype, sizes, overlapping or read-only output, out-of-range host
        positions, a ``base`` or scaling whose float32 angles would overflow, an unknown raw
        stream handle.  Nothing has run and no buffer has changed when either is raised.

    Examples
    --------
    >>> import numpy as np, ropelab
    >>> x = np.ones((3, 8), np.float32)
    >>> y = ropelab.rope(x, positions=np.array([0, 1, 2]))
    >>> bool(np.allclose(y[0], 1.0))  # position 0 does not rotate
    True
    """
    # The fast path (see ropelab.ops.call): a call shape validated before.  The types of the
    # scalars go into the key too, so a wrong type never hits the entry of the right one.
    # Written out rather than call.typed(...): one tuple instead of three on every call.
    scalars = ("rope", variant, base, rotary_dim, interleave, inverse, scaling, fastmath,
               threads_per_block, check_positions, type(variant), type(base), type(rotary_dim),
               type(interleave), type(inverse), type(scaling), type(fastmath),
               type(threads_per_block), type(check_positions))
    if variant_options:
        scalars += tuple((k, v, type(v)) for k, v in variant_options.items())
    arrays = (x, out, positions) if cos_sin_cache is None else (x, out, positions, cos_sin_cache)
    result, key = call.fast(scalars, arrays, stream)
    if result is not call.MISS:
        return result
    return call.run(describe(x, variant, positions, base, rotary_dim, interleave, inverse,
                             scaling, out, fastmath, threads_per_block, stream, check_positions,
                             variant_options, cos_sin_cache), key)


def takes_rows(x_info: ArrayInfo, storage: str, variant, cos_sin_cache) -> bool:
    """Whether the call runs on the rope_rows kernel: with a ``cos_sin_cache``, for
    ``variant="rope_rows"``, for a 16-bit or row-strided ``x`` by default, for a storage the
    named variant has no build of (the seed variants then refuse it there, naming the ones that
    have), and for ``freq_table`` on a row-strided float32 ``x`` (its modes are rope_rows's).  A
    variant with a build for ``x``'s storage runs it itself, or refuses a layout it cannot
    take."""
    if cos_sin_cache is not None or variant == "rope_rows":
        return True
    contiguous = x_info.size == 0 or x_info.c_contiguous  # NumPy gives empty arrays any strides
    if variant is None:
        return storage != "float32" or not contiguous
    if storage not in kernels.get(variant).storages:
        return True
    return variant in ROWS_VARIANTS and not contiguous


def describe(x, variant, positions, base, rotary_dim, interleave, inverse, scaling, out,
             fastmath, threads_per_block, stream, check_positions, variant_options,
             cos_sin_cache=None) -> Call:
    """Check everything ``ropelab.rope`` takes and plan it; the engine runs what comes back."""
    if variant is not None and variant != "rope_rows":
        kernels.get(variant)  # a wrong type or an unknown name, before anything else
    x_info = inspect_array(x, "x")
    storage = storage_of(x_info)
    if takes_rows(x_info, storage, variant, cos_sin_cache):
        return rows.describe(
            x, x_info, variant=variant, positions=positions, base=base, rotary_dim=rotary_dim,
            interleave=interleave, inverse=inverse, scaling=scaling, out=out, fastmath=fastmath,
            threads_per_block=threads_per_block, stream=stream, check_positions=check_positions,
            cos_sin_cache=cos_sin_cache, options=variant_options)
    v = kernels.get("flat" if variant is None else variant)
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
    check_positions = check_bool("check_positions", check_positions)
    threads = None if threads_per_block is None else check_threads(threads_per_block)
    problem = build_problem(x_info, rotary_dim=rotary_dim, interleave=interleave, inverse=inverse,
                            base=base, scaling=scaling, storage=storage)
    require_features(v.name, v.features, problem, kernels.variants_supporting)
    check_options(f"variant '{v.name}'", variant_options, v.options)
    out_info = None
    if out is not None:
        out_info = inspect_array(out, "out")
        check_out(out_info, x_info)
    aligned = (not x_info.on_device
               or (x_info.ptr % 16 == 0 and (out_info is None or out_info.ptr % 16 == 0)))
    # Zero tokens are checked like any call (the variant's own checks included); nothing runs.
    plan = v.plan(replace(problem, tokens=max(problem.tokens, 1)), variant_options,
                  fastmath=fastmath, threads=threads, aligned=aligned)
    slots = (Slot("x", READ, x, x_info), Slot("out", OUT, out, out_info, source=0),
             Slot("positions", POSITIONS, positions,
                  None if positions is None else inspect_array(positions, "positions")))
    return Call(slots, ((plan, (0, 1, 2)),), problem.tokens, rows.ROPE_RESULT, 3, stream,
                plan.position_limit, plan.limit_reason, check_positions)


__all__ = ["build_problem", "check_x", "describe", "rope"]
