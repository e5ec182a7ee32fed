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

import numpy as np
from numba import cuda, float32, uint64

from .plan import ROPE_ARRAYS, Plan, Variant, blocks_for
from ._device import rotate
from .vec import load_f32x4, store_f32x4

NAME = "pack4"
SUMMARY = "1-D grid, two adjacent pairs per thread, one 128-bit load/store (scalar fallback)"
FEATURES = frozenset()
THREADS = 256


# ex: begin rope_pack4
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
# ex: end rope_pack4


# ex: begin rope_pack4_scalar
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
# ex: end rope_pack4_scalar


KERNEL = rope_pack4


def launch_config(problem, threads_per_block=None):
    """(blocks, threads): one thread per two adjacent pairs (a quad of floats)."""
    threads = threads_per_block or THREADS
    quads_per_row = (problem.n_pairs + 1) // 2
    return blocks_for(problem.tokens * quads_per_row, threads), threads


def plan_kernel(problem, kernel, *, fastmath=True, threads=None) -> Plan:
    blocks, threads = launch_config(problem, threads)
    quads_per_row = (problem.n_pairs + 1) // 2
    return Plan(kernel, fastmath, blocks, threads, ROPE_ARRAYS,
                scalars=(np.uint64(problem.n_pairs), np.uint64(quads_per_row),
                         np.int64(problem.tokens * quads_per_row), np.float32(problem.base)))


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """float4 access when it is legal: whole quads per row and 16-byte aligned arrays."""
    vector = aligned and problem.row % 4 == 0
    return plan_kernel(problem, rope_pack4 if vector else rope_pack4_scalar, fastmath=fastmath,
                       threads=threads)


VARIANT = Variant(NAME, SUMMARY, FEATURES, plan, KERNEL)
