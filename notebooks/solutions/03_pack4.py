"""Notebook 03's ladder: a solution for every step, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step_id]`` (it must pass) and every
function of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment
next to it).  The steps: 03.1 two pairs per thread, one block per token; 03.2 a flat grid of
quads over rows of an odd number of pairs; 03.3 its launch; 03.4 pack4_scalar with its loads
first (the notebook's starter, whose loads come after a store, is checked too).
"""

import math

import numpy as np
import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, int64, uint64


# --- 03.1: two neighbouring pairs per thread, one block per token ----------------------------


@cuda.jit(fastmath=True)
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = 2 * cuda.threadIdx.x  # this thread's first pair; its second is pair + 1
    if pair < n_pairs:  # n_pairs is even: a thread with a first pair has a second one
        i = 2 * (token * n_pairs + pair)  # four floats: i .. i + 3
        x0 = x[i]  # every load before the first store
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        a1 = pos * inv_freq[pair + 1]
        c0, s0 = math.cos(a0), math.sin(a0)
        c1, s1 = math.cos(a1), math.sin(a1)
        out[i] = x0 * c0 - x1 * s0
        out[i + 1] = x0 * s0 + x1 * c0
        out[i + 2] = x2 * c1 - x3 * s1
        out[i + 3] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def two_pairs_one_angle(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = 2 * cuda.threadIdx.x
    if pair < n_pairs:
        i = 2 * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        a = float32(positions[token]) * inv_freq[pair]  # the second pair has an angle of its own
        c, s = math.cos(a), math.sin(a)
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c
        out[i + 2] = x2 * c - x3 * s
        out[i + 3] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def two_pairs_row_start(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = 2 * cuda.threadIdx.x
    if pair < n_pairs:
        i = token * n_pairs + 2 * pair  # the row starts at 2 * token * n_pairs floats, not pairs
        x0 = x[i]
        x1 = x[i + 1]
        x2 = x[i + 2]
        x3 = x[i + 3]
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        a1 = pos * inv_freq[pair + 1]
        c0, s0 = math.cos(a0), math.sin(a0)
        c1, s1 = math.cos(a1), math.sin(a1)
        out[i] = x0 * c0 - x1 * s0
        out[i + 1] = x0 * s0 + x1 * c0
        out[i + 2] = x2 * c1 - x3 * s1
        out[i + 3] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def two_pairs_unguarded(x, out, positions, inv_freq, n_pairs):
    token = cuda.blockIdx.x
    pair = 2 * cuda.threadIdx.x  # no guard: the warp's last threads have no pairs
    i = 2 * (token * n_pairs + pair)
    x0 = x[i]
    x1 = x[i + 1]
    x2 = x[i + 2]
    x3 = x[i + 3]
    pos = float32(positions[token])
    a0 = pos * inv_freq[pair]
    a1 = pos * inv_freq[pair + 1]
    c0, s0 = math.cos(a0), math.sin(a0)
    c1, s1 = math.cos(a1), math.sin(a1)
    out[i] = x0 * c0 - x1 * s0
    out[i + 1] = x0 * s0 + x1 * c0
    out[i + 2] = x2 * c1 - x3 * s1
    out[i + 3] = x2 * s1 + x3 * c1


# --- 03.2: a flat grid of quads, rows of an odd number of pairs ------------------------------


@cuda.jit(fastmath=True)
def rope_quads(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row  # quads restart at every row
        pair = uint64(2) * (q - token * quads_per_row)  # first pair of the quad, in the row
        i = uint64(2) * (token * n_pairs + pair)
        two = pair + uint64(1) < n_pairs  # false for the odd last pair of a row
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        c0, s0 = math.cos(a0), math.sin(a0)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0
        if two:
            a1 = pos * inv_freq[pair + uint64(1)]
            c1, s1 = math.cos(a1), math.sin(a1)
            out[i + uint64(2)] = x2 * c1 - x3 * s1
            out[i + uint64(3)] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def quads_no_tail(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[i + uint64(2)]  # the odd last pair of a row has no partner: this is the next row
        x3 = x[i + uint64(3)]
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        a1 = pos * inv_freq[pair + uint64(1)]
        c0, s0 = math.cos(a0), math.sin(a0)
        c1, s1 = math.cos(a1), math.sin(a1)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0
        out[i + uint64(2)] = x2 * c1 - x3 * s1
        out[i + uint64(3)] = x2 * s1 + x3 * c1


@cuda.jit(fastmath=True)
def quads_across_rows(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        first = uint64(2) * uint64(idx)  # pairs 2q and 2q + 1 of the batch: quads span rows
        for k in range(2):
            p = first + uint64(k)
            if p < uint64(positions.size) * n_pairs:
                token = p // n_pairs
                pair = p - token * n_pairs
                a = float32(positions[token]) * inv_freq[pair]
                c, s = math.cos(a), math.sin(a)
                x0 = x[p + p]
                x1 = x[p + p + uint64(1)]
                out[p + p] = x0 * c - x1 * s
                out[p + p + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def quads_modulo(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q % quads_per_row)  # a second division, by another name
        i = uint64(2) * (token * n_pairs + pair)
        two = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[i + uint64(2)]
            x3 = x[i + uint64(3)]
        pos = float32(positions[token])
        a0 = pos * inv_freq[pair]
        c0, s0 = math.cos(a0), math.sin(a0)
        out[i] = x0 * c0 - x1 * s0
        out[i + uint64(1)] = x0 * s0 + x1 * c0
        if two:
            a1 = pos * inv_freq[pair + uint64(1)]
            c1, s1 = math.cos(a1), math.sin(a1)
            out[i + uint64(2)] = x2 * c1 - x3 * s1
            out[i + uint64(3)] = x2 * s1 + x3 * c1


# --- 03.3: the launch, quad counts on the host -----------------------------------------------


def launch_quads(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + np.uint64(1)) // np.uint64(2)  # an odd row ends on a lone pair
    total_quads = np.int64(positions.size * int(quads_per_row))
    threads = 128
    blocks = (int(total_quads) + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), quads_per_row,
                                total_quads)


def launch_quads_rounded_down(x, out, positions, inv_freq, n_pairs):
    quads_per_row = n_pairs // np.uint64(2)  # rounded down: the odd last pair has no quad
    total_quads = np.int64(positions.size * int(quads_per_row))
    threads = 128
    blocks = max((int(total_quads) + threads - 1) // threads, 1)
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), quads_per_row,
                                total_quads)


def launch_quads_per_pair(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + np.uint64(1)) // np.uint64(2)
    total_quads = np.int64(positions.size * int(quads_per_row))
    threads = 128
    blocks = (positions.size * int(n_pairs) + threads - 1) // threads  # a thread per pair
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), quads_per_row,
                                total_quads)


def launch_quads_one_row(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + np.uint64(1)) // np.uint64(2)
    total_quads = np.int64(quads_per_row)  # the quads of one row, not of the batch
    threads = 128
    blocks = (int(total_quads) + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), quads_per_row,
                                total_quads)


# --- 03.4: pack4_scalar, loads first -------------------------------------------------------


@cuda.jit(fastmath=True)
def my_rope_pack4_scalar(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        j = i + uint64(2)
        two = pair + uint64(1) < n_pairs  # false only at the end of a row with odd n_pairs
        # Every load first: four floats in flight before any store can make them wait.
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[j]
            x3 = x[j + uint64(1)]
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if two:
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def loads_first_signed_token(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = uint64(idx // int64(quads_per_row))  # a signed division, refused from 03.2 on
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        j = i + uint64(2)
        two = pair + uint64(1) < n_pairs  # false only at the end of a row with odd n_pairs
        # Every load first: four floats in flight before any store can make them wait.
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[j]
            x3 = x[j + uint64(1)]
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if two:
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c




@cuda.jit(fastmath=True)
def no_tail_check(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        j = i + uint64(2)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = x[j]  # the second pair, even when the row has none left
        x3 = x[j + uint64(1)]
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        c = math.cos(a1)
        s = math.sin(a1)
        out[j] = x2 * c - x3 * s
        out[j + uint64(1)] = x2 * s + x3 * c


@cuda.jit(fastmath=True)
def second_pair_sign(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        j = i + uint64(2)
        two = pair + uint64(1) < n_pairs
        x0 = x[i]
        x1 = x[i + uint64(1)]
        x2 = float32(0.0)
        x3 = float32(0.0)
        if two:
            x2 = x[j]
            x3 = x[j + uint64(1)]
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if two:
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c + x3 * s  # a plus where the rotation has a minus
            out[j + uint64(1)] = x3 * c - x2 * s


def launch_quads_per_row_as_int(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + 1) // 2  # a Python int: the kernel would be built for int64
    total_quads = positions.size * quads_per_row
    threads = 128
    blocks = (total_quads + threads - 1) // threads
    rope_quads[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs), quads_per_row,
                                total_quads)


SOLUTIONS = {
    "03.1": rope_two_pairs,
    "03.2": rope_quads,
    "03.3": launch_quads,
    "03.4": my_rope_pack4_scalar,
}

WRONG = {
    "03.1": [
        (two_pairs_one_angle, "frequency of the previous pair"),
        (two_pairs_row_start, "row + 4t"),
        (two_pairs_unguarded, "out of bounds"),
    ],
    "03.2": [
        (quads_no_tail, "out of bounds"),
        (quads_across_rows, "which is thread"),
        (quads_modulo, "`%` is not allowed"),
    ],
    "03.3": [
        (launch_quads_rounded_down, "never written"),
        (launch_quads_per_pair, "wholly idle"),
        (launch_quads_one_row, "never written"),
        (launch_quads_per_row_as_int, "(quads_per_row) is int64 (a Python int)"),
    ],
    "03.4": [
        (no_tail_check, "out of bounds"),
        (loads_first_signed_token, "signed integer div/rem"),
        (second_pair_sign, "a sign is flipped"),
    ],
}
