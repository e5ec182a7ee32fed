"""Variant 3, ``pack4``: two adjacent pairs (four floats) per thread, with 128-bit accesses.

The seed's ``rope_f32x4_pack_kernel`` reads and writes one ``float4`` per thread.  Numba has no
float4 load of its own, so ``rope_pack4`` uses the two intrinsics of :mod:`.vec`, which compile
to ``ld.global.v4.f32`` / ``st.global.v4.f32`` — the same instructions nvcc emits for the seed.

A 128-bit access needs a 16-byte aligned address, so the vector kernel runs only when ``hidden``
(the row) is a multiple of 4 and both arrays start on a 16-byte boundary.  Otherwise the launcher
falls back to ``rope_pack4_scalar``: the same work split with four scalar loads, and a tail path
for rows with an odd number of pairs (the last thread of such a row rotates one pair).  The
``pack4_scalar`` variant forces that kernel, so the two can be timed against each other.

Either way the two pairs have different frequencies, so a thread still computes two ``pow``
and two sin/cos: packing saves index math and load instructions, not transcendentals.
"""

import math

from numba import cuda, float32, uint64

from ..arrays import data_address
from ._jit import blocks_for, jitted
from .rotate import rotate
from .vec import load_f32x4, store_f32x4

NAME = "pack4"
SUMMARY = "1-D grid, two adjacent pairs per thread, one 128-bit load/store (scalar fallback)"
FEATURES = frozenset()
THREADS = 256


def rope_pack4(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)  # unsigned: C-style // and no negative-index wrap-around (see flat.py)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)  # first of this thread's two pairs
        i = uint64(4) * q  # rows hold a whole number of quads here, so quad q starts at 4q
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
        v0, v1, v2, v3 = load_f32x4(x, i)
        r0, r1 = rotate(v0, v1, math.cos(a0), math.sin(a0))
        r2, r3 = rotate(v2, v3, math.cos(a1), math.sin(a1))
        store_f32x4(out, i, r0, r1, r2, r3)


def rope_pack4_scalar(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        j = i + uint64(2)
        two = pair + uint64(1) < n_pairs  # false only for the last thread of a row with odd n_pairs
        # Every load before the first store.  x and out may be one buffer (in place), so the
        # compiler keeps a load written after a store after it: with the second pair loaded
        # after the first pair's stores, each thread had one 8-byte pair in flight, not two
        # (ropelab.measure.controls keeps that ordering as pack4_scalar_unhoisted).
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[j]
            x3 = x[j + uint64(1)]
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        angle = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        out[i], out[i + uint64(1)] = rotate(x0, x1, math.cos(angle), math.sin(angle))
        if two:
            angle = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            out[j], out[j + uint64(1)] = rotate(x2, x3, math.cos(angle), math.sin(angle))


KERNEL = rope_pack4
PTX_SIGNATURE = "void(float32[::1], float32[::1], int32[::1], uint64, uint64, int64, float32)"


def can_vectorize(problem, x, out) -> bool:
    """float4 access is legal: whole quads per row and 16-byte aligned x and out."""
    return problem.row % 4 == 0 and data_address(x) % 16 == 0 and data_address(out) % 16 == 0


def launch_config(problem, threads_per_block=None):
    threads = threads_per_block or THREADS
    quads_per_row = (problem.n_pairs + 1) // 2
    return blocks_for(problem.tokens * quads_per_row, threads), threads


def launch(problem, x, out, positions, *, fastmath=True, threads_per_block=None, stream=0,
           vector=None):
    blocks, threads = launch_config(problem, threads_per_block)
    quads_per_row = (problem.n_pairs + 1) // 2
    if vector is None:
        vector = can_vectorize(problem, x, out)
    kernel = rope_pack4 if vector else rope_pack4_scalar
    jitted(kernel, fastmath)[blocks, threads, stream](
        x, out, positions, uint64(problem.n_pairs), uint64(quads_per_row),
        problem.tokens * quads_per_row,
        float32(problem.base),
    )
