"""Notebook 00's ladder: a solution for every step, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step_id]`` (it must pass) and every
kernel of ``WRONG[step_id]`` (each must be rejected with a verdict containing the fragment next
to it).  The steps: 00.1 copy, 00.2 guard, 00.3 one pair per thread, 00.4 its launch (a host
function), 00.5 one thread per float (the notebook's first RoPE kernel).
"""

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda

# --- 00.1: one thread per float, the grid exactly as large as the array ------------------


@cuda.jit(fastmath=True)
def copy(x, out):
    i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_thread_index_only(x, out):
    i = cuda.threadIdx.x  # the same 32 floats in every block: later blocks write nothing new
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_from_next(x, out):
    i = cuda.grid(1)
    out[i] = x[i + 1]  # off by one: the last thread reads past the end of x


@cuda.jit(fastmath=True)
def copy_into_input(x, out):
    i = cuda.grid(1)
    x[i] = out[i]  # the arguments the wrong way round: x is overwritten


@cuda.jit(fastmath=True)
def copy_accumulated(x, out):
    i = cuda.grid(1)
    out[i] += x[i]  # adds to out's uninitialised contents instead of storing x[i]


@cuda.jit(fastmath=True)
def copy_two_per_thread(x, out):
    i = cuda.grid(1)
    out[i] = x[i]
    if i + 1 < x.size:
        out[i + 1] = x[i + 1]  # also thread i + 1's float: right values, not the step's mapping


# --- 00.2: the grid rounded up to whole blocks -------------------------------------------


@cuda.jit(fastmath=True)
def copy_guarded(x, out, n):
    i = cuda.grid(1)
    if i < n:  # the last block has threads past the end
        out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_unguarded(x, out, n):
    i = cuda.grid(1)
    out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_guard_inclusive(x, out, n):
    i = cuda.grid(1)
    if i <= n:  # one thread too many: i == n is past the end
        out[i] = x[i]


@cuda.jit(fastmath=True)
def copy_guard_short(x, out, n):
    i = cuda.grid(1)
    if i < n - 1:  # one thread too few: the last float is never copied
        out[i] = x[i]


# --- 00.3: one thread per pair, cos and sin given ----------------------------------


@cuda.jit(fastmath=True)
def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)  # this thread's pair
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]  # the pair's two floats sit side by side
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rotate_pairs_swapped(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = sin_t[p]  # the tables read the wrong way round
        s = cos_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rotate_pairs_backwards(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c + x1 * s  # the signs of a rotation by minus the angle
        out[2 * p + 1] = x1 * c - x0 * s


@cuda.jit(fastmath=True)
def rotate_pairs_guard_floats(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < 2 * n_pairs:  # counts floats, not pairs: half the threads index past the tables
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def rotate_pairs_same_float(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[p]  # the pair's floats are 2p and 2p + 1, not p and p + 1
        x1 = x[p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


# --- 00.4: the launch, written by the learner ------------------------------------------------


def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    threads = 128  # four warps; any multiple of 32 up to 1024 works
    blocks = (n_pairs + threads - 1) // threads  # rounded up: the last block may be partial
    rotate_pairs[blocks, threads](x, out, cos_t, sin_t, n_pairs)


def launch_rounded_down(x, out, cos_t, sin_t, n_pairs):
    threads = 128
    blocks = n_pairs // threads  # rounded down: the pairs of the partial block are lost
    rotate_pairs[max(blocks, 1), threads](x, out, cos_t, sin_t, n_pairs)


def launch_block_per_pair(x, out, cos_t, sin_t, n_pairs):
    rotate_pairs[n_pairs, 128](x, out, cos_t, sin_t, n_pairs)  # 128 times the threads needed


def launch_too_wide(x, out, cos_t, sin_t, n_pairs):
    threads = 2048  # more than a block may hold
    rotate_pairs[(n_pairs + threads - 1) // threads, threads](x, out, cos_t, sin_t, n_pairs)


def launch_one_thread_per_block(x, out, cos_t, sin_t, n_pairs):
    rotate_pairs[n_pairs, 1](x, out, cos_t, sin_t, n_pairs)  # every pair covered, 1/32 of a warp


@cuda.jit(fastmath=True)
def rotate_pairs_float64(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p] * 1.0  # a bare 1.0 is a float64: the rotation runs in float64
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


def launch_float64_kernel(x, out, cos_t, sin_t, n_pairs):
    threads = 128
    rotate_pairs_float64[(n_pairs + threads - 1) // threads, threads](x, out, cos_t, sin_t,
                                                                      n_pairs)


# --- 00.5: one thread per float ---------------------------------------------------------------


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


@cuda.jit(fastmath=True)
def both_floats_per_thread(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        p = i // 2
        c = cos_t[p]
        s = sin_t[p]
        e = 2 * p
        x0 = x[e]
        x1 = x[e + 1]
        out[e] = x0 * c - x1 * s  # both floats of the pair, from both of its threads
        out[e + 1] = x0 * s + x1 * c


SOLUTIONS = {
    "00.1": copy,
    "00.2": copy_guarded,
    "00.3": rotate_pairs,
    "00.4": launch_rotate_pairs,
    "00.5": rotate_elements,
}

WRONG = {
    "00.1": [
        (copy_thread_index_only, "never written"),
        (copy_from_next, "out of bounds"),
        (copy_into_input, "wrote into its input x"),
        (copy_accumulated, "read before it is written"),
        (copy_two_per_thread, "which is thread 1 of block 0's to write"),
    ],
    "00.2": [
        (copy_unguarded, "out of bounds"),
        (copy_guard_inclusive, "out of bounds"),
        (copy_guard_short, "never written"),
    ],
    "00.3": [
        (rotate_pairs_swapped, "cos and sin are swapped"),
        (rotate_pairs_backwards, "a sign is flipped"),
        (rotate_pairs_guard_floats, "out of bounds"),
        (rotate_pairs_same_float, "x0 = x[2p]"),
    ],
    "00.4": [
        (launch_rounded_down, "never written"),
        (launch_block_per_pair, "wholly idle"),
        (launch_too_wide, "illegal launch"),
        (launch_one_thread_per_block, "not a multiple of 32"),
        (launch_float64_kernel, "in rotate_pairs_float64, the kernel you launch"),
    ],
    "00.5": [
        (no_guard, "out of bounds at thread"),
        (flipped_sign, "a sign is flipped"),
        (cos_sin_swapped, "cos and sin are swapped"),
        (both_floats_per_thread, "thread i writes out[i] alone"),
    ],
}
