"""Variant 3, ``pack4``: two adjacent pairs (four floats) per thread, with 128-bit accesses.

The seed's ``rope_f32x4_pack_kernel`` reads and writes one ``float4`` per thread.  Numba has no
float4 load of its own, so ``rope_pack4`` uses the two intrinsics of :mod:`.vec`, which compile
to ``ld.global.v4.f32`` / ``st.global.v4.f32`` — the same instructions nvcc emits for the seed.

A 128-bit access needs a 16-byte aligned address, so the vector kernel runs only when ``hidden``
(the row) is a multiple of 4 and both arrays start on a 16-byte boundary.  Otherwise the launcher
falls back to ``rope_pack4_scalar``: the same work split with four scalar loads, and a tail path
for rows with an odd number of pairs (the last thread of such a row rotates one pair).  The
``pack4_scalar`` variant forces that kernel, so the two can be timed against each other.

float16 and bfloat16 storage (bfloat16 as uint16 bits): a quad is 8 bytes, moved with one
64-bit access (``ld.global.v2.u32``) and unpacked to float32 by :mod:`.words16`; the math is the
float32 kernel's and the stores round to nearest even.  Each storage is its own build.

Either way the two pairs have different frequencies, so a thread still computes two ``pow``
and two sin/cos: packing saves index math and load instructions, not transcendentals.
"""

import math
from functools import cache

import numpy as np
from numba import cuda, float32, uint64

from .plan import Plan, Variant, blocks_for, rope_arrays
from ._device import rotate
from .vec import load_f32x4, load_u32x2, store_f32x4, store_u32x2
from .words16 import CODECS, ELEMENT_CODECS

NAME = "pack4"
SUMMARY = "1-D grid, two adjacent pairs per thread, one 128-bit load/store (scalar fallback)"
FEATURES = frozenset()
THREADS = 256
STORAGES = frozenset({"float32", "float16", "bfloat16"})  # x and out; the math is float32


# Four elements as float32, one access each way: the float32 build moves 128 bits (float4),
# a 16-bit build 64 bits (two uint32 words, unpacked to float32 and rounded back on the store).
def quad_access(storage: str):
    """``(load4(array, i) -> 4 float32, store4(array, i, a, b, c, d))`` for one storage."""
    if storage == "float32":
        return load_f32x4, store_f32x4
    low, high, pack = CODECS[storage]

    @cuda.jit(device=True, inline="always")
    def load4(array, i):
        w0, w1 = load_u32x2(array, i)  # element i in w0's low half (little-endian)
        return low(w0), high(w0), low(w1), high(w1)

    @cuda.jit(device=True, inline="always")
    def store4(array, i, a, b, c, d):
        store_u32x2(array, i, pack(a, b), pack(c, d))

    return load4, store4


def _named(kernel, base: str, storage: str):
    """The float32 build keeps the course's name; a 16-bit build gets its own census row."""
    kernel.__name__ = kernel.__qualname__ = base if storage == "float32" else f"{base}_{storage}"
    return kernel


@cache
def make_vector_kernel(storage: str):
    """The wide-access kernel for ``storage`` (float32, float16 or bfloat16 bits)."""
    load4, store4 = quad_access(storage)

    # ex: begin rope_pack4
    def rope_pack4(x, out, positions, n_pairs, quads_per_row, total_quads, base):
        idx = cuda.grid(1)
        if idx < total_quads:
            q = uint64(idx)  # unsigned: C-style // and no negative-index wrap-around (flat.py)
            token = q // quads_per_row
            pair = uint64(2) * (q - token * quads_per_row)  # first of this thread's two pairs
            i = uint64(4) * q  # rows hold a whole number of quads here, so quad q starts at 4q
            pos = float32(positions[token])
            inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
            a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            v0, v1, v2, v3 = load4(x, i)  # one 128-bit (float32) or 64-bit (16-bit) load
            r0, r1 = rotate(v0, v1, math.cos(a0), math.sin(a0))
            r2, r3 = rotate(v2, v3, math.cos(a1), math.sin(a1))
            store4(out, i, r0, r1, r2, r3)
    # ex: end rope_pack4

    return _named(rope_pack4, "rope_pack4", storage)


@cache
def make_scalar_kernel(storage: str):
    """The fallback with one access per element, for ``storage``."""
    load, store = ELEMENT_CODECS[storage]

    # ex: begin rope_pack4_scalar
    def rope_pack4_scalar(x, out, positions, n_pairs, quads_per_row, total_quads, base):
        idx = cuda.grid(1)
        if idx < total_quads:
            q = uint64(idx)
            token = q // quads_per_row
            pair = uint64(2) * (q - token * quads_per_row)
            i = uint64(2) * (token * n_pairs + pair)
            j = i + uint64(2)
            two = pair + uint64(1) < n_pairs  # false only for a row's last thread, odd n_pairs
            # Every load before the first store.  x and out may be one buffer (in place), so the
            # compiler keeps a load written after a store after it: with the second pair loaded
            # after the first pair's stores, each thread had one 8-byte pair in flight, not two
            # (ropelab.measure.controls keeps that ordering as pack4_scalar_unhoisted).
            x0 = load(x[i])
            x1 = load(x[i + uint64(1)])
            x2 = float32(0.0)
            x3 = float32(0.0)
            if two:
                x2 = load(x[j])
                x3 = load(x[j + uint64(1)])
            pos = float32(positions[token])
            inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
            angle = pos / math.pow(base, float32(pair + pair) * inv_hidden)
            r0, r1 = rotate(x0, x1, math.cos(angle), math.sin(angle))
            out[i] = store(r0)  # rounds to the storage (a no-op for float32)
            out[i + uint64(1)] = store(r1)
            if two:
                angle = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
                r2, r3 = rotate(x2, x3, math.cos(angle), math.sin(angle))
                out[j] = store(r2)
                out[j + uint64(1)] = store(r3)
    # ex: end rope_pack4_scalar

    return _named(rope_pack4_scalar, "rope_pack4_scalar", storage)


rope_pack4 = make_vector_kernel("float32")
rope_pack4_scalar = make_scalar_kernel("float32")


KERNEL = rope_pack4


def launch_config(problem, threads_per_block=None):
    """(blocks, threads): one thread per two adjacent pairs (a quad of floats)."""
    threads = threads_per_block or THREADS
    quads_per_row = (problem.n_pairs + 1) // 2
    return blocks_for(problem.tokens * quads_per_row, threads), threads


def plan_kernel(problem, kernel, *, fastmath=True, threads=None) -> Plan:
    blocks, threads = launch_config(problem, threads)
    quads_per_row = (problem.n_pairs + 1) // 2
    return Plan(kernel, fastmath, blocks, threads, rope_arrays(problem.storage),
                scalars=(np.uint64(problem.n_pairs), np.uint64(quads_per_row),
                         np.int64(problem.tokens * quads_per_row), np.float32(problem.base)))


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """Wide access when it is legal: whole quads per row and 16-byte aligned arrays (a 16-bit
    quad needs only 8, but one rule for both keeps the call engine's alignment key enough)."""
    vector = aligned and problem.row % 4 == 0
    make = make_vector_kernel if vector else make_scalar_kernel
    return plan_kernel(problem, make(problem.storage), fastmath=fastmath, threads=threads)


VARIANT = Variant(NAME, SUMMARY, FEATURES, plan, KERNEL, storages=STORAGES)
