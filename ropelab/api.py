"""The public entry point: ``ropelab.rope``."""

from __future__ import annotations

import numpy as np
from numba import cuda

from . import kernels
from .arrays import inspect_array, overlaps, same_memory, to_device_flat
from .problem import (
    RopeInputError,
    RopeProblem,
    check_base,
    check_out,
    check_position_values,
    check_positions_info,
    check_rotary_dim,
    check_threads,
    check_x,
    require_features,
)


def _positions_on_device(positions, tokens: int, limit: int | None = None):
    """Validate ``positions`` and return an int32 device array of them."""
    if positions is None:
        if limit is not None and tokens > limit:
            raise RopeInputError(f"position {tokens - 1} is beyond the cos/sin cache of {limit} positions")
        return cuda.to_device(np.arange(tokens, dtype=np.int32))
    info = inspect_array(positions, "positions")
    check_positions_info(info, tokens)
    if info.on_device:
        # One small device-to-host copy buys a clear error instead of a wrong answer.
        host = positions._ary if hasattr(positions, "_ary") else cuda.as_cuda_array(positions).copy_to_host()
        check_position_values(host, limit)
        return to_device_flat(positions, info)
    check_position_values(positions, limit)
    return cuda.to_device(np.ascontiguousarray(positions, dtype=np.int32))


def build_problem(x_info, *, rotary_dim=None, interleave=True, inverse=False, base=10000.0,
                  scaling=None) -> RopeProblem:
    tokens, heads, head_dim = check_x(x_info)
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    base = check_base(base)
    freqs, attention_factor = None, 1.0
    if scaling is not None:
        from .scaling import resolve  # scaling schemes live in their own module

        freqs, attention_factor = resolve(scaling, rotary_dim=rotary_dim, base=base)
    return RopeProblem(tokens, heads, head_dim, rotary_dim, bool(interleave), bool(inverse), base,
                       freqs, attention_factor, scaling)


def rope(
    x,
    *,
    variant: str = "flat",
    positions=None,
    base: float = 10000.0,
    rotary_dim: int | None = None,
    interleave: bool = True,
    inverse: bool = False,
    scaling=None,
    out=None,
    fastmath: bool = True,
    threads_per_block: int | None = None,
    **variant_options,
):
    """Apply rotary position embedding to ``x`` with one of ropelab's kernels.

    Parameters
    ----------
    x : float32 array, ``[tokens, hidden]`` or ``[tokens, heads, head_dim]``, C-contiguous
        A NumPy array, or on a GPU any ``__cuda_array_interface__`` array (numba, CuPy,
        PyTorch), used in place without a host round trip.  A 2-D ``x`` is one head of
        ``head_dim = hidden``, as in the seed kernels.
    variant : str
        Kernel to run; see ``ropelab.kernels.VARIANTS``.
    positions : int array ``[tokens]``, optional
        Position id of each token (default ``0 .. tokens-1``), non-negative.
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
        partially overlap it.
    fastmath : bool
        Compile with fast-math (approximate sin/cos/pow), as the seed's ``--use_fast_math``.
    threads_per_block : int, optional
        Override the variant's block size (at most 1024).
    **variant_options
        Keyword options of the chosen variant, e.g. ``freq_table``'s ``cache=True,
        max_positions=N`` or ``reduce_angle=True``, ``pair_sincos``'s ``pairs_per_thread=4``.

    Long contexts: every variant that forms ``float32(position) * inv_freq`` on the GPU loses
    about ``angle * 2**-23`` radians in that product alone (several 1e-3 at position 131072),
    with or without fast-math.  For accurate results there use ``variant="freq_table"`` with
    ``cache=True, max_positions=N`` (cos/sin built in float64 on the host) or
    ``reduce_angle=True`` (fma angle reduction); measured errors: :mod:`ropelab.precision`.

    Returns
    -------
    The rotated array: ``out`` when given, else a new array on the side ``x`` came from
    (NumPy in, NumPy out; device in, numba device array out).

    All arguments are checked before any data moves or any kernel runs; bad input raises
    :class:`ropelab.RopeInputError` (a ``ValueError``) or ``TypeError``.
    """
    module = kernels.get(variant)
    x_info = inspect_array(x, "x")
    problem = build_problem(x_info, rotary_dim=rotary_dim, interleave=interleave,
                            inverse=inverse, base=base, scaling=scaling)
    require_features(variant, module.FEATURES, problem)
    if threads_per_block is not None:
        threads_per_block = check_threads(threads_per_block)
    out_info = None
    if out is not None:
        out_info = inspect_array(out, "out")
        check_out(out_info, x_info)
        if overlaps(out_info, x_info) and not same_memory(out_info, x_info):
            raise RopeInputError("out partially overlaps x; pass out=x for in place, or a separate array")
    prepare = getattr(module, "prepare", None)  # variants with tables or options check them here
    state = prepare(problem, **variant_options) if prepare else None
    if variant_options and prepare is None:
        raise TypeError(f"variant '{variant}' takes no options, got {sorted(variant_options)}")
    limit = getattr(state, "max_positions", None)
    pos_dev = _positions_on_device(positions, problem.tokens, limit)

    x_dev = to_device_flat(x, x_info)
    if out is None:
        out_dev = cuda.device_array_like(x_dev)
    elif out_info.on_device:
        out_dev = x_dev if same_memory(out_info, x_info) else to_device_flat(out, out_info)
    else:
        out_dev = x_dev if same_memory(out_info, x_info) else cuda.device_array_like(x_dev)

    kwargs = {"fastmath": fastmath, "threads_per_block": threads_per_block}
    if state is not None:
        kwargs["state"] = state
    module.launch(problem, x_dev, out_dev, pos_dev, **kwargs)

    if x_info.on_device:
        return out if out is not None else out_dev.reshape(x_info.shape)
    result = out_dev.copy_to_host().reshape(x_info.shape)
    if out is None:
        return result
    out[...] = result
    return out
