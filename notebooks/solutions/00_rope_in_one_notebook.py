"""Notebook 00's steps: solutions, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` runs ``SOLUTIONS[step_id]`` (it must pass) and every
function of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment
next to it).
"""

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda


@cuda.jit(fastmath=True)
def rotate_elements(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)  # this thread's float
    if i < n:  # the last block has threads past the end
        c = cos_t[i // 2]  # both floats of pair i // 2 turn by the same angle
        s = sin_t[i // 2]
        if i % 2 == 0:  # first float of its pair
            out[i] = x[i] * c - x[i + 1] * s
        else:  # second float
            out[i] = x[i - 1] * s + x[i] * c




@cuda.jit(fastmath=True)
def no_guard(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    c = cos_t[i // 2]
    s = sin_t[i // 2]
    if i % 2 == 0:
        out[i] = x[i] * c - x[i + 1] * s
    else:
        out[i] = x[i - 1] * s + x[i] * c


@cuda.jit(fastmath=True)
def flipped_sign(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        c = cos_t[i // 2]
        s = sin_t[i // 2]
        if i % 2 == 0:
            out[i] = x[i] * c - x[i + 1] * s
        else:
            out[i] = x[i] * c - x[i - 1] * s  # minus: the pair turns backwards


@cuda.jit(fastmath=True)
def cos_sin_swapped(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        c = sin_t[i // 2]  # the tables read the wrong way round
        s = cos_t[i // 2]
        if i % 2 == 0:
            out[i] = x[i] * c - x[i + 1] * s
        else:
            out[i] = x[i - 1] * s + x[i] * c


SOLUTIONS = {
    "00.1": rotate_elements,
}

WRONG = {
    "00.1": [
        (no_guard, "out of bounds at thread"),
        (flipped_sign, "a sign is flipped"),
        (cos_sin_swapped, "cos and sin are swapped"),
    ],
}
