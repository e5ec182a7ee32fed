"""The ladder of notebook 05 (one sin/cos per pair, one pow per thread): a solution for every
step, and wrong attempts the grader must reject.

``python -m ropelab exercises --verify`` grades ``SOLUTIONS[step]`` (it must pass) and every
function of ``WRONG[step]`` (each must be rejected with a verdict containing the fragment next
to it).  The steps climb: one angle per pair, shared by its two floats; strided slots with the
frequency recurrence; the launch that computes the stride and its ratio on the host; the whole
pair_sincos variant (heads, both layouts).
"""

import math

import ropelab  # noqa: F401  (chooses the GPU or the simulator before numba.cuda is imported)
from numba import cuda, float32, uint64

PAIRS_PER_THREAD = 4  # slots per thread in steps 2-4: stride = ceil(n_pairs / 4)


# --- step 1: one angle per pair, shared by both floats -------------------------------------

@cuda.jit(fastmath=True)
def rope_one_angle(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        f = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * f
        c = math.cos(angle)  # one cos and one sin, for both floats of the pair
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def exponent_in_float64(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        f = math.pow(base, exponent_step * pair)  # float32 * uint64: computed in float64
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def angle_per_float(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        pos = float32(positions[token])
        # the second float's angle uses the next pair's exponent: one angle per float
        c0 = math.cos(pos * math.pow(base, exponent_step * float32(pair)))
        s0 = math.sin(pos * math.pow(base, exponent_step * float32(pair)))
        c1 = math.cos(pos * math.pow(base, exponent_step * float32(pair + uint64(1))))
        s1 = math.sin(pos * math.pow(base, exponent_step * float32(pair + uint64(1))))
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c0 - x1 * s0
        out[e + uint64(1)] = x0 * s1 + x1 * c1


@cuda.jit(fastmath=True)
def exponent_of_the_float(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        f = math.pow(base, exponent_step * float32(pair + pair))  # the float's index, not the pair's
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


@cuda.jit(fastmath=True)
def angle_for_each_float(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        pos = float32(positions[token])
        # right values, but each float turns by an angle of its own (one value reached two
        # ways): two sin and two cos for the pair
        a0 = pos * math.pow(base, exponent_step * float32(pair))
        a1 = pos * math.exp(exponent_step * float32(pair) * math.log(base))
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[e + uint64(1)] = x0 * math.sin(a1) + x1 * math.cos(a1)


@cuda.jit(fastmath=True)
def grid_stride_angle_for_each_float(x, out, positions, n_pairs, total_pairs, base,
                                     exponent_step):
    # the same mistake in a grid-stride loop, which the compiler duplicates: counted per pass
    # (one trip round the loop), the pair still has two sin and two cos
    i = uint64(cuda.grid(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        pos = float32(positions[token])
        a0 = pos * math.pow(base, exponent_step * float32(pair))
        a1 = pos * math.exp(exponent_step * float32(pair) * math.log(base))
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * math.cos(a0) - x1 * math.sin(a0)
        out[e + uint64(1)] = x0 * math.sin(a1) + x1 * math.cos(a1)
        i += uint64(cuda.gridsize(1))

# --- step 2: strided slots with the recurrence (the exercise this notebook had before) ------

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


# --- step 3: the launch: stride and stride_ratio computed on the host -----------------------

def launch_strided(x, out, positions, tokens, hidden, base):
    """stride threads per row, PAIRS_PER_THREAD slots each; the ratio in float64, rounded once."""
    n_pairs = hidden // 2
    stride = (n_pairs + PAIRS_PER_THREAD - 1) // PAIRS_PER_THREAD
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)  # float64 on the host
    threads = 64
    blocks = (total_threads + threads - 1) // threads
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                     total_threads, float32(base), float32(exponent_step),
                                     float32(stride_ratio))


def launch_floor_blocks(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + PAIRS_PER_THREAD - 1) // PAIRS_PER_THREAD
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = max(total_threads // threads, 1)  # rounds down: the last partial block is lost
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                     total_threads, float32(base), float32(exponent_step),
                                     float32(stride_ratio))


def launch_ratio_of_one_pair(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + PAIRS_PER_THREAD - 1) // PAIRS_PER_THREAD
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** exponent_step  # the ratio of neighbouring pairs, not of stride apart
    threads = 64
    blocks = (total_threads + threads - 1) // threads
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                     total_threads, float32(base), float32(exponent_step),
                                     float32(stride_ratio))


def launch_thread_per_pair(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + PAIRS_PER_THREAD - 1) // PAIRS_PER_THREAD
    total_threads = tokens * n_pairs  # a thread per pair: most threads find no slot
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = (total_threads + threads - 1) // threads
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                     tokens * stride, float32(base), float32(exponent_step),
                                     float32(stride_ratio))


# --- step 4: the pair_sincos variant: heads and both pair layouts ---------------------------

@cuda.jit(fastmath=True)
def rope_pair_sincos_heads(x, out, positions, heads, half_dim, stride, total_threads, step,
                           partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride  # token * heads + head: stride threads share a head
        j = i - head_row * stride
        first = head_row * (half_dim + half_dim)
        pos = float32(positions[head_row // heads])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            b = a + partner
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def interleaved_only(x, out, positions, heads, half_dim, stride, total_threads, step, partner,
                     base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = head_row * (half_dim + half_dim)
        pos = float32(positions[head_row // heads])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j + j  # always (2j, 2j+1): step and partner ignored
            b = a + uint64(1)
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def head_row_as_token(x, out, positions, heads, half_dim, stride, total_threads, step, partner,
                      base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        first = head_row * (half_dim + half_dim)
        pos = float32(positions[head_row])  # a head's row, not its token
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            b = a + partner
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


@cuda.jit(fastmath=True)
def first_float_of_the_token(x, out, positions, heads, half_dim, stride, total_threads, step,
                             partner, base, exponent_step, stride_ratio):
    idx = cuda.grid(1)
    if idx < total_threads:
        i = uint64(idx)
        head_row = i // stride
        j = i - head_row * stride
        token = head_row // heads
        first = token * (half_dim + half_dim)  # the token's first float, not the head's
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            b = a + partner
            angle = pos * f
            c = math.cos(angle)
            s = math.sin(angle)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            f = f * stride_ratio
            j += stride


def launch_ratio_as_float(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + PAIRS_PER_THREAD - 1) // PAIRS_PER_THREAD
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    stride_ratio = base ** (exponent_step * stride)
    threads = 64
    blocks = (total_threads + threads - 1) // threads
    my_rope_strided[blocks, threads](x, out, positions, uint64(n_pairs), uint64(stride),
                                     total_threads, float32(base), float32(exponent_step),
                                     stride_ratio)  # a Python float: a float64 recurrence



@cuda.jit(fastmath=True)
def units_loop_pow_per_slot(x, out, positions, heads, half_dim, stride, total_threads, step,
                            partner, base, exponent_step, stride_ratio):
    # a grid-stride loop over work units may compute its unit's pow; this one computes a pow
    # in the loop over the slots, for every slot
    u = uint64(cuda.grid(1))
    while u < uint64(total_threads):
        head_row = u // stride
        j = u - head_row * stride
        first = head_row * (half_dim + half_dim)
        pos = float32(positions[head_row // heads])
        while j < half_dim:
            f = math.pow(base, exponent_step * float32(j))
            a = first + j * step
            b = a + partner
            c = math.cos(pos * f)
            s = math.sin(pos * f)
            x0 = x[a]
            x1 = x[b]
            out[a] = x0 * c - x1 * s
            out[b] = x0 * s + x1 * c
            j += stride
        u += uint64(cuda.gridsize(1))

SOLUTIONS = {
    "05.1": rope_one_angle,
    "05.2": my_rope_strided,
    "05.3": launch_strided,
    "05.4": rope_pair_sincos_heads,
}

WRONG = {
    "05.1": [(exponent_in_float64, "float64 instructions"), (angle_per_float, "off by one"),
             (exponent_of_the_float, "counts floats, not pairs"),
             (angle_for_each_float, "(one pair) computes 4 sin/cos (the goal: 2"),
             (grid_stride_angle_for_each_float, "(one pair) computes 4 sin/cos (the goal: 2")],
    "05.2": [(pow_per_slot, "inside the loop that rotates the slots, once per slot"), (frequency_not_stepped, "frequency of its first slot"),
             (last_slot_skipped, "never written")],
    "05.3": [(launch_floor_blocks, "never written"), (launch_ratio_of_one_pair, "not of neighbouring pairs"),
             (launch_thread_per_pair, "idle"),
             (launch_ratio_as_float, "(stride_ratio) is float64 (a Python float)")],
    "05.4": [(interleaved_only, "other layout"), (head_row_as_token, "out of bounds"),
             (first_float_of_the_token, "wrong: token 0, head 1"),
             (units_loop_pow_per_slot, "inside the loop that rotates the slots, once per slot")],
}
