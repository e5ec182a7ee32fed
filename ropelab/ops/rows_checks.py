"""Checks of the rope_rows path (``ropelab.rope_qk`` and 16-bit / strided / cached
``ropelab.rope``): what an array is as rows of heads, the cos/sin cache, the frequencies and the
kernel options.  Plain functions of :class:`~ropelab.ops.arrays.ArrayInfo` and scalars;
nothing here touches data or launches.
"""

from __future__ import annotations

import numpy as np

from .. import scaling as _scaling
from ..kernels.plan import MAX_ELEMENTS
from ..validate import check_base, check_bool, check_int, fail
from .arrays import ArrayInfo

# The ``variant=`` values of ``ropelab.rope`` that may run on rope_rows (None: the default).
# The other variants are float32 and contiguous only: they refuse 16-bit or strided x rather
# than quietly running another kernel.
ROWS_VARIANTS = (None, "freq_table", "rope_rows")


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
        if tokens and width > 1 and info.strides[1] != item:  # an empty array has any strides
            fail(f"{name}'s last dimension must be contiguous (stride {item} bytes), got "
                 f"{info.strides[1]}; pass a contiguous copy")
    elif len(info.shape) == 3:
        tokens, heads, hd = info.shape
        if head_dim is not None and hd != head_dim:
            fail(f"{name} has head_dim {hd}, expected {head_dim}")
        head_dim = hd
        width = heads * head_dim
        if tokens and head_dim > 1 and info.strides[2] != item:
            fail(f"{name}'s last dimension must be contiguous (stride {item} bytes), got "
                 f"{info.strides[2]}")
        if tokens and heads > 1 and info.strides[1] != head_dim * item:
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
    if span > MAX_ELEMENTS:
        fail(f"{name} spans {span} elements; the kernel's 32-bit indexing allows "
             f"{MAX_ELEMENTS}")
    return tokens, heads, head_dim, row


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
    if info.size > MAX_ELEMENTS:  # the kernels index it with 32-bit arithmetic
        fail(f"cos_sin_cache has {info.size} entries; at most {MAX_ELEMENTS} fit the "
             f"kernels' 32-bit indexing")
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
        options.update(cache=True,
                       max_positions=check_int("max_positions", max_positions, minimum=1))
    if cos_sin_cache_rows is not None:
        options["user_cache_rows"] = cos_sin_cache_rows
    return options


def rows_aligned(info: ArrayInfo, row: int) -> bool:
    """Vector accesses are legal: the rows start on 16-byte boundaries (host arrays are copied
    to fresh, aligned device buffers, so only their row stride counts)."""
    start = info.ptr % 16 == 0 or not info.on_device
    return start and (row * info.dtype.itemsize) % 16 == 0
