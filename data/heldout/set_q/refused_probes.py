"""Entries I think are right that the grader refuses (not graded by run_checks.py)."""
import math

from numba import cuda, float32, uint64


# 04.2: thread 0 of each block copies the whole inv_freq table into shared memory alone,
# then every thread waits at the barrier and reads its frequency from the shared table.
# Why I think it is right: the values match, there is no race (the only writer is thread 0,
# every read of the table comes after a barrier all threads reach), each block reads
# inv_freq exactly once and every later read is of the shared copy -- which is what the
# step's "checked:" line in steps.listing() says. The grader refuses it with "thread 0 of
# block 0 copied all 5 entries of inv_freq alone: every thread helps with the copy".
# The step's task text does say "every thread helps", so the refusal follows the prose;
# the checked-line wording just does not mention it. (Slower on a GPU, but correct.)
@cuda.jit(fastmath=True)
def rope_shared_table_thread0_copy(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    if cuda.threadIdx.x == 0:
        k = uint64(0)
        while k < n_pairs:
            table[k] = inv_freq[k]
            k += uint64(1)
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        th = float32(positions[token]) * table[pair]
        c = math.cos(th)
        s = math.sin(th)
        out[i + i] = x[i + i] * c - x[i + i + uint64(1)] * s
        out[i + i + uint64(1)] = x[i + i] * s + x[i + i + uint64(1)] * c


PROBES = [("04.2", "thread0-serial-copy", rope_shared_table_thread0_copy)]
