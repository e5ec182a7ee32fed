import ropelab
from numba import cuda, float32

# uninitialised output read: out[i] += x[i] assumes out starts at zero.
@cuda.jit(fastmath=True)
def copy_accumulate(x, out):
    i = cuda.grid(1)
    out[i] += x[i]


# pair index not doubled: pair p reads floats p and p + 1 instead of 2p and 2p + 1.
@cuda.jit(fastmath=True)
def rotate_pairs_undoubled(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[p]
        x1 = x[p + 1]
        out[p] = x0 * c - x1 * s
        out[p + 1] = x0 * s + x1 * c


# the kernel used by the launch probe below (a correct 00.3 kernel).
@cuda.jit(fastmath=True)
def _rotate_pairs_ok(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c


# launch with blocks of 100 threads: not a multiple of 32 (the step says pick a multiple of 32).
def launch_block_100(x, out, cos_t, sin_t, n_pairs):
    threads = 100
    blocks = (n_pairs + threads - 1) // threads
    _rotate_pairs_ok[blocks, threads](x, out, cos_t, sin_t, n_pairs)


# one thread per float contract broken: even threads write both floats of the pair, odd ones nothing.
@cuda.jit(fastmath=True)
def elements_even_writes_pair(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n and i % 2 == 0:
        p = i // 2
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[i]
        x1 = x[i + 1]
        out[i] = x0 * c - x1 * s
        out[i + 1] = x0 * s + x1 * c


# guard off by one: i <= n lets the thread at i == n touch memory.
@cuda.jit(fastmath=True)
def copy_guard_le(x, out, n):
    i = cuda.grid(1)
    if i <= n:
        out[i] = x[i]


PROBES = [
    ("00.1", "uninit_out_accumulate", copy_accumulate, "fail",
     "out[i] += x[i] reads out before any write (out is not zeroed)"),
    ("00.2", "guard_le_off_by_one", copy_guard_le, "fail",
     "guard i <= n: thread n reads and writes one past the end"),
    ("00.3", "pair_index_not_doubled", rotate_pairs_undoubled, "fail",
     "pair p uses floats p, p+1 instead of 2p, 2p+1 (wrong pair indexing)"),
    ("00.4", "launch_block_not_warp_multiple", launch_block_100, "fail",
     "block of 100 threads: the step says a multiple of 32"),
    ("00.5", "elements_even_thread_writes_pair", elements_even_writes_pair, "fail",
     "thread i must write out[i] alone; here even threads write both floats, odd threads none"),
]
