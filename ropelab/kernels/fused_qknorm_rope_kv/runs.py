"""How a lane moves one *run* (contiguous elements of one head) between memory and its float32
registers, for each storage dtype: the device functions :func:`runs` builds.

A lane of the serving kernel holds ``n`` contiguous elements of a head (or two runs of ``n / 2``
for NeoX's split mapping).  Each run is moved with the widest access that keeps every lane
aligned: the largest power of two that divides the run's bytes, at most 16 bytes (one
``ld.global.v4.u32`` / ``LDG.E.128``).  Rows of qkv, of ``q_out`` and of the caches are
multiples of 64 elements, so a run's first byte is a multiple of its access size whenever the
array starts on a 16-byte boundary, which the op checks on device arrays.

16-bit storage (bfloat16 bits, float16) is handed to the kernel as a ``uint16`` array and moves
as 32-bit words through :mod:`ropelab.kernels.vec` (a 2-byte access is one element), decoded by
:mod:`ropelab.kernels.words16`.  float32 moves as ``float4`` when the run is a multiple of four
elements.  The FP8 cache is handed over as a ``uint16`` array too (two e4m3 bytes per element):
a run of ``n`` values becomes ``n`` bytes, written 2, 4, 8 or 16 at a time.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

from numba import cuda, float32, uint16, uint32, uint64

from ... import fp8
from ..vec import (load_f32x4, load_u32, load_u32x2, load_u32x4, store_f32x4, store_u32,
                   store_u32x2, store_u32x4)
from ..words16 import CODECS

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def access_bytes(nbytes: int) -> int:
    """The widest aligned access for a run of ``nbytes``: a power of two dividing it, <= 16."""
    width = 16
    while nbytes % width:
        width //= 2
    return width


@cache
def runs(storage: str, n: int, gemma: bool = False) -> SimpleNamespace:
    """Device functions for runs of ``n`` elements of ``storage``:

    * ``load(src, first, vals, o, ss)``: ``vals[o : o + n]`` from element ``first`` of ``src``;
      returns ``ss`` plus their squares, added one after another in element order;
    * ``weigh(weight, first, vals, o)``: ``vals[o + i] *= weight[first + i]`` (``gemma``:
      ``* (1 + weight[first + i])``, the Gemma / Qwen3-Next norm);
    * ``store(dst, first, vals, o)``: ``vals[o : o + n]``, rounded to ``storage``, at ``first``;
    * ``copy(src, first, dst, dfirst)``: the run's bits, unchanged (V into a same-dtype cache);
    * ``rounded(vals, o)``: ``vals[o : o + n]`` rounded to ``storage`` and back (what a store
      and a load would give), in place;
    * ``store_fp8(dst16, first16, vals, o, inv_scale)``: ``e4m3(vals[o + i] * inv_scale)``,
      ``n`` bytes from byte ``2 * first16`` of a ``uint16`` view of the cache.
    """
    f32 = storage == "float32"
    width = 16 if f32 and n % 4 == 0 else (4 if f32 else access_bytes(2 * n))
    per = width // ITEMSIZE[storage]  # elements per access
    count = n // per
    copy_width = access_bytes(ITEMSIZE[storage] * n)  # bit copies: words for float32 too
    copy_per = copy_width // ITEMSIZE[storage]
    fp8_width = access_bytes(n)  # bytes per FP8 store
    low, high, pack = CODECS.get(storage, CODECS["bfloat16"])  # unused for float32
    GEMMA = bool(gemma)

    @cuda.jit(device=True, inline="always")
    def read16(src, i):
        # One access of ``width`` bytes as four words (the unused ones repeat: one tuple type).
        if width == 16:
            w0, w1, w2, w3 = load_u32x4(src, i)
        elif width == 8:
            w0, w1 = load_u32x2(src, i)
            w2, w3 = w0, w1
        elif width == 4:
            w0 = load_u32(src, i)
            w1, w2, w3 = w0, w0, w0
        else:
            w0 = uint32(src[i])
            w1, w2, w3 = w0, w0, w0
        return w0, w1, w2, w3

    @cuda.jit(device=True, inline="always")
    def element(words, m):
        return low(words[m // 2]) if m % 2 == 0 else high(words[m // 2])

    @cuda.jit(device=True, inline="always")
    def load(src, first, vals, o, ss):
        for k in range(count):
            i = uint32(first + uint32(k * per))
            if f32 and width == 16:
                a, b, c, d = load_f32x4(src, i)
                got = (a, b, c, d)
                for m in range(4):
                    vals[o + k * 4 + m] = got[m]
                    ss = ss + got[m] * got[m]
            elif f32:
                v = float32(src[i])
                vals[o + k] = v
                ss = ss + v * v
            else:
                words = read16(src, i)
                for m in range(per):
                    v = element(words, m)
                    vals[o + k * per + m] = v
                    ss = ss + v * v
        return ss

    @cuda.jit(device=True, inline="always")
    def weigh(weight, first, vals, o):
        for k in range(count):
            i = uint32(first + uint32(k * per))
            if f32 and width == 16:
                a, b, c, d = load_f32x4(weight, i)
                got = (a, b, c, d)
                for m in range(4):
                    w = float32(1.0) + got[m] if GEMMA else got[m]
                    vals[o + k * 4 + m] = vals[o + k * 4 + m] * w
            elif f32:
                w = float32(1.0) + weight[i] if GEMMA else float32(weight[i])
                vals[o + k] = vals[o + k] * w
            else:
                words = read16(weight, i)
                for m in range(per):
                    w = float32(1.0) + element(words, m) if GEMMA else element(words, m)
                    vals[o + k * per + m] = vals[o + k * per + m] * w

    @cuda.jit(device=True, inline="always")
    def store(dst, first, vals, o):
        for k in range(count):
            i = uint64(uint64(first) + uint64(k * per))  # a cache may need 64-bit indices
            v = o + k * per
            if f32 and width == 16:
                store_f32x4(dst, i, vals[v], vals[v + 1], vals[v + 2], vals[v + 3])
            elif f32:
                dst[i] = vals[v]
            elif width == 16:
                store_u32x4(dst, i, pack(vals[v], vals[v + 1]), pack(vals[v + 2], vals[v + 3]),
                            pack(vals[v + 4], vals[v + 5]), pack(vals[v + 6], vals[v + 7]))
            elif width == 8:
                store_u32x2(dst, i, pack(vals[v], vals[v + 1]), pack(vals[v + 2], vals[v + 3]))
            elif width == 4:
                store_u32(dst, i, pack(vals[v], vals[v + 1]))
            else:
                dst[i] = uint16(pack(vals[v], vals[v]) & uint32(0xFFFF))

    @cuda.jit(device=True, inline="always")
    def copy(src, first, dst, dfirst):
        for k in range(n // copy_per):
            i = uint32(first + uint32(k * copy_per))
            j = uint64(uint64(dfirst) + uint64(k * copy_per))
            if copy_width == 16:
                w0, w1, w2, w3 = load_u32x4(src, i)
                store_u32x4(dst, j, w0, w1, w2, w3)
            elif copy_width == 8:
                w0, w1 = load_u32x2(src, i)
                store_u32x2(dst, j, w0, w1)
            elif copy_width == 4:
                store_u32(dst, j, load_u32(src, i))
            else:
                dst[j] = src[i]

    @cuda.jit(device=True, inline="always")
    def rounded(vals, o):
        if not f32:
            for i in range(n):
                vals[o + i] = low(pack(vals[o + i], vals[o + i]))

    @cuda.jit(device=True, inline="always")
    def store_fp8(dst, first, vals, o, inv):
        for k in range(n // fp8_width):
            j = uint64(uint64(first) + uint64(k * (fp8_width // 2)))
            v = o + k * fp8_width
            if fp8_width == 16:
                store_u32x4(dst, j,
                            fp8.pack4(vals[v] * inv, vals[v + 1] * inv, vals[v + 2] * inv,
                                      vals[v + 3] * inv),
                            fp8.pack4(vals[v + 4] * inv, vals[v + 5] * inv, vals[v + 6] * inv,
                                      vals[v + 7] * inv),
                            fp8.pack4(vals[v + 8] * inv, vals[v + 9] * inv, vals[v + 10] * inv,
                                      vals[v + 11] * inv),
                            fp8.pack4(vals[v + 12] * inv, vals[v + 13] * inv,
                                      vals[v + 14] * inv, vals[v + 15] * inv))
            elif fp8_width == 8:
                store_u32x2(dst, j,
                            fp8.pack4(vals[v] * inv, vals[v + 1] * inv, vals[v + 2] * inv,
                                      vals[v + 3] * inv),
                            fp8.pack4(vals[v + 4] * inv, vals[v + 5] * inv, vals[v + 6] * inv,
                                      vals[v + 7] * inv))
            elif fp8_width == 4:
                store_u32(dst, j, fp8.pack4(vals[v] * inv, vals[v + 1] * inv,
                                            vals[v + 2] * inv, vals[v + 3] * inv))
            else:
                dst[j] = uint16(fp8.pack2(vals[v] * inv, vals[v + 1] * inv))

    return SimpleNamespace(load=load, weigh=weigh, store=store, copy=copy, rounded=rounded,
                           store_fp8=store_fp8, width=width, copy_width=copy_width,
                           fp8_width=fp8_width)
