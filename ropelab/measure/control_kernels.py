"""The controlled kernels: each differs from a ropelab kernel in one respect, so the time (or
the profile) of the pair says what that one respect costs (:mod:`ropelab.measure.controls` says
which respect, and launches them).

Each is a near copy of its reference on purpose: the one changed line is the experiment, and
everything else must stay as it is in the reference so that nothing else differs.
"""

import math

from numba import cuda, float32, uint64

from ..kernels._device import rotate
from ..kernels.vec import load_f32x4, store_f32x4



def rope_block2d_loads_first(x, out, positions, n_pairs, base):
    """block2d with each pair's loads written before its pow/sin/cos (flat's source order)."""
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        out[i], out[i + uint64(1)] = rotate(x0, x1, math.cos(angle), math.sin(angle))
        pair += uint64(cuda.blockDim.x)


def rope_block2d_pos_in_loop(x, out, positions, n_pairs, base):
    """block2d with the position read inside the loop, after the pair's loads.

    In ``block2d`` the position is read before the loop and converted to float32 there, so the
    pair's loads, inside the loop, can only be issued once the position has arrived: two memory
    latencies in a row per thread.  Here all three loads sit in one block of code.  (The loop
    also stores to ``out``, which may alias ``positions`` as far as the compiler knows, so it
    cannot hoist the read out of the loop again.)
    """
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        pos = float32(positions[token])
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        out[i], out[i + uint64(1)] = rotate(x0, x1, math.cos(angle), math.sin(angle))
        pair += uint64(cuda.blockDim.x)


def rope_block2d_no_loop(x, out, positions, n_pairs, base):
    """block2d without the stride loop: grid y covers the pairs past one block's threads."""
    token = cuda.blockIdx.x
    pair = uint64(cuda.blockIdx.y) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    if pair < n_pairs:
        i = uint64(token) * (n_pairs + n_pairs) + pair + pair
        pos = float32(positions[token])
        exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        out[i], out[i + uint64(1)] = rotate(x[i], x[i + uint64(1)], math.cos(angle), math.sin(angle))


def rope_flat_block2d_exponent(x, out, positions, n_pairs, total_pairs, base):
    """flat with block2d's exponent: ``pair * (2 / hidden)`` instead of ``2 * pair / hidden``."""
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = float32(positions[token]) * inv_freq
        out[e], out[e + uint64(1)] = rotate(x0, x1, math.cos(angle), math.sin(angle))


def rope_flat_serial_pos(x, out, positions, n_pairs, total_pairs, base, zero):
    """flat whose pair loads wait for the position, as block2d's do (``zero`` is 0 at run time).

    The pair's address gets ``position * zero`` added: always 0, but the compiler cannot know
    that, so the two loads cannot be issued before the position has arrived.
    """
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        p = positions[token]
        e = i + i + uint64(p) * zero
        x0 = x[e]
        x1 = x[e + uint64(1)]
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(p) * inv_freq
        out[e], out[e + uint64(1)] = rotate(x0, x1, math.cos(angle), math.sin(angle))


def rope_pack4_scalar_unhoisted(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    """ropelab's pack4_scalar before its loads were hoisted: pair 2 is loaded after pair 1 is stored."""
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        angle = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        out[i], out[i + uint64(1)] = rotate(x[i], x[i + uint64(1)], math.cos(angle), math.sin(angle))
        if pair + uint64(1) < n_pairs:
            angle = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            j = i + uint64(2)
            out[j], out[j + uint64(1)] = rotate(x[j], x[j + uint64(1)], math.cos(angle), math.sin(angle))


def copy_f32x4(x, out, total_quads):
    """The roof: one 128-bit load and one 128-bit store per thread, nothing else."""
    idx = cuda.grid(1)
    if idx < total_quads:
        i = uint64(4) * uint64(idx)
        a, b, c, d = load_f32x4(x, i)
        store_f32x4(out, i, a, b, c, d)
