import ropelab
from numba import cuda, float32, uint64
import math

# float64 creeping in: a bare -2.0 literal in the exponent.
@cuda.jit(fastmath=True)
def one_angle_bare_literal(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, -2.0 * float32(pair) / float32(n_pairs + n_pairs))
        angle = float32(positions[token]) * f
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# CORRECT but unusual: a grid-stride loop, one sin and one cos per pair executed.
@cuda.jit(fastmath=True)
def one_angle_grid_stride(x, out, positions, n_pairs, total_pairs, base, exponent_step):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        pair = i - token * n_pairs
        f = math.pow(base, exponent_step * float32(pair))
        angle = float32(positions[token]) * f
        e = uint64(2) * i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        c = math.cos(angle)
        s = math.sin(angle)
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        i += stride


# the recurrence forgotten: f is never multiplied by stride_ratio.
@cuda.jit(fastmath=True)
def strided_no_recurrence(x, out, positions, n_pairs, stride, total_threads, base, exponent_step,
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
            j += stride


# CORRECT but unusual: 05.4 inside a grid-stride loop over work units (one pow per unit).
@cuda.jit(fastmath=True)
def heads_grid_stride_units(x, out, positions, heads, half_dim, stride, total_threads, step,
                            partner, base, exponent_step, stride_ratio):
    u = uint64(cuda.grid(1))
    grid = uint64(cuda.gridsize(1))
    total = uint64(total_threads)
    while u < total:
        head_row = u // stride
        j = u - head_row * stride
        token = head_row // heads
        first = (head_row * half_dim) << uint64(1)
        pos = float32(positions[token])
        f = math.pow(base, exponent_step * float32(j))
        while j < half_dim:
            a = first + j * step
            x0 = x[a]
            x1 = x[a + partner]
            c = math.cos(pos * f)
            s = math.sin(pos * f)
            out[a] = x0 * c - x1 * s
            out[a + partner] = x1 * c + x0 * s
            f *= stride_ratio
            j += stride
        u += grid


PROBES = [
    ("05.1", "f64_bare_literal", one_angle_bare_literal, "fail",
     "bare -2.0 literal in the exponent: float64 arithmetic"),
    ("05.1", "grid_stride_one_angle", one_angle_grid_stride, "pass",
     "correct: one sin and one cos per pair executed; a grid-stride loop makes the compiler duplicate the body (static count 4)"),
    ("05.2", "frequency_never_stepped", strided_no_recurrence, "fail",
     "f = f * stride_ratio missing: every slot uses the first slot's frequency"),
    ("05.4", "grid_stride_units_pow", heads_grid_stride_units, "pass",
     "correct: one pow per work unit; the pow sits in the grid-stride loop, none in the slot loop"),
]
