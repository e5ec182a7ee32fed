"""The public entry point for plain RoPE, ``ropelab.rope``, and ``ropelab.check_errors``.

A call is validated completely before any data moves or any kernel runs.  On device arrays the
validated call is remembered (:mod:`ropelab.calls`), so the next call of the same shape costs a
few microseconds of host time: read three pointers, launch.  See :func:`rope` for what is
checked where, and the device-positions policy.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from . import calls, kernels, rows_rope, scaling as _scaling, streams
from .arrays import FAST_META, inspect_array, device_view, overlaps, register_fast_types, same_memory
from .errors import RopeDeviceError, RopeInputError
from .kernels._launch import Plan, bind, launch, read_errors
from .problem import (
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
from .target import SIMULATED
from .validate import check_bool, check_options, fail


def build_problem(x_info, *, rotary_dim=None, interleave=True, inverse=False, base=10000.0,
                  scaling=None) -> RopeProblem:
    tokens, heads, head_dim = check_x(x_info)
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    base = check_base(base)
    freqs, attention_factor = None, 1.0
    if scaling is not None:
        freqs, attention_factor = _scaling.resolve(scaling, rotary_dim=rotary_dim, base=base)
    return RopeProblem(tokens, heads, head_dim, rotary_dim, interleave, inverse, base, freqs,
                       attention_factor, scaling)


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
    stream=None,
    check_positions: bool = False,
    cos_sin_cache=None,
    **variant_options,
):
    """Apply rotary position embedding to ``x`` with one of ropelab's kernels.

    Parameters
    ----------
    x : float32 array, ``[tokens, hidden]`` or ``[tokens, heads, head_dim]``, C-contiguous
        A NumPy array (copied to the GPU and back), or a device array: a PyTorch CUDA tensor, a
        CuPy array, a numba device array, or anything with ``__cuda_array_interface__`` (used
        where it lies, no host round trip).  A 2-D ``x`` is one head of ``head_dim = hidden``.
    variant : str
        Kernel to run; see ``ropelab.kernels.VARIANTS``.
    positions : int array ``[tokens]``, optional
        Position of each token (default ``0 .. tokens-1``, kept on the device between calls).
        NumPy positions are checked on the host: ``0 <= p < 2**31`` and below the variant's
        limit (the cos/sin cache length, ``2**24`` for ``reduce_angle``).  Device positions
        (int32) are **not** read on the host, since that would synchronize with the GPU: a
        kernel without a position limit computes any int32 (a negative one rotates backwards);
        one with a limit writes NaN for an out-of-range token and records it in a device error
        word that :func:`check_errors` reads.  ``check_positions=True`` opts into the
        synchronous host check for device positions.
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
        ``__cuda_stream__``, or a raw handle.  Default: PyTorch's current stream for tensors,
        CuPy's for CuPy arrays, stream 0 otherwise.  The call never synchronizes on device
        arrays, so it can be captured in a CUDA graph (after one warm-up call outside the
        capture, which compiles the kernel and uploads its tables).
    check_positions : bool
        Read device positions on the host and check them before launching (synchronizes).
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
        positions.  Nothing has run and no buffer has changed when either is raised.

    Examples
    --------
    >>> import numpy as np, ropelab
    >>> x = np.ones((3, 8), np.float32)
    >>> y = ropelab.rope(x, positions=np.array([0, 1, 2]))
    >>> bool(np.allclose(y[0], 1.0))  # position 0 does not rotate
    True

    16-bit storage, row strides, a user cos/sin cache (h-rope16): float16 / bfloat16 ``x``
    (math in float32), an ``x`` whose rows are further apart than their width (a column slice
    of a packed qkv; the last dimension contiguous), or ``cos_sin_cache`` (float32 ``[max_pos,
    rotary_dim]``, cos half then sin half; positions index its rows) run on the ``rope_rows``
    kernel (see :mod:`ropelab.qk`), with ``variant`` left at its default, ``"freq_table"`` or
    ``"rope_rows"``; the other variants are float32 and contiguous only and say so.
    """
    if cos_sin_cache is not None:  # h-rope16: keyed on the cache too (ropelab.qk)
        return rows_rope.rope_with_cache(x, variant=variant, positions=positions, base=base,
                                  rotary_dim=rotary_dim, interleave=interleave, inverse=inverse,
                                  scaling=scaling, out=out, fastmath=fastmath,
                                  threads_per_block=threads_per_block, stream=stream,
                                  check_positions=check_positions, cos_sin_cache=cos_sin_cache,
                                  options=variant_options)
    meta = FAST_META.get(type(x))
    if meta is not None:
        # The fast path: a call shape validated before (see ropelab.calls).
        xp, xk = meta(x)
        om = FAST_META.get(type(out)) if out is not None else None
        pm = FAST_META.get(type(positions)) if positions is not None else None
        if (out is None or om is not None) and (positions is None or pm is not None):
            op, ok = om(out) if om is not None else (0, None)
            pp, pk = pm(positions) if pm is not None else (0, None)
            # The types of the arguments whose wrong type would hash like a valid value
            # (4.0 == 4, 1 == True): a wrong type never hits the entry of the right one.
            key = (type(x), xk, ok, pk, (xp | op) % 16 == 0, variant, base, rotary_dim,
                   interleave, inverse, scaling, fastmath, threads_per_block, check_positions,
                   type(base), type(rotary_dim), type(interleave), type(inverse), type(fastmath),
                   type(threads_per_block), type(check_positions), _options_key(variant_options))
            entry = calls.lookup(key)
            if entry is not None:
                return entry.run(x, xp, out, op, positions, pp, stream)
            return _validated(x, variant, positions, base, rotary_dim, interleave, inverse,
                              scaling, out, fastmath, threads_per_block, stream, check_positions,
                              variant_options, key)
    return _validated(x, variant, positions, base, rotary_dim, interleave, inverse, scaling, out,
                      fastmath, threads_per_block, stream, check_positions, variant_options, None)


def _options_key(options: dict) -> tuple:
    return tuple((k, v, type(v)) for k, v in options.items()) if options else ()


def check_errors() -> None:
    """Raise :class:`ropelab.RopeDeviceError` if a kernel met an out-of-range device position.

    Kernels with a position limit (``freq_table``'s cos/sin cache and ``reduce_angle``, the
    fused kernel's cache) do not stop on one: they write NaN for that token and store the
    position in a device error word.  This reads and clears the word, which waits for all GPU
    work queued so far (a synchronization: call it where one is acceptable, e.g. once per step).
    """
    value = read_errors()
    if value:
        raise RopeDeviceError(f"a kernel met position {value}, outside the range its mode is "
                              f"accurate for (see the variant's position limit); the affected "
                              f"tokens were written as NaN")


class _Call:
    """A validated ``rope`` call shape on device arrays: launch again on new pointers."""

    __slots__ = ("bound", "nbytes", "same_layout", "alloc", "ptr_of", "arange", "current",
                 "pos_nbytes", "check", "plan")

    def run(self, x, xp, out, op, positions, pp, stream):
        nb = self.nbytes
        if out is None:
            out = self.alloc(x)
            op = self.ptr_of(out)
        elif op != xp:
            if xp < op + nb and op < xp + nb:
                fail("out partially overlaps x; pass out=x for in place, or a separate array")
        elif not self.same_layout:
            fail("out starts where x starts but has another layout; pass out=x for in place")
        if positions is None:
            pp = self.arange
        else:
            if pp < op + nb and op < pp + self.pos_nbytes:
                fail("out overlaps positions; the kernel would overwrite positions it still reads")
            if self.check:
                _check_device_positions(positions, self.plan)
        handle = self.current() if stream is None else streams.resolve(stream)
        self.bound.fire((xp, op, pp), handle)
        return out


def _check_device_positions(positions, plan: Plan) -> None:
    """The opt-in synchronous check of device positions (``check_positions=True``)."""
    host = np.asarray(cuda.as_cuda_array(positions).copy_to_host()) if not SIMULATED else \
        positions._ary if hasattr(positions, "_ary") else np.asarray(positions)
    check_position_values(host, plan.position_limit, plan.limit_reason)


def _alloc_like(info):
    """``x -> new device array like x`` for the library ``x`` came from."""
    if info.kind == "torch":
        import torch

        return torch.empty_like, lambda t: t.data_ptr()
    if info.kind == "cupy":
        import cupy

        return cupy.empty_like, lambda a: a.data.ptr
    shape, dtype = info.shape, info.dtype
    return (lambda x: cuda.device_array(shape, dtype),
            lambda a: int(a.__cuda_array_interface__["data"][0]))


def _validated(x, variant, positions, base, rotary_dim, interleave, inverse, scaling, out,
               fastmath, threads_per_block, stream, check_positions, variant_options, key):
    """Check everything, launch, and (for device arrays) remember the call under ``key``."""
    if variant == "rope_rows":  # h-rope16
        return _rows_path(x, inspect_array(x, "x"), variant, positions, base, rotary_dim,
                          interleave, inverse, scaling, out, fastmath, threads_per_block, stream,
                          check_positions, variant_options, key)
    v = kernels.get(variant)
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
    check_positions = check_bool("check_positions", check_positions)
    threads = None if threads_per_block is None else check_threads(threads_per_block)
    handle = streams.resolve(stream) if stream is not None else None
    x_info = inspect_array(x, "x")
    if rows_rope.wants_rows(x_info):  # h-rope16: 16-bit or strided x
        return _rows_path(x, x_info, variant, positions, base, rotary_dim, interleave, inverse,
                          scaling, out, fastmath, threads_per_block, stream, check_positions,
                          variant_options, key)
    problem = build_problem(x_info, rotary_dim=rotary_dim, interleave=interleave, inverse=inverse,
                            base=base, scaling=scaling)
    require_features(v.name, v.features, problem, kernels.variants_supporting)
    check_options(f"variant '{v.name}'", variant_options, v.options)
    out_info = None
    if out is not None:
        out_info = inspect_array(out, "out")
        check_out(out_info, x_info)
        if overlaps(out_info, x_info) and not same_memory(out_info, x_info):
            fail("out partially overlaps x; pass out=x for in place, or a separate array")
        if out_info.readonly:
            fail("out is read-only; the kernel would write into it")
    pos_info = None
    if positions is not None:
        pos_info = inspect_array(positions, "positions")
        check_positions_info(pos_info, problem.tokens)
        if out_info is not None and overlaps(pos_info, out_info):
            fail("out overlaps positions; the kernel would overwrite positions it still reads")
    aligned = (not x_info.on_device
               or (x_info.ptr % 16 == 0 and (out_info is None or out_info.ptr % 16 == 0)))
    plan = v.plan(problem, variant_options, fastmath=fastmath, threads=threads, aligned=aligned)
    if pos_info is None:
        if plan.position_limit is not None and problem.tokens > plan.position_limit:
            fail(f"position {problem.tokens - 1} is out of range: {plan.limit_reason}")
    elif not pos_info.on_device:
        check_position_values(np.asarray(positions), plan.position_limit, plan.limit_reason)
    elif check_positions:
        _check_device_positions(positions, plan)

    if not x_info.on_device:
        return _host_call(x, x_info, out, out_info, positions, pos_info, plan, problem)
    if x_info.kind == "simulator" or SIMULATED:
        return _simulated_call(x, x_info, out, out_info, positions, pos_info, plan, problem)

    register_fast_types()
    call = _Call()
    call.plan = plan
    call.nbytes = x_info.nbytes
    call.same_layout = out_info is None or (out_info.shape, out_info.strides) == (x_info.shape,
                                                                                x_info.strides)
    call.alloc, call.ptr_of = _alloc_like(x_info)
    call.current = streams.current_for(x_info.kind, x)
    call.check = check_positions
    call.pos_nbytes = 4 * problem.tokens
    caller = ((x_info.size, 4), (x_info.size, 4), (problem.tokens, 4))
    call.bound = bind(plan, caller)
    pos_host_copy = None
    if positions is None:
        arange = calls.arange_positions(problem.tokens)
        call.arange = int(arange.__cuda_array_interface__["data"][0])  # kept alive by calls
    elif not pos_info.on_device:  # NumPy positions with device x: one synchronous upload
        pos_host_copy = cuda.to_device(np.ascontiguousarray(positions, dtype=np.int32))
    if key is not None and pos_host_copy is None:
        calls.remember(key, call)
    if out is None:
        out = call.alloc(x)
    pp = (int(pos_host_copy.__cuda_array_interface__["data"][0]) if pos_host_copy is not None
          else pos_info.ptr if pos_info is not None else call.arange)
    call.bound.fire((x_info.ptr, call.ptr_of(out) if out_info is None else out_info.ptr, pp),
                    handle if handle is not None else call.current())
    return out


# ---- h-rope16: 16-bit, strided and cos_sin_cache calls go to ropelab.qk (one function) ---------

def _rows_path(x, x_info, variant, positions, base, rotary_dim, interleave, inverse, scaling, out,
               fastmath, threads_per_block, stream, check_positions, variant_options, key):
    return rows_rope.rope_rows_call(x, x_info, variant=variant, positions=positions, base=base,
                             rotary_dim=rotary_dim, interleave=interleave, inverse=inverse,
                             scaling=scaling, out=out, fastmath=fastmath, stream=stream,
                             check_positions=check_positions, cos_sin_cache=None,
                             options=variant_options, threads_per_block=threads_per_block,
                             key=key)


def _simulated_call(x, x_info, out, out_info, positions, pos_info, plan, problem):
    """Device arrays under the simulator: the same plan, launched by numba's dispatcher."""
    x_dev = device_view(x, x_info)
    if out is None:
        out = cuda.device_array(x_info.shape, np.float32)
        out_dev = out.reshape(-1)
    else:
        out_dev = x_dev if same_memory(out_info, x_info) else device_view(out, out_info)
    launch(plan, (x_dev, out_dev, _positions_on_device(positions, pos_info, problem)))
    return out


def _positions_on_device(positions, pos_info, problem):
    if positions is None:
        return calls.arange_positions(problem.tokens)
    if pos_info.on_device:
        return device_view(positions, pos_info)
    return cuda.to_device(np.ascontiguousarray(positions, dtype=np.int32))


def _host_call(x, x_info, out, out_info, positions, pos_info, plan, problem):
    """NumPy in, NumPy out: copy in, launch, copy back (this path synchronizes)."""
    x_dev = cuda.to_device(np.ascontiguousarray(x).reshape(-1))
    in_place = out_info is not None and same_memory(out_info, x_info)
    out_dev = x_dev if in_place else cuda.device_array(x_info.size, np.float32)
    launch(plan, (x_dev, out_dev, _positions_on_device(positions, pos_info, problem)))
    result = out_dev.copy_to_host().reshape(x_info.shape)
    if out is None:
        return result
    out[...] = result
    return out


__all__ = ["RopeInputError", "build_problem", "check_errors", "rope"]
