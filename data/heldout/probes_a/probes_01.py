import ropelab
from numba import cuda, float32, uint64
import math

# guard off by one: idx <= total_pairs.
@cuda.jit(fastmath=True)
def angles_guard_le(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx <= total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]


# a correct 01.1 kernel for the launch probe.
@cuda.jit(fastmath=True)
def _angles_ok(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]


# launch one block too many: ceil(total / 64) + 1 (the last block is wholly idle).
def launch_extra_block(out, positions, inv_freq, n_pairs, total_pairs):
    threads = 64
    blocks = (total_pairs + threads - 1) // threads + 1
    _angles_ok[blocks, threads](out, positions, inv_freq, uint64(n_pairs), total_pairs)


# float64 creeping in: int32 position times float32 frequency (no float32(...) around it).
@cuda.jit(fastmath=True)
def flat_int_times_float(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) / float32(n_pairs + n_pairs))
        angle = positions[token] * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        e = i + i
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c


# signed division: token = idx // n_pairs on the int64 thread index (no uint64 conversion).
@cuda.jit(fastmath=True)
def flat_signed_division(x, out, positions, n_pairs, total_pairs, base):
    idx = cuda.grid(1)
    if idx < total_pairs:
        n = int(n_pairs)
        token = idx // n
        pair = idx - token * n
        inv_freq = float32(1.0) / math.pow(base, float32(pair + pair) / float32(n + n))
        angle = float32(positions[token]) * inv_freq
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[2 * idx]
        x1 = x[2 * idx + 1]
        out[2 * idx] = x0 * c - x1 * s
        out[2 * idx + 1] = x0 * s + x1 * c


PROBES = [
    ("01.1", "angles_guard_off_by_one", angles_guard_le, "fail",
     "guard idx <= total_pairs: one thread past the end reads positions/writes out"),
    ("01.2", "launch_extra_idle_block", launch_extra_block, "fail",
     "one block more than ceil(total_pairs / 64): a wholly idle block"),
    ("01.4", "f64_int32_times_float32", flat_int_times_float, "fail",
     "positions[token] (int32) * float32 frequency is computed in float64"),
    ("01.4", "signed_floor_division", flat_signed_division, "fail",
     "idx // n on signed int64: div.s64 with floor fix-ups (rule: one unsigned division)"),
]
