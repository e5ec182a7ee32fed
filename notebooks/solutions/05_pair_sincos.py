"""Notebook 05's steps: solutions, and wrong attempts the grader must reject.
reject.

``python -m ropelab exercises --verify`` runs ``SOLUTIONS[step_id]`` (it must pass) and every
function of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment
next to it).
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, uint64


@cuda.jit(fastmath=True)
def my_rope_strided(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                    stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride  # stride threads share a row
        j = i - token * stride  # this thread's first slot
        first = token * (n_pairs + n_pairs)
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))  # the thread's one pow
        while j < n_pairs:
            a = first + j + j
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio  # the frequency of slot j + stride, without a pow
            j += stride




@cuda.jit(fastmath=True)
def pow_per_slot(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                 stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        first = token * (n_pairs + n_pairs)
        pos = float32(positions[token])
        while j < n_pairs:
            f = math.pow(base, exponent_step * float32(j))  # right, but a pow for every slot
            a = first + j + j
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            j += stride


@cuda.jit(fastmath=True)
def frequency_not_stepped(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                          stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        first = token * (n_pairs + n_pairs)
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j < n_pairs:
            a = first + j + j
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            j += stride  # f never moves on


@cuda.jit(fastmath=True)
def last_slot_skipped(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
                      stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        token = i // stride
        j = i - token * stride
        first = token * (n_pairs + n_pairs)
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j + stride < n_pairs:  # stops one slot early
            a = first + j + j
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[a + uint64(1)]
            out[a] = x0 * c - x1 * s
            out[a + uint64(1)] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


SOLUTIONS = {
    "05.1": my_rope_strided,
}

WRONG = {
    "05.1": [
        (pow_per_slot, "pow"),
        (frequency_not_stepped, "frequency of its first slot"),
        (last_slot_skipped, "never written"),
    ],
}
