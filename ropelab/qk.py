"""Plain RoPE the way a model calls it: ``ropelab.rope_qk`` and the 16-bit / strided / cached
path of ``ropelab.rope``.

Both run :mod:`ropelab.kernels.rope_rows`:

* ``rope_qk(q, k, positions=..., head_dim=...)`` rotates q and k **in place, in one launch**, each
  with its own head count (GQA) and its own row stride, so q and k may be column slices of a
  packed ``qkv`` (``qkv[:, :q_size]``, ``qkv[:, q_size:q_size + k_size]``) without a copy.  It
  is FlashInfer's ``apply_rope_pos_ids_inplace`` / vLLM's ``rotary_embedding(positions, query,
  key, head_size, cos_sin_cache, is_neox)`` with ropelab's checks.
* ``ropelab.rope(x, ...)`` with float16 / bfloat16 ``x``, a row-strided ``x`` or a
  ``cos_sin_cache`` comes here (:func:`rope_rows_call`); float32 contiguous calls keep the
  course's variants.

Layouts accepted for q, k and x: ``[tokens, heads * head_dim]`` or ``[tokens, heads, head_dim]``,
the last dimension contiguous, heads back to back inside a row, any row (token) stride at least
the row's width.  Storage: float32, float16, bfloat16 (a ``torch.bfloat16`` tensor, or ``uint16``
bit patterns from any other library; see :mod:`ropelab.bf16`); the math is float32.

``cos_sin_cache``: float32 ``[max_pos, rotary_dim]``, row ``p`` = ``cos(p * f)`` for the
``rotary_dim / 2`` pairs, then ``sin(p * f)`` (the vLLM / SGLang / FlashInfer convention).
``positions`` index its rows, so multi-axis schemes (FLUX's 3-axis ids, Qwen2-VL's M-RoPE) pass
a per-token table and ``positions = arange(tokens)``; :mod:`ropelab.tables` builds both.
Out-of-range positions follow ropelab's policy: NumPy positions are refused before launch,
device positions write NaN into the token's rotated pairs and set the error word that
:func:`ropelab.check_errors` reads.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from . import calls, scaling as _scaling, streams
from .arrays import FAST_META, ArrayInfo, inspect_array, register_fast_types
from .errors import RopeInputError
from .kernels import rope_rows as _kernel
from .kernels._launch import bind, launch
from .problem import check_base, check_position_values, check_rotary_dim
from .target import SIMULATED
from .validate import check_bool, check_int, fail


# ---- what an array is, as rows of heads ---------------------------------------------------------

def storage_of(info: ArrayInfo, name: str) -> str:
    """float32, float16 or bfloat16 (uint16 bits or a torch.bfloat16 tensor), else TypeError."""
    if info.storage == "bfloat16" or info.dtype == np.uint16:
        return "bfloat16"
    if info.dtype == np.float16:
        return "float16"
    if info.dtype == np.float32:
        return "float32"
    raise TypeError(f"{name} must be float32, float16, or bfloat16 (a torch.bfloat16 tensor or "
                    f"uint16 bit patterns); got {info.dtype}")


def rows_of(info: ArrayInfo, name: str, head_dim: int | None) -> tuple[int, int, int, int]:
    """(tokens, heads, head_dim, row stride in elements) of a valid rows-of-heads array.

    ``head_dim=None``: a 2-D array is one head per token (``head_dim`` = its width).
    """
    item = info.dtype.itemsize
    if len(info.shape) == 2:
        tokens, width = info.shape
        head_dim = width if head_dim is None else head_dim
        if width % head_dim:
            fail(f"{name} rows have {width} elements, not a multiple of head_dim {head_dim}")
        heads = width // head_dim
        if width > 1 and info.strides[1] != item:
            fail(f"{name}'s last dimension must be contiguous (stride {item} bytes), got "
                 f"{info.strides[1]}; pass a contiguous copy")
    elif len(info.shape) == 3:
        tokens, heads, hd = info.shape
        if head_dim is not None and hd != head_dim:
            fail(f"{name} has head_dim {hd}, expected {head_dim}")
        head_dim = hd
        width = heads * head_dim
        if head_dim > 1 and info.strides[2] != item:
            fail(f"{name}'s last dimension must be contiguous (stride {item} bytes), got "
                 f"{info.strides[2]}")
        if heads > 1 and info.strides[1] != head_dim * item:
            fail(f"{name}'s heads must be back to back inside a row (head stride "
                 f"{head_dim * item} bytes), got {info.strides[1]}")
    else:
        fail(f"{name} must be [tokens, heads * head_dim] or [tokens, heads, head_dim], got shape "
             f"{info.shape}")
    if head_dim == 0 or head_dim % 2:
        fail(f"head_dim must be a positive even number to form pairs, got {head_dim}")
    row = width if tokens <= 1 else info.strides[0]
    if tokens > 1:
        if row % item or row < width * item:
            fail(f"{name}'s row stride ({row} bytes) must be a whole number of elements and at "
                 f"least the row's width ({width * item} bytes): rows must not overlap")
        row //= item
    span = (tokens - 1) * row + width if tokens else 0
    if span > _kernel.MAX_ELEMENTS:
        fail(f"{name} spans {span} elements; the kernel's 32-bit indexing allows "
             f"{_kernel.MAX_ELEMENTS}")
    return tokens, heads, head_dim, row


def span_elements(tokens: int, heads: int, head_dim: int, row: int) -> int:
    return (tokens - 1) * row + heads * head_dim if tokens else 0


def _spans_overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _byte_span(info: ArrayInfo, elements: int) -> tuple[int, int]:
    return info.ptr, info.ptr + elements * info.dtype.itemsize


def check_cache(info: ArrayInfo, rotary_dim: int, x_on_device: bool) -> int:
    """The number of rows of a valid ``cos_sin_cache``."""
    if info.dtype != np.float32:
        raise TypeError(f"cos_sin_cache must be float32, got {info.dtype}")
    if len(info.shape) != 2 or info.shape[1] != rotary_dim:
        fail(f"cos_sin_cache must be [max_pos, rotary_dim] = [max_pos, {rotary_dim}] (cos half, "
             f"then sin half), got shape {info.shape}")
    if info.shape[0] == 0:
        fail("cos_sin_cache has no rows")
    if not info.c_contiguous:
        fail("cos_sin_cache must be C-contiguous")
    if info.on_device != x_on_device:
        fail("cos_sin_cache must live where the data does (both NumPy, or both on the device)")
    return info.shape[0]


def frequencies(rotary_dim: int, base, scaling, cos_sin_cache) -> tuple[np.ndarray, float]:
    """(float64 inverse frequencies, attention factor); a cache carries its own."""
    base = check_base(base)
    if cos_sin_cache is not None:
        if scaling is not None:
            fail("scaling and cos_sin_cache exclude each other: the cache already holds the "
                 "scaled cos and sin")
        return np.zeros(rotary_dim // 2), 1.0
    if scaling is None:
        return 1.0 / base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim), 1.0
    return _scaling.resolve(scaling, rotary_dim=rotary_dim, base=base)


def options_of(heads_per_thread, run, cache, max_positions, cos_sin_cache_rows) -> dict:
    """The kernel options, each checked once."""
    options = {"heads_per_thread": heads_per_thread, "run": run}
    cache = check_bool("cache", cache)
    if cache or max_positions is not None:
        if cos_sin_cache_rows is not None:
            fail("cache=True builds a cos/sin cache; with cos_sin_cache= you pass your own")
        if not cache:
            fail("max_positions is the length of the cos/sin cache; pass cache=True with it")
        if max_positions is None:
            fail("cache=True needs max_positions=N, the number of positions (0 .. N-1) to tabulate")
        options.update(cache=True, max_positions=check_int("max_positions", max_positions, minimum=1))
    if cos_sin_cache_rows is not None:
        options["user_cache_rows"] = cos_sin_cache_rows
    return options


# ---- launching ------------------------------------------------------------------------------------

def _host_side(obj, info: ArrayInfo) -> np.ndarray:
    """The NumPy array behind a NumPy or simulated device array (written back in place)."""
    return obj._ary if info.kind == "simulator" else obj


def _span_view(array: np.ndarray, elements: int) -> np.ndarray:
    """A 1-D view from ``array``'s first element over ``elements`` elements (rows and the gaps
    between them, which belong to the same allocation)."""
    return np.lib.stride_tricks.as_strided(array, shape=(elements,),
                                           strides=(array.dtype.itemsize,), writeable=False)


def _write_back(target: np.ndarray, flat: np.ndarray, info: ArrayInfo) -> None:
    """Copy the logical elements of ``flat`` (laid out as ``info``) into ``target`` only: the
    gaps between rows may hold another array's columns (k beside q in qkv)."""
    item = info.dtype.itemsize
    strides = tuple(s // item * flat.dtype.itemsize for s in info.strides)
    target[...] = np.lib.stride_tricks.as_strided(flat, shape=info.shape, strides=strides)


def launch_host(plan, arrays, spans, positions, cache_array):
    """Host (NumPy) or simulated arrays: copy each span to the device, launch, copy back.

    ``arrays``: [(object, info, written)] in kernel order (x, out) or (q, k).
    """
    devs, done = [], {}
    for obj, info, _ in arrays:
        key = (info.ptr, info.shape, info.strides)
        if key not in done:
            host = _span_view(_host_side(obj, info), spans[key])
            done[key] = cuda.to_device(np.ascontiguousarray(host))
        devs.append(done[key])
    pos = cuda.to_device(np.ascontiguousarray(positions, dtype=np.int32))
    extra = [cuda.to_device(np.ascontiguousarray(cache_array).reshape(-1))] \
        if cache_array is not None else []
    launch(plan, (*devs, pos, *extra))
    for (obj, info, written), dev in zip(arrays, devs):
        if written:
            _write_back(_host_side(obj, info), dev.copy_to_host(), info)


class _QKCall:
    """A validated ``rope_qk`` call shape on device arrays: check new pointers, launch."""

    __slots__ = ("bound", "current", "spans", "rows")

    def fire(self, qp, kp, pp, cp, stream):
        q_bytes, k_bytes, pos_bytes = self.spans
        if pp < qp + q_bytes and qp < pp + pos_bytes or pp < kp + k_bytes and kp < pp + pos_bytes:
            fail("positions overlap q or k; the kernel writes them while it reads positions")
        if qp < kp + k_bytes and kp < qp + q_bytes and not columns_disjoint(qp, *self.rows[:2],
                                                                            kp, *self.rows[2:]):
            fail("q and k overlap; they must be disjoint (column slices of one qkv are fine)")
        handle = self.current() if stream is None else streams.resolve(stream)
        self.bound.fire((qp, kp, pp) if cp is None else (qp, kp, pp, cp), handle)


def _meta(obj):
    """(pointer, hashable layout key) on the fast path, or None: torch's key gains strides."""
    m = FAST_META.get(type(obj))
    if m is None:
        return None
    ptr, key = m(obj)
    stride = getattr(obj, "stride", None)
    return ptr, (key, stride() if callable(stride) else None)


# ---- rope_qk --------------------------------------------------------------------------------------

def rope_qk(q, k, *, positions, head_dim, rotary_dim=None, interleave=True, inverse=False,
            base=10000.0, scaling=None, cos_sin_cache=None, cache=False, max_positions=None,
            fastmath=True, heads_per_thread=None, run=None, stream=None):
    """Rotate ``q`` and ``k`` in place, in one launch; return ``(q, k)``.

    Parameters
    ----------
    q, k : ``[tokens, heads * head_dim]`` or ``[tokens, heads, head_dim]``
        float32, float16 or bfloat16 (both the same), each with its own head count (GQA) and
        its own row stride (column slices of a packed ``qkv`` are fine; the last dimension must
        be contiguous).  NumPy arrays (copied to the device and back) or device arrays
        (PyTorch, CuPy, numba, ``__cuda_array_interface__``), modified where they lie.
    positions : int ``[tokens]``
        Position of each token (int32 on the device).  See :func:`ropelab.rope` for the host /
        device checking policy.
    head_dim : int
        Elements per head (even).
    rotary_dim, interleave, inverse, base, scaling, fastmath, stream
        As for :func:`ropelab.rope` (``scaling``: linear, NTK, YaRN, Llama 3.1, ...).
    cos_sin_cache : float32 ``[max_pos, rotary_dim]``, optional
        Your cos/sin table (cos half, then sin half); ``positions`` index its rows.  Excludes
        ``scaling``.  See :mod:`ropelab.tables` for FLUX and M-RoPE tables.
    cache, max_positions : bool, int
        Let ropelab build the cos/sin cache in float64 (accurate at every position below
        ``max_positions``) instead of computing sin/cos of a float32 angle.
    heads_per_thread, run : int, optional
        Mapping overrides (heads a thread loads before computing: 1, 2, 4; elements per run).

    Raises ``TypeError`` / :class:`ropelab.RopeInputError` before anything runs on bad input.
    """
    mq, mk, mp = _meta(q), _meta(k), _meta(positions)
    mc = _meta(cos_sin_cache) if cos_sin_cache is not None else (0, None)
    key = None
    if mq is not None and mk is not None and mp is not None and mc is not None:
        key = ("rope_qk", type(q), mq[1], mk[1], mp[1], mc[1],
               (mq[0] | mk[0] | mc[0]) % 16 == 0,
               calls.typed((head_dim, rotary_dim, interleave, inverse, base, scaling, cache,
                            max_positions, fastmath, heads_per_thread, run)))
        entry = calls.lookup(key)
        if entry is not None:
            entry.fire(mq[0], mk[0], mp[0], mc[0] if cos_sin_cache is not None else None, stream)
            return q, k
    return _rope_qk_validated(q, k, positions, head_dim, rotary_dim, interleave, inverse, base,
                              scaling, cos_sin_cache, cache, max_positions, fastmath,
                              heads_per_thread, run, stream, key)


def _rope_qk_validated(q, k, positions, head_dim, rotary_dim, interleave, inverse, base, scaling,
                       cos_sin_cache, cache, max_positions, fastmath, heads_per_thread, run,
                       stream, key):
    interleave = check_bool("interleave", interleave)
    inverse = check_bool("inverse", inverse)
    fastmath = check_bool("fastmath", fastmath)
    handle = streams.resolve(stream) if stream is not None else None
    head_dim = check_int("head_dim", head_dim, minimum=2)
    qi, ki = inspect_array(q, "q"), inspect_array(k, "k")
    sq, sk = storage_of(qi, "q"), storage_of(ki, "k")
    if sq != sk:
        raise TypeError(f"q and k must have the same dtype, got {sq} and {sk}")
    if qi.on_device != ki.on_device:
        fail("q and k must both be NumPy arrays or both be device arrays")
    tq, hq, _, q_row = rows_of(qi, "q", head_dim)
    tk, hk, _, k_row = rows_of(ki, "k", head_dim)
    if tq != tk:
        fail(f"q and k must have the same number of tokens, got {tq} and {tk}")
    if qi.readonly or ki.readonly:
        fail("q and k are rotated in place; a read-only array cannot be")
    rotary_dim = check_rotary_dim(rotary_dim, head_dim)
    q_span, k_span = span_elements(tq, hq, head_dim, q_row), span_elements(tk, hk, head_dim, k_row)
    if qi.on_device and tq and _spans_overlap(_byte_span(qi, q_span), _byte_span(ki, k_span)):
        item = qi.dtype.itemsize
        if not columns_disjoint(qi.ptr, q_row * item, hq * head_dim * item, ki.ptr,
                                k_row * item, hk * head_dim * item):
            fail("q and k overlap; they must be disjoint (column slices of one qkv are fine)")
    pi = inspect_array(positions, "positions")
    _check_positions(pi, tq)
    ci = inspect_array(cos_sin_cache, "cos_sin_cache") if cos_sin_cache is not None else None
    rows = check_cache(ci, rotary_dim, qi.on_device) if ci is not None else None
    freqs, af = frequencies(rotary_dim, base, scaling, cos_sin_cache)
    options = options_of(heads_per_thread, run, cache, max_positions, rows)
    for name, info, span in (("q", qi, q_span), ("k", ki, k_span)):
        if pi.on_device and tq and _spans_overlap(_byte_span(pi, tq), _byte_span(info, span)):
            fail(f"positions overlap {name}; the kernel writes {name} while it reads positions")
    problem = _kernel.RowsProblem(tq, hq, hk, head_dim, rotary_dim, interleave, sq, q_row, q_row,
                                  k_row, k_row, inverse, af, True, True, freqs)
    aligned = _aligned(qi, q_row) and _aligned(ki, k_row)
    plan = _kernel.VARIANT.plan(problem, options, fastmath=fastmath, aligned=aligned)
    if not pi.on_device:
        check_position_values(np.asarray(positions), plan.position_limit, plan.limit_reason)
    if tq == 0:
        return q, k
    if not qi.on_device or qi.kind == "simulator" or SIMULATED:
        if pi.on_device and pi.kind == "simulator":
            positions = positions.copy_to_host()
        cache_host = None
        if ci is not None:
            cache_host = cos_sin_cache.copy_to_host() if ci.kind == "simulator" else cos_sin_cache
        spans = {(qi.ptr, qi.shape, qi.strides): q_span, (ki.ptr, ki.shape, ki.strides): k_span}
        launch_host(plan, [(q, qi, True), (k, ki, True)], spans, positions, cache_host)
        return q, k
    if not pi.on_device:
        fail("with device q and k, positions must be a device int32 array too")
    register_fast_types()
    item = qi.dtype.itemsize
    call = _QKCall()
    sizes = ((q_span, item), (k_span, item), (tq, 4)) + (((rows * rotary_dim, 4),) if rows else ())
    call.bound = bind(plan, sizes)
    call.current = streams.current_for(qi.kind, q)
    call.spans = (q_span * item, k_span * item, 4 * tq)
    call.rows = (q_row * item, hq * head_dim * item, k_row * item, hk * head_dim * item)
    if key is not None:  # _meta's keys hold strides: strided q and k are cached too
        calls.remember(key, call)
    ptrs = (qi.ptr, ki.ptr, pi.ptr) + ((ci.ptr,) if ci is not None else ())
    call.bound.fire(ptrs, handle if handle is not None else call.current())
    return q, k


def columns_disjoint(a_ptr: int, a_row: int, a_width: int, b_ptr: int, b_row: int,
                     b_width: int) -> bool:
    """Whether two arrays of rows (byte addresses, row strides and widths in bytes) whose spans
    interleave touch no common byte: q and k as column slices of one qkv.  They must share the
    row stride, and b's columns, taken relative to a's row start, must fall in the gap after
    a's columns."""
    if a_row != b_row:
        return False
    offset = (b_ptr - a_ptr) % a_row
    return offset >= a_width and offset + b_width <= a_row


def _aligned(info: ArrayInfo, row: int) -> bool:
    """Vector accesses are legal: the rows start on 16-byte boundaries (host arrays are copied
    to fresh, aligned device buffers, so only their row stride counts)."""
    start = info.ptr % 16 == 0 or not info.on_device
    return start and (row * info.dtype.itemsize) % 16 == 0


def _check_positions(info: ArrayInfo, tokens: int) -> None:
    if info.shape != (tokens,):
        fail(f"positions must have shape ({tokens},) (one per token), got {info.shape}")
    if info.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers (int32), got {info.dtype}")
    if info.on_device and info.dtype != np.int32:
        raise TypeError(f"device positions must be int32, got {info.dtype}")
    if info.on_device and tokens and not info.c_contiguous:
        fail("positions must be contiguous")


# ---- the rope(x) path for 16-bit, strided or cached calls ----------------------------------------

def wants_rows(x_info: ArrayInfo) -> bool:
    """Whether ``ropelab.rope`` must take this path: 16-bit storage or a non-contiguous x."""
    return (x_info.storage == "bfloat16" or x_info.dtype in (np.float16, np.uint16)
            or not x_info.c_contiguous)


ROWS_VARIANTS = ("flat", "freq_table", "rope_rows")  # names that may run here (see rope())


def rope_rows_call(x, x_info: ArrayInfo, *, variant, positions, base, rotary_dim, interleave,
                   inverse, scaling, out, fastmath, stream, check_positions, cos_sin_cache,
                   options, threads_per_block=None, key=None, key_has_strides=False):
    """``ropelab.rope`` for 16-bit, strided or cos_sin_cache calls, on the rope_rows kernel.

    ``key``: the caller's cache key for this call shape (see :mod:`ropelab.calls`); on device
    arrays the validated call is remembered under it, with the ``run`` method the public
    function's fast path calls.  ``key_has_strides``: the key holds the arrays' strides (else a
    strided PyTorch tensor is not remembered; see :func:`_keyed_safely`).
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
        if not same and _spans_overlap(
                _byte_span(x_info, span_elements(tokens, heads, head_dim, x_row)),
                _byte_span(out_info, span_elements(tokens, heads, head_dim, out_row))):
            fail("out partially overlaps x; pass out=x for in place, or a separate array")
    else:
        out_row = width
    pi = None
    if positions is not None:
        pi = inspect_array(positions, "positions")
        _check_positions(pi, tokens)
    ci = inspect_array(cos_sin_cache, "cos_sin_cache") if cos_sin_cache is not None else None
    rows = check_cache(ci, rotary_dim, x_info.on_device) if ci is not None else None
    freqs, af = frequencies(rotary_dim, base, scaling, cos_sin_cache)
    opts = options_of(options.get("heads_per_thread"), options.get("run"),
                      options.get("cache", False), options.get("max_positions"), rows)
    problem = _kernel.RowsProblem(tokens, heads, 0, head_dim, rotary_dim, interleave, storage,
                                  x_row, out_row, x_row, out_row, inverse, af, False, False,
                                  freqs)
    aligned = _aligned(x_info, x_row) and (out_info is None or _aligned(out_info, out_row))
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
        out = _alloc(x, x_info)
        out_info = inspect_array(out, "out")
    out_span = span_elements(tokens, heads, head_dim, out_row)
    if key is not None and (pi is None or pi.on_device) and (
            key_has_strides or _keyed_safely(x_info, out_info)):
        call = _RowsCall()
        call.bound = bind(plan, ((x_span, item), (out_span, item), (tokens, 4))
                          + (((rows * rotary_dim, 4),) if rows else ()))
        call.x_span, call.out_span, call.pos_nbytes = x_span * item, out_span * item, 4 * tokens
        call.alloc = lambda a: _alloc(a, x_info)
        call.ptr_of = _ptr_of
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


def _keyed_safely(x_info: ArrayInfo, out_info: ArrayInfo) -> bool:
    """Whether the public fast path's key describes these arrays fully: PyTorch's key holds
    contiguity, not strides, so a strided tensor (another row stride, same shape) must
    re-validate."""
    return all(i.kind != "torch" or i.c_contiguous for i in (x_info, out_info))


def _ptr_of(a) -> int:
    return a.data_ptr() if hasattr(a, "data_ptr") else int(a.__cuda_array_interface__["data"][0])


class _RowsCall:
    """A validated ``rope`` call shape of the rope_rows path: the public fast path's entry."""

    __slots__ = ("bound", "x_span", "out_span", "pos_nbytes", "alloc", "ptr_of", "same_layout",
                 "arange", "current", "check")

    def run(self, x, xp, out, op, positions, pp, stream, cp=None):
        if out is None:
            out = self.alloc(x)
            op = self.ptr_of(out)
        elif op != xp:
            if xp < op + self.out_span and op < xp + self.x_span:
                fail("out partially overlaps x; pass out=x for in place, or a separate array")
        elif not self.same_layout:
            fail("out starts where x starts but has another layout; pass out=x for in place")
        if positions is None:
            pp = self.arange
        elif pp < op + self.out_span and op < pp + self.pos_nbytes:
            fail("out overlaps positions; the kernel would overwrite positions it still reads")
        elif self.check:
            host = np.asarray(cuda.as_cuda_array(positions).copy_to_host())
            check_position_values(host, self.bound.plan.position_limit,
                                  self.bound.plan.limit_reason)
        handle = self.current() if stream is None else streams.resolve(stream)
        self.bound.fire((xp, op, pp) if cp is None else (xp, op, pp, cp), handle)
        return out


def rope_with_cache(x, *, variant, positions, base, rotary_dim, interleave, inverse, scaling, out,
                    fastmath, threads_per_block, stream, check_positions, cos_sin_cache, options):
    """``ropelab.rope(..., cos_sin_cache=...)``: a fast path keyed on the cache too, else
    :func:`rope_rows_call`."""
    key = None
    mx, mc = _meta(x), _meta(cos_sin_cache)
    mo = _meta(out) if out is not None else (0, None)
    mp = _meta(positions) if positions is not None else (0, None)
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


def _alloc(x, info: ArrayInfo):
    """A contiguous device array of x's shape and dtype, from x's library."""
    if info.kind == "torch":
        import torch

        return torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device)
    if info.kind == "cupy":
        import cupy

        return cupy.empty(info.shape, dtype=info.dtype)
    return cuda.device_array(info.shape, info.dtype)


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
        host = _host_side(x, x_info)
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


__all__ = ["RopeInputError", "rope_qk", "rope_rows_call", "wants_rows"]
