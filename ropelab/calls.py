"""The cache of validated calls behind the public functions, and the default-positions buffer.

A public call on device arrays is validated once per *call shape*: the array types, shapes,
strides, dtypes and devices, and every other argument with its type (so ``rotary_dim=4.0``
never reuses the entry of ``rotary_dim=4``).  The result, a :class:`ropelab.kernels._launch.Bound`
plus what a call needs besides pointers, is stored under that key.  A later call with the same
shape only reads the arrays' pointers, checks that they do not overlap, and launches: no
validation, no ``__cuda_array_interface__``, no allocation, no synchronization.

Pointers are not part of the key: a new tensor of the same shape hits the same entry.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import cuda

MAX_ENTRIES = 1024  # a program cycling through more call shapes than this re-validates

_entries: dict = {}
_lock = threading.Lock()


def lookup(key):
    try:
        return _entries.get(key)
    except TypeError:  # an unhashable argument (a dict ``scaling``, say): always validate
        return None


def remember(key, entry) -> None:
    try:
        hash(key)
    except TypeError:
        return
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[key] = entry


def clear() -> None:
    """Forget every validated call (tests use it to force the validating path)."""
    with _lock:
        _entries.clear()


def typed(values: tuple) -> tuple:
    """``values`` with their types, for cache keys: ``4.0 == 4`` and ``True == 1`` in Python,
    but they are different calls here (one of them is refused)."""
    return values + tuple(map(type, values))


_arange = []


def arange_positions(tokens: int):
    """Device int32 ``0 .. tokens-1`` for ``positions=None``, uploaded once and grown on demand
    (a slice of one buffer: the first ``tokens`` entries of a longer arange are the same).

    Outgrown buffers are kept, never freed: a cached call or a captured CUDA graph may still
    hold their address.
    """
    if not _arange or _arange[-1].shape[0] < tokens:
        with _lock:
            if not _arange or _arange[-1].shape[0] < tokens:
                size = max(tokens, 4096, 2 * (_arange[-1].shape[0] if _arange else 0))
                _arange.append(cuda.to_device(np.arange(size, dtype=np.int32)))
    return _arange[-1][:tokens]
