"""Notebook 02's steps: solutions, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` runs ``SOLUTIONS[step_id]`` (it must pass) and every
function of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment
next to it).
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def my_rope_block2d(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:  # pairs tid, tid + blockDim, ...: any row width, any block size
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)




@cuda.jit(fastmath=True)
def if_instead_of_loop(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    if pair < n_pairs:  # the seed's kernel: one pair per thread, so pairs past blockDim are lost
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def loop_one_too_far(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = float32(2.0) / float32(n_pairs + n_pairs)
    pair = uint64(cuda.threadIdx.x)
    while pair <= n_pairs:  # <=: one pair past the row
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)


@cuda.jit(fastmath=True)
def float64_literal(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    row = uint64(token) * (n_pairs + n_pairs)
    pos = float32(positions[token])
    exponent_step = 2.0 / float32(n_pairs + n_pairs)  # a bare 2.0 is a float64
    pair = uint64(cuda.threadIdx.x)
    while pair < n_pairs:
        inv_freq = float32(1.0) / math.pow(base, float32(pair) * exponent_step)
        angle = pos * inv_freq
        i = row + pair + pair
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        pair += uint64(cuda.blockDim.x)


SOLUTIONS = {
    "02.1": my_rope_block2d,
}

WRONG = {
    "02.1": [
        (if_instead_of_loop, "never written"),
        (loop_one_too_far, "out of bounds"),
        (float64_literal, "float64 instructions"),
    ],
}
