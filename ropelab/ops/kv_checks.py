"""Checks of the serving op (``ropelab.fused_qknorm_rope_kv``): the paged caches, the slots,
the FP8 scales and ``q_out``.  Plain functions of :class:`~ropelab.ops.arrays.ArrayInfo`,
scalars and small host arrays; nothing here launches.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..problem import FusedProblem
from ..validate import FLOAT32_MAX, fail
from .arrays import ArrayInfo

FP8_NAME = "float8_e4m3fn"
ALIGN = 16  # every device array of the kernel starts on a 16-byte boundary (vector accesses)
INT64_MAX = int(np.iinfo(np.int64).max)


def same_storage(info: ArrayInfo, like: ArrayInfo) -> bool:
    """The same element type: dtype, and for torch tensors the storage tag (bfloat16 vs uint16
    bits both look like uint16)."""
    return info.dtype == like.dtype and (info.storage or None) == (like.storage or None)


def is_fp8(info: ArrayInfo) -> bool:
    """An FP8 e4m3 cache: ``uint8`` bits, or a ``torch.float8_e4m3fn`` tensor."""
    return info.dtype == np.uint8 and info.storage in (None, FP8_NAME)


def check_caches(k: ArrayInfo, v: ArrayInfo, qkv: ArrayInfo, problem: FusedProblem) -> tuple:
    """``(capacity in slots, fp8)`` of valid ``k_cache`` / ``v_cache``, or raise."""
    d = problem.head_dim
    for name, info, heads in (("k_cache", k, problem.heads_k), ("v_cache", v, problem.heads_v)):
        if len(info.shape) != 4 or info.shape[2:] != (heads, d):
            fail(f"{name} must be [num_blocks, block_size, {heads}, {d}] (vLLM's flash layout: "
                 f"num_heads_{name[0]} heads of head_dim {d}), got shape {info.shape}")
        if info.shape[0] * info.shape[1] == 0:  # (NumPy's empty arrays: zero strides)
            fail("the caches hold no slot (num_blocks * block_size is 0)")
        if not info.c_contiguous:
            fail(f"{name} must be C-contiguous (one row of heads per slot)")
        if not (same_storage(info, qkv) or is_fp8(info)):
            fail(f"{name} must have qkv's dtype ({qkv.storage or qkv.dtype}) or hold FP8 e4m3 "
                 f"(uint8 bits, or torch.float8_e4m3fn); got {info.storage or info.dtype}")
        if info.on_device != qkv.on_device:
            fail(f"{name} must live where qkv does (both NumPy, or both on the device)")
        if info.on_device and info.ptr % ALIGN:
            fail(f"{name} must start on a {ALIGN}-byte boundary (the kernel's vector stores)")
    if k.shape[:2] != v.shape[:2]:
        fail(f"k_cache and v_cache must have the same [num_blocks, block_size], got "
             f"{k.shape[:2]} and {v.shape[:2]}")
    if is_fp8(k) != is_fp8(v):
        fail("k_cache and v_cache must both be FP8 or both have qkv's dtype")
    return k.shape[0] * k.shape[1], is_fp8(k)


def check_scale(name: str, value, fp8: bool) -> float:
    """A per-tensor FP8 scale: positive, finite, and with a finite nonzero float32 reciprocal
    (the kernel multiplies by ``float32(1 / scale)``).  None means 1.0 for an FP8 cache; a
    scale beside a cache of qkv's dtype is refused (it would be ignored)."""
    if value is None:
        return 1.0
    if not fp8:
        fail(f"{name} scales an FP8 cache; these caches have qkv's dtype (pass {name}=None)")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number (a per-tensor scale), got "
                        f"{type(value).__name__} {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        fail(f"{name} must be positive and finite, got {value}")
    inv = 1.0 / value
    if not (value <= FLOAT32_MAX and inv <= FLOAT32_MAX and np.float32(inv) > 0
            and np.float32(value) > 0):
        fail(f"{name} = {value:g} has no finite, nonzero float32 reciprocal")
    return value


def check_q_out(info: ArrayInfo, qkv: ArrayInfo, problem: FusedProblem) -> None:
    hq, d = problem.heads_q, problem.head_dim
    if info.shape not in ((problem.tokens, hq * d), (problem.tokens, hq, d)):
        fail(f"q_out must be [tokens, num_heads_q * head_dim] = [{problem.tokens}, {hq * d}] "
             f"(or [tokens, heads, head_dim]), got shape {info.shape}")
    if not same_storage(info, qkv):
        fail(f"q_out must have qkv's dtype ({qkv.storage or qkv.dtype}), got "
             f"{info.storage or info.dtype}")
    if info.nbytes and not info.c_contiguous:
        fail("q_out must be C-contiguous")
    if info.on_device != qkv.on_device:
        fail("q_out must live where qkv does (both NumPy, or both on the device)")


def check_aligned(infos: dict) -> None:
    """Device arrays the kernel moves with vector accesses start on 16-byte boundaries."""
    for name, info in infos.items():
        if info is not None and info.on_device and info.nbytes and info.ptr % ALIGN:
            fail(f"{name} must start on a {ALIGN}-byte boundary for the serving kernel's vector "
                 f"accesses (a fresh tensor does; an offset slice may not)")


def check_slot_array(info: ArrayInfo, tokens: int) -> None:
    """Shape and dtype of ``slot_mapping``: one integer per token; device slots int32 or
    int64 (vLLM's) and contiguous."""
    if info.shape != (tokens,):
        fail(f"slot_mapping must have shape ({tokens},) (one slot per token), got {info.shape}")
    if info.dtype.kind not in "iu":
        fail(f"slot_mapping must be integers, got {info.dtype}")
    if info.on_device and info.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        fail(f"device slot_mapping must be int32 or int64, got {info.dtype}")
    if info.on_device and tokens and not info.c_contiguous:
        fail("device slot_mapping must be contiguous")


def check_slot_values(values: np.ndarray, capacity: int) -> np.ndarray:
    """Host slots, checked (every slot below ``capacity``; a slot written by one token only;
    negative ones skip their token) and returned as contiguous int64 for the kernel."""
    values = np.asarray(values)
    if values.size:
        if values.dtype == np.uint64 and int(values.max()) > INT64_MAX:
            fail(f"slot {int(values.max())} does not fit int64")
        hi = int(values.max())
        if hi >= capacity:
            fail(f"slot {hi} is past the cache: k_cache and v_cache hold {capacity} slots "
                 f"(num_blocks * block_size); a negative slot skips its token")
        used = values[values >= 0]
        uniq, counts = np.unique(used, return_counts=True)
        if (counts > 1).any():
            dup = int(uniq[counts > 1][0])
            tokens = np.nonzero(values == dup)[0][:4].tolist()
            fail(f"slot {dup} is given to more than one token (tokens {tokens}): two writes "
                 f"to one slot in one call leave it undefined")
    return np.ascontiguousarray(values, dtype=np.int64)
