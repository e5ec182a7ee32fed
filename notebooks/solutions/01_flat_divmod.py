"""Notebook 01's ladder: a solution for every step, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step_id]`` and every function of
``ALSO_RIGHT[step_id]`` (other ways a learner writes it: each must pass) and every function of
``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment next to it).  The steps: 01.1 token and pair of a flat index (the angles of every pair), 01.2
the launch of that kernel, 01.3 each pair's frequency in float32, 01.4 the seed's flat RoPE
kernel.
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, int64, uint64

# --- 01.1: a flat index to (token, pair), one unsigned division --------------------


@cuda.jit(fastmath=True)
def pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)  # unsigned: a plain C division, no floor fix-ups
        token = i // n_pairs  # the one division
        pair = i - token * n_pairs  # the remainder without a second one
        out[i] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def angles_signed(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        n = int64(n_pairs)
        token = idx // n  # signed: Python's floor division
        pair = idx - token * n
        out[idx] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def angles_modulo(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i % n_pairs  # a remainder operator: the exercise asks for a multiply-subtract
        out[i] = float32(positions[token]) * inv_freq[pair]


@cuda.jit(fastmath=True)
def angles_float64(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = positions[token] * inv_freq[pair]  # int32 * float32: computed in float64


@cuda.jit(fastmath=True)
def angles_row_number(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(token) * inv_freq[pair]  # the row, not the token's position


@cuda.jit(fastmath=True)
def angles_grid_stride(out, positions, inv_freq, n_pairs, total_pairs):
    # also right: a grid-stride loop over the signed cuda.grid(1).  The compiler unrolls it and
    # its PTX holds the division 12 times, but the source divides once a trip.
    idx = cuda.grid(1)
    stride = cuda.gridsize(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        out[i] = float32(positions[token]) * inv_freq[i - token * n_pairs]
        idx += stride


@cuda.jit(fastmath=True)
def angles_row_length_divided(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        row = uint64(total_pairs) // uint64(positions.shape[0])  # n_pairs again, by a division
        token = i // row
        out[i] = float32(positions[token]) * inv_freq[i - token * row]


# --- 01.2: the launch, written by the learner ------------------------------------------------


def launch_pair_angles(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads  # one thread per pair, rounded up
    pair_angles[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


def launch_one_row(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (int(n_pairs) + threads - 1) // threads  # the pairs of one row, not of the batch
    pair_angles[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


def launch_thread_per_pair_blocks(out, positions, inv_freq, n_pairs, total_pairs):
    pair_angles[total_pairs, 64](out, positions, inv_freq, uint64(n_pairs),
                                 total_pairs)  # 64x too many


def launch_block_of_everything(out, positions, inv_freq, n_pairs, total_pairs):
    pair_angles[1, total_pairs](out, positions, inv_freq, uint64(n_pairs), total_pairs)  # one block


def launch_n_pairs_as_given(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    # n_pairs as the caller gave it, a Python int: the GPU would build an int64 (signed) kernel
    pair_angles[blocks, threads](out, positions, inv_freq, n_pairs, total_pairs)


def launch_modulo_kernel(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 256
    blocks = (total_pairs + threads - 1) // threads
    angles_modulo[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


# --- 01.3: each pair's frequency, in float32 ---------------------------------------------------


@cuda.jit(fastmath=True)
def pair_frequencies(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)  # 2 pair / hidden
        out[pair] = float32(1.0) / math.pow(base, exponent)


@cuda.jit(fastmath=True)
def frequencies_int_division(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = (pair + pair) / (n_pairs + n_pairs)  # int / int: a float64 in Numba
        out[pair] = float32(1.0) / math.pow(base, exponent)


@cuda.jit(fastmath=True)
def frequencies_no_reciprocal(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        out[pair] = math.pow(base, exponent)  # the frequency falls with the pair: 1 / base ** e


@cuda.jit(fastmath=True)
def frequencies_over_n_pairs(out, n_pairs, base):
    pair = cuda.grid(1)
    if pair < n_pairs:
        exponent = float32(pair + pair) / float32(n_pairs)  # hidden is 2 n_pairs
        out[pair] = float32(1.0) / math.pow(base, exponent)


# --- 01.4: the seed's flat kernel -------------------------------------------------------------


@cuda.jit(fastmath=True)
def my_rope_flat(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:  # the grid is rounded up to whole blocks
        i = uint64(idx)  # unsigned: C-style division, no negative-index fix-ups
        token = i // n_pairs  # the one division
        pair = i - token * n_pairs  # the remainder, by a multiply and a subtract
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c




@cuda.jit(fastmath=True)
def no_guard(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    i = uint64(idx)
    token = i // n_pairs
    pair = i - token * n_pairs
    e = i + i
    x0 = x[e]
    x1 = x[e + uint64(1)]
    exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
    inv_freq = float32(1.0) / math.pow(base, exponent)
    angle = float32(positions[token]) * inv_freq
    c = math.cos(angle)
    s = math.sin(angle)
    out[e] = x0 * c - x1 * s
    out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def pair_off_by_one(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs + uint64(1)  # counts pairs from 1
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        exponent = float32(pair + pair) / float32(n_pairs + n_pairs)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def float64_division(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        exponent = (pair + pair) / (n_pairs + n_pairs)  # int / int: a float64 in Numba
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def signed_index_math(x, out, positions, n_pairs, total_pairs, base):
    # Not in WRONG (01.4 records four already): tests/test_grader.py grades it for the % rule.
    idx = cuda.grid(1)
    if idx < total_pairs:
        n = int64(n_pairs)  # signed: Python's floor // and %, each with sign fix-ups
        token = idx // n
        pair = idx % n
        e = idx + idx
        x0 = x[e]
        x1 = x[e + 1]
        exponent = float32(pair + pair) / float32(n + n)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def signed_division(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        n = int64(n_pairs)  # signed: Python's floor division, with sign fix-ups
        token = idx // n
        pair = idx - token * n  # no %, but the division above is still a signed one
        e = idx + idx
        x0 = x[e]
        x1 = x[e + 1]
        exponent = float32(pair + pair) / float32(n + n)
        inv_freq = float32(1.0) / math.pow(base, exponent)
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + 1] = x0 * s + x1 * c


SOLUTIONS = {
    "01.1": pair_angles,
    "01.2": launch_pair_angles,
    "01.3": pair_frequencies,
    "01.4": my_rope_flat,
}

ALSO_RIGHT = {
    "01.1": [angles_grid_stride],
}

WRONG = {
    "01.1": [
        (angles_signed, "signed integer div/rem"),
        (angles_row_length_divided, "your kernel divides 2 times on one path"),
        (angles_modulo, "`%` is not allowed"),
        (angles_float64, "float64 instructions"),
        (angles_row_number, "read positions[token]"),
    ],
    "01.2": [
        (launch_one_row, "never written"),
        (launch_thread_per_pair_blocks, "wholly idle"),
        (launch_block_of_everything, "illegal launch"),
        (launch_n_pairs_as_given, "but the contract wants uint64: pass numba.uint64(n_pairs)"),
        (launch_modulo_kernel, "`%` is not allowed in angles_modulo, the kernel you launch"),
    ],
    "01.3": [
        (frequencies_int_division, "float64 instructions"),
        (frequencies_no_reciprocal, "the reciprocal is missing"),
        (frequencies_over_n_pairs, "divided by n_pairs instead of hidden"),
    ],
    "01.4": [
        (no_guard, "out of bounds at thread"),
        (pair_off_by_one, "pair index off by one"),
        (float64_division, "float64 instructions"),
        (signed_division, "signed integer div/rem"),
    ],
}
